"""The agent sends files in Slack: `send_file` goes through slack-sdk's `files_upload_v2` (the two-step
external upload: an upload URL, the bytes to it, the completion sharing it) against the fake Slack, into the
thread the person asked in, once, a 429 in the middle of the upload waited out."""

from __future__ import annotations

import pytest
from engine_harness import make_profile
from fakes.fake_llm import Reply
from fakes.fake_slack import FakeSlack
from files_kit import png
from slack_kit import serve_slack, slack_environment

from hermes_engine.workspace.feature import WorkspaceFeature
from hermes_engine.workspace.sending import FileOutlets

CHANNEL = "CGENERAL"
DM = "DALICE"
CSV = "region,sales\nnorth,12\nsouth,7\n"


def writes_then_sends(path: str, content: str, caption: str = ""):
    def respond(request):
        results = request.turn_tool_results
        if not results:
            return Reply(tool_calls=[("write_file", {"path": path, "content": content})])
        if len(results) == 1:
            return Reply(tool_calls=[("send_file", {"path": path, "caption": caption})])
        return Reply(text=f"Sent. [{results[-1]}]")
    return respond


@pytest.fixture
async def fake_slack():
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
async def slack_bot(engine, fake_slack, monkeypatch, tmp_path):
    slack_environment(monkeypatch, fake_slack)
    profile = make_profile(toolsets=["core", "files"], access={"admins": ["UALICE"]})
    outlets = FileOutlets()
    feature = WorkspaceFeature(tmp_path, profile.name, profile.workspace, admins=["UALICE"],
                               toolsets=profile.toolsets, outlets=outlets)
    e = await engine(profile=profile, features=[feature], platform="slack")
    bot = await serve_slack(e, events_from=fake_slack, before_start=outlets.add)
    yield e, bot.adapter
    await bot.close()


def shared_files(fake: FakeSlack, channel: str):
    return [m for m in fake.messages.get(channel, []) if m.files]


async def test_a_csv_is_uploaded_into_the_thread_it_was_asked_in_once(slack_bot, fake_slack, fake_llm):
    fake_llm.responder = writes_then_sends("report.csv", CSV, caption="This month's sales")
    await fake_slack.say("UALICE", CHANNEL, f"<@{fake_slack.bot_user}> send me the sales as a CSV")
    await fake_slack.wait_for(lambda: any(m.text.startswith("Sent.") for m in fake_slack.bot_messages(CHANNEL)))

    [answer] = [m for m in fake_slack.bot_messages(CHANNEL) if m.text.startswith("Sent.")]
    [message] = shared_files(fake_slack, CHANNEL)
    assert message.from_bot and message.text == "This month's sales"
    assert message.thread_ts is not None and message.thread_ts == answer.thread_ts
    [file] = message.files
    assert file["name"] == "report.csv" and fake_slack.uploads[file["id"]].data == CSV.encode()
    assert len(fake_slack.calls_to("files.getUploadURLExternal")) == 1
    assert "Sent report.csv (" in answer.text


async def test_a_429_during_the_upload_is_waited_out_and_the_file_shared_once(slack_bot, fake_slack, fake_llm):
    image = png(6, 6)

    def respond(request):
        results = request.turn_tool_results
        if not results:
            return Reply(tool_calls=[("write_file", {"path": "chart.png", "content": "x"})])
        if len(results) == 1:
            engine, _ = slack_bot
            [written] = list((engine.home / "workspaces").rglob("chart.png"))
            written.write_bytes(image)  # the chart a terminal command drew
            return Reply(tool_calls=[("send_file", {"path": "chart.png"})])
        return Reply(text=f"Sent. [{results[-1]}]")

    fake_llm.responder = respond
    fake_slack.fail("files.completeUploadExternal", status=429, retry_after=1)
    await fake_slack.say("UALICE", DM, "the chart please")
    await fake_slack.wait_for(lambda: any(m.text.startswith("Sent.") for m in fake_slack.bot_messages(DM)), 20)

    completes = fake_slack.calls_to("files.completeUploadExternal")
    assert [c.status for c in completes] == [429, 200]
    assert completes[1].at - completes[0].at >= 0.9  # Retry-After was respected
    [message] = shared_files(fake_slack, DM)
    [file] = message.files
    assert fake_slack.uploads[file["id"]].data == image


async def test_a_symlink_is_refused_with_a_reason_and_nothing_uploaded(slack_bot, fake_slack, fake_llm):
    def respond(request):
        results = request.turn_tool_results
        if not results:
            return Reply(tool_calls=[("write_file", {"path": "notes.txt", "content": "x"})])
        if len(results) == 1:
            engine, _ = slack_bot
            [written] = list((engine.home / "workspaces").rglob("notes.txt"))
            (written.parent / "keys").symlink_to("/etc/passwd")
            return Reply(tool_calls=[("send_file", {"path": "keys"})])
        return Reply(text=f"Could not. [{results[-1]}]")

    fake_llm.responder = respond
    await fake_slack.say("UALICE", DM, "send me the keys")
    await fake_slack.wait_for(lambda: any(m.text.startswith("Could not.") for m in fake_slack.bot_messages(DM)))
    [answer] = [m for m in fake_slack.bot_messages(DM) if m.text.startswith("Could not.")]
    assert "symlink" in answer.text
    assert fake_slack.calls_to("files.getUploadURLExternal") == [] and shared_files(fake_slack, DM) == []


async def test_a_caption_that_names_everyone_pings_nobody(slack_bot, fake_slack, fake_llm):
    fake_llm.responder = writes_then_sends("report.csv", CSV, caption="<!channel> <@UBOB> numbers & more")
    await fake_slack.say("UALICE", DM, "send me the sales")
    await fake_slack.wait_for(lambda: any(m.text.startswith("Sent.") for m in fake_slack.bot_messages(DM)))

    [message] = shared_files(fake_slack, DM)
    assert message.visible == "<!channel> <@UBOB> numbers & more"  # shown as written
    assert message.pings == []
