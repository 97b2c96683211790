"""The agent sends files on Discord: `send_file` posts a message with the file attached through discord.py
(multipart `payload_json` + `files[0]`) to the fake Discord, in the thread of the question, once, a 429 on
the upload waited out; a file over the 10 MB limit is refused before anything is sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from discord_kit import FAST, discord_environment
from engine_harness import Engine, fake_llm_environment, make_profile
from fakes.fake_discord import FakeDiscord
from fakes.fake_llm import FakeLLM, Reply
from outlets_kit import Served

from adapters.discord import PLATFORM
from hermes_engine.config import AccessRules
from hermes_engine.workspace.feature import WorkspaceFeature
from hermes_engine.workspace.sending import FileOutlets

CSV = "region,sales\nnorth,12\nsouth,7\n"
POST_ROUTE = "/channels/{channel_id}/messages"


@pytest.fixture
async def fake_discord():
    async with FakeDiscord() as fake:
        yield fake


@pytest.fixture
async def discord_bot(fake_llm: FakeLLM, fake_discord: FakeDiscord, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    discord_environment(monkeypatch, fake_discord)
    for name, value in fake_llm_environment(fake_llm).items():
        monkeypatch.setenv(name, value)
    alice = fake_discord.user("alice")
    profile = make_profile(toolsets=["core", "files"],
                           access=AccessRules(allowed_users=[alice["id"]], admins=[alice["id"]], pairing=False))
    outlets = FileOutlets()
    feature = WorkspaceFeature(tmp_path, profile.name, profile.workspace, admins=[alice["id"]],
                               toolsets=profile.toolsets, outlets=outlets)
    e = Engine(tmp_path, profile, [feature])
    served = Served(e, PLATFORM, FAST, outlets)
    await served.start()
    yield e
    await served.stop()


def sends(path: str, *, content: str = CSV, caption: str = "", size: int | None = None, home: Path | None = None):
    """The model writes `path` (then, with `size`, the test makes it a sparse file of that size), sends it,
    and answers with the tool's result."""
    def respond(request):
        results = request.turn_tool_results
        if not results:
            return Reply(tool_calls=[("write_file", {"path": path, "content": content})])
        if len(results) == 1:
            if size is not None and home is not None:
                [written] = list((home / "workspaces").rglob(path))
                with open(written, "r+b") as handle:
                    handle.truncate(size)
            return Reply(tool_calls=[("send_file", {"path": path, "caption": caption})])
        return Reply(text=f"Done. [{results[-1]}]")
    return respond


def with_files(fake: FakeDiscord, channel_id: str):
    return [m for m in fake.bot_messages(channel_id) if m.attachments]


async def ask(fake: FakeDiscord, text: str) -> str:
    """alice asks in the channel; returns the thread the bot answers in."""
    asked = await fake.user_says(fake.channel_id, "alice", text, mentions_bot=True)
    thread = await fake.wait_for(lambda: fake.thread_of(asked), what="a thread on the message")
    await fake.wait_for(lambda: any(m.content.startswith("Done.") for m in fake.bot_messages(thread["id"])), 15,
                        "the answer")
    return str(thread["id"])


async def test_a_csv_is_attached_to_a_message_in_the_thread_once(discord_bot, fake_discord, fake_llm):
    fake_llm.responder = sends("report.csv", caption="This month's sales")
    thread = await ask(fake_discord, "send me the sales as a CSV")

    [message] = with_files(fake_discord, thread)
    assert message.content == "This month's sales"
    [attachment] = message.attachments
    assert attachment["filename"] == "report.csv"
    assert fake_discord.files[attachment["id"]].data == CSV.encode()
    [answer] = [m for m in fake_discord.bot_messages(thread) if m.content.startswith("Done.")]
    assert "Sent report.csv (" in answer.content


async def test_a_429_on_the_upload_is_waited_out_and_the_file_posted_once(discord_bot, fake_discord, fake_llm):
    fake_llm.responder = sends("report.csv")
    fake_discord.rate_limit_next("POST", POST_ROUTE, retry_after=0.3, times=1)
    # the cue catches the first post in the thread: the file's (the model calls send_file before answering)
    thread = await ask(fake_discord, "send me the sales")

    assert [hit.route for hit in fake_discord.rate_limited if hit.cued] == [POST_ROUTE]
    posts = [c for c in fake_discord.requests if c.method == "POST" and c.route == POST_ROUTE]
    assert [c.status for c in posts][:2] == [429, 200]
    assert all(isinstance(c.body, dict) and c.body["_uploads"] for c in posts[:2])  # both were the upload
    [message] = with_files(fake_discord, thread)
    assert fake_discord.files[message.attachments[0]["id"]].data == CSV.encode()


async def test_a_file_over_the_10_mb_limit_is_refused_before_anything_is_sent(discord_bot, fake_discord, fake_llm,
                                                                             tmp_path):
    fake_llm.responder = sends("dump.bin", size=11 * 1024 * 1024, home=tmp_path)
    thread = await ask(fake_discord, "send me the dump")

    [answer] = [m for m in fake_discord.bot_messages(thread) if m.content.startswith("Done.")]
    assert "over discord's limit of 10 MB" in answer.content
    assert with_files(fake_discord, thread) == []
