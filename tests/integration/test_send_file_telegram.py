"""The agent sends files in Telegram: the model writes a CSV in the workspace and calls `send_file`, and the
real python-telegram-bot uploads it (multipart `sendDocument`, an image by `sendPhoto`) to the fake Bot API,
into the chat and forum topic the person wrote in, once, a 429 during the upload waited out."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_harness import Engine, fake_llm_environment, make_profile
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeFile, FakeTelegram, FakeUser
from files_kit import png
from outlets_kit import TelegramBot

from hermes_engine.workspace.feature import WorkspaceFeature
from hermes_engine.workspace.sending import FileOutlets
from hermes_gateway.wiring import attachment_folder

ALICE = FakeUser(42, "Alice", "alice")
GROUP = -100777
FAST = {"edit_interval_seconds": 0.05, "group_interval_seconds": 0.05, "poll_timeout": 1, "poll_backoff": 0.2,
        "poll_backoff_max": 1.0, "send_backoff": 0.1, "send_backoff_max": 0.5}
CSV = "region,sales\nnorth,12\nsouth,7\n"

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


def writes_then_sends(path: str, content: str, caption: str = "", then: str = "Sent."):
    """The model writes `path`, sends it, then answers `then` with the tool's result appended."""
    def respond(request):
        results = request.turn_tool_results
        if not results:
            return Reply(tool_calls=[("write_file", {"path": path, "content": content})])
        if len(results) == 1:
            return Reply(tool_calls=[("send_file", {"path": path, "caption": caption})])
        return Reply(text=f"{then} [{results[-1]}]")
    return respond


class Bot(TelegramBot):
    """One gateway with the files toolset and the real Telegram adapter, as `serve` wires them."""

    def __init__(self, telegram: FakeTelegram, home: Path) -> None:
        self.telegram, self.home = telegram, home
        self.profile = make_profile(toolsets=["core", "files"], access={"admins": ["42"]},
                                    platforms={"telegram": FAST})
        self.outlets = FileOutlets()
        self.feature = WorkspaceFeature(home, self.profile.name, self.profile.workspace, admins=["42"],
                                        toolsets=self.profile.toolsets, outlets=self.outlets,
                                        attachments=attachment_folder(home))
        super().__init__(Engine(home, self.profile, [self.feature]), FAST, self.outlets)


@pytest.fixture
async def bot(telegram, fake_llm, tmp_path, monkeypatch):
    for name, value in fake_llm_environment(fake_llm).items():
        monkeypatch.setenv(name, value)
    started = await Bot(telegram, tmp_path).start()
    yield started
    await started.stop()


async def test_a_csv_the_agent_wrote_reaches_the_person_as_a_document_once(bot, telegram, fake_llm):
    fake_llm.responder = writes_then_sends("report.csv", CSV, caption="This month's sales")
    telegram.user_says(ALICE.id, ALICE, "send me the sales as a CSV")
    answer = await telegram.wait_for(
        lambda: next((m for m in telegram.chat(ALICE.id).bot_messages if m.text.startswith("Sent.")), None), 15)
    await telegram.settle(quiet=0.5)

    [sent] = [m for m in telegram.chat(ALICE.id).bot_messages if m.file is not None]
    assert sent.file is not None and sent.file.kind == "document"
    assert (sent.file.name, sent.file.data) == ("report.csv", CSV.encode())
    assert sent.text == "This month's sales"  # the caption
    assert sent.message_id < answer.message_id
    assert "Sent report.csv (" in answer.text


async def test_an_image_goes_as_a_photo_into_the_topic_it_was_asked_in(bot, telegram, fake_llm):
    image = png(8, 8)

    def respond(request):
        if not request.turn_tool_results:
            return Reply(tool_calls=[("write_file", {"path": "chart.txt", "content": "placeholder"})])
        if len(request.turn_tool_results) == 1:
            folder = next((bot.home / "workspaces").rglob("chart.txt")).parent
            (folder / "chart.png").write_bytes(image)  # a chart the terminal would have drawn
            return Reply(tool_calls=[("send_file", {"path": "chart.png"})])
        return Reply(text="Here is the chart.")

    fake_llm.responder = respond
    telegram.user_says(GROUP, ALICE, f"@{telegram.bot.username} draw the chart", chat_type="supergroup",
                       thread_id=5, is_forum=True)
    await telegram.wait_for_text(GROUP, "Here is the chart.", 15)

    [photo] = [m for m in telegram.chat(GROUP).bot_messages if m.file is not None]
    assert photo.file is not None and photo.file.kind == "photo" and photo.file.data == image
    assert photo.thread_id == 5


