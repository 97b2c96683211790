"""A message's files are fetched in its turn, after the inbox recorded it: through the fetcher its platform's
outlet offers, before the model reads the message; a refusal is told under the event's own key; with no
fetcher the message is still answered. A real gateway (SQLite, the fake LLM); the platform is a recording
outlet whose fetcher keeps what it was asked."""

from __future__ import annotations

import base64
from dataclasses import replace
from pathlib import Path

from engine_harness import RecordingOutlet
from fakes.fake_llm import Reply
from files_kit import png, sent_images

from hermes_engine.core.fetching import NOT_DOWNLOADED
from hermes_engine.ports.fetching import FetchedAttachment
from hermes_engine.ports.inbound import Attachment, ReplyTarget

SHOT = Attachment("", "shot.png", "image/png", 0, source="https://files.example/shot.png")
HUGE = Attachment("", "huge.zip", "application/zip", 0, source="https://files.example/huge.zip")


class Fetcher:
    """Writes each asked-for file into `folder` (PNG bytes); refuses `huge.zip` for its size."""

    platform = "test"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.asked: list[tuple[tuple[Attachment, ...], str, str]] = []

    async def fetch_pending(self, attachments: tuple[Attachment, ...], session_key: str,
                            message_id: str) -> list[FetchedAttachment]:
        self.asked.append((attachments, session_key, message_id))
        out = []
        for a in attachments:
            if a.file_name == "huge.zip":
                out.append(FetchedAttachment(replace(a, kind="document", size=10**9, refused_reason="too big"),
                                             "I did not read huge.zip: it is too big."))
                continue
            path = self.folder / f"{message_id}-{a.file_name}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(png())
            out.append(FetchedAttachment(replace(a, kind="photo", size=len(png()), path=str(path))))
        return out


class FetchingOutlet(RecordingOutlet):
    def __init__(self, fetcher: Fetcher | None) -> None:
        super().__init__("test")
        self.fetcher = fetcher
        self.keys: list[str | None] = []

    async def send(self, target: ReplyTarget, text: str, *, idempotency_key: str | None = None) -> None:
        self.keys.append(idempotency_key)
        await super().send(target, text, idempotency_key=idempotency_key)

    def attachment_fetcher(self) -> Fetcher | None:
        return self.fetcher


async def started(engine, outlet: FetchingOutlet):
    e = await engine()
    e.outlet = outlet
    e.gateway.attach(outlet)
    return e


async def test_a_pending_file_is_fetched_in_the_turn_before_the_model_reads_it(engine, fake_llm, tmp_path):
    fetcher = Fetcher(tmp_path / "files")
    e = await started(engine, FetchingOutlet(fetcher))
    fake_llm.script(Reply(text="A login error."))
    msg = e.message("what is wrong?", attachments=(SHOT,))
    await e.gateway.handle(msg)
    await e.outlet.wait_for(1)
    await e.idle()

    assert e.outlet.texts == ["A login error."]
    assert fetcher.asked == [((SHOT,), e.gateway.session_key(msg), msg.message_id)]  # once
    request = fake_llm.requests[0]
    assert sent_images(request) == [f"data:image/png;base64,{base64.b64encode(png()).decode()}"]
    assert "[attachment: photo shot.png (image/png, 1 KB)]" in request.last_user_text


async def test_a_file_refused_for_its_size_is_told_under_the_events_own_key_and_the_turn_goes_on(
        engine, fake_llm, tmp_path):
    e = await started(engine, FetchingOutlet(Fetcher(tmp_path / "files")))
    fake_llm.script(Reply(text="Two files, one too big."))
    msg = e.message("two files", attachments=(SHOT, HUGE))
    await e.gateway.handle(msg)
    await e.outlet.wait_for(2)
    await e.idle()

    assert e.outlet.texts == ["I did not read huge.zip: it is too big.", "Two files, one too big."]
    assert e.outlet.keys == [f"{msg.event_id}:file:1"]  # what a replay sends again under, and the ledger drops
    text = fake_llm.requests[0].last_user_text
    assert "[attachment: photo shot.png" in text and "[attachment refused: huge.zip" in text


async def test_without_a_fetcher_for_its_platform_the_file_is_described_as_not_downloaded_and_answered(
        engine, fake_llm):
    e = await started(engine, FetchingOutlet(None))
    fake_llm.script(Reply(text="I could not see it."))
    await e.gateway.handle(e.message("look", attachments=(SHOT,)))
    await e.outlet.wait_for(1)
    await e.idle()

    assert e.outlet.texts == ["I could not see it."]
    assert f"[attachment refused: shot.png (image/png, 1 KB): {NOT_DOWNLOADED}]" in fake_llm.requests[0].last_user_text


class BrokenFetcher(Fetcher):
    async def fetch_pending(self, attachments: tuple[Attachment, ...], session_key: str,
                            message_id: str) -> list[FetchedAttachment]:
        raise OSError(28, "No space left on device")


async def test_a_fetcher_that_fails_outright_leaves_the_file_not_downloaded_and_the_message_answered(
        engine, fake_llm, tmp_path):
    e = await started(engine, FetchingOutlet(BrokenFetcher(tmp_path / "files")))
    fake_llm.script(Reply(text="I could not read it."))
    await e.gateway.handle(e.message("look", attachments=(SHOT,)))
    await e.outlet.wait_for(1)
    await e.idle()

    assert e.outlet.texts == ["I could not read it."]
    assert f"[attachment refused: shot.png (image/png, 1 KB): {NOT_DOWNLOADED}]" in fake_llm.requests[0].last_user_text