async def test_a_429_during_the_upload_is_waited_out_and_the_file_sent_once(bot, telegram, fake_llm):
    fake_llm.responder = writes_then_sends("report.csv", CSV)
    telegram.rate_limit(ALICE.id, retry_after=1, methods=("sendDocument",))
    telegram.user_says(ALICE.id, ALICE, "send me the sales")
    await telegram.wait_for(
        lambda: any(m.text.startswith("Sent.") for m in telegram.chat(ALICE.id).bot_messages), 20)
    await telegram.settle(quiet=0.5)

    chat = telegram.chat(ALICE.id)
    uploads = [c for c in chat.calls if c.method == "sendDocument"]
    assert [c.status for c in uploads] == [429, 200]
    assert uploads[1].time - uploads[0].time >= 0.9  # retry_after was respected
    assert chat.violations == []
    assert len([m for m in chat.bot_messages if m.file is not None]) == 1


async def test_a_path_outside_the_workspace_is_refused_with_a_reason_and_nothing_sent(bot, telegram, fake_llm):
    def respond(request):
        if not request.turn_tool_results:
            return Reply(tool_calls=[("send_file", {"path": "../../etc/passwd"})])
        return Reply(text=f"Could not: {request.turn_tool_results[-1]}")

    fake_llm.responder = respond
    telegram.user_says(ALICE.id, ALICE, "send me /etc/passwd")
    answer = await telegram.wait_for(
        lambda: next((m for m in telegram.chat(ALICE.id).bot_messages if m.text.startswith("Could not")), None), 15)
    assert "outside the workspace" in answer.text
    assert not [m for m in telegram.chat(ALICE.id).bot_messages if m.file is not None]


async def test_an_image_telegram_refuses_as_a_photo_goes_as_a_document(bot, telegram, fake_llm):
    strip = png(400, 4)  # a long, thin chart: PHOTO_INVALID_DIMENSIONS

    def respond(request):
        if not request.turn_tool_results:
            return Reply(tool_calls=[("write_file", {"path": "strip.png", "content": "x"})])
        if len(request.turn_tool_results) == 1:
            next((bot.home / "workspaces").rglob("strip.png")).write_bytes(strip)
            return Reply(tool_calls=[("send_file", {"path": "strip.png"})])
        return Reply(text="Here is the strip.")

    fake_llm.responder = respond
    telegram.user_says(ALICE.id, ALICE, "the strip chart")
    await telegram.wait_for_text(ALICE.id, "Here is the strip.", 15)

    [sent] = [m for m in telegram.chat(ALICE.id).bot_messages if m.file is not None]
    assert sent.file is not None and (sent.file.kind, sent.file.data) == ("document", strip)
    assert [c.status for c in telegram.chat(ALICE.id).calls if c.method in ("sendPhoto", "sendDocument")] == [400, 200]


async def test_a_file_the_person_sent_can_be_sent_back_by_its_name(bot, telegram, fake_llm):
    def respond(request):
        if not request.turn_tool_results:
            return Reply(tool_calls=[("send_file", {"path": "/attachments/notes.csv", "caption": "Yours"})])
        return Reply(text=f"Back. [{request.turn_tool_results[-1]}]")

    fake_llm.responder = respond
    telegram.user_says(ALICE.id, ALICE, "send it back", document=FakeFile("notes.csv", CSV.encode(), "text/csv"))
    answer = await telegram.wait_for(
        lambda: next((m for m in telegram.chat(ALICE.id).bot_messages if m.text.startswith("Back.")), None), 15)

    [sent] = [m for m in telegram.chat(ALICE.id).bot_messages if m.file is not None]
    assert sent.file is not None and (sent.file.name, sent.file.data) == ("notes.csv", CSV.encode())
    assert "Sent notes.csv (" in answer.text
