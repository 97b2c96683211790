"""Files people share in Slack reach the agent: downloaded from `url_private_download` with the bot token by
the real adapter (slack-bolt, aiohttp) from the fake Slack, stored in the conversation's folder, and sent to
the fake LLM as an image or described by name, type and size."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml
from fakes.fake_llm import Reply
from fakes.fake_slack import FakeSlack
from files_kit import kept_files, png, sent_images
from slack_kit import serve_slack, slack_environment

CHANNEL = "CGENERAL"
DM = "DALICE"


@pytest.fixture
async def fake_slack():
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
async def slack_bot(engine, fake_slack, monkeypatch):
    served = []

    async def make(options=None):
        slack_environment(monkeypatch, fake_slack)
        e = await engine(platform="slack")
        bot = await serve_slack(e, events_from=fake_slack, options=options)
        served.append(bot)
        return e, bot.adapter

    yield make
    for bot in served:
        await bot.close()


async def settle(engine, adapter) -> None:
    await engine.idle()
    while adapter._tasks or engine.gateway.busy:
        await engine.idle()


async def test_a_screenshot_shared_with_a_mention_reaches_the_model_as_an_image(slack_bot, fake_slack, fake_llm,
                                                                                tmp_path):
    e, adapter = await slack_bot()
    fake_llm.script(Reply(text="That is a login error."))
    shot = fake_slack.upload("Screenshot 2026-12-03.png", png(), "image/png")
    await fake_slack.say("UALICE", CHANNEL, f"<@{fake_slack.bot_user}> what is wrong here?", files=[shot])
    await fake_slack.wait_for(lambda: any(m.text == "That is a login error." for m in fake_slack.bot_messages(CHANNEL)))
    await settle(e, adapter)

    request = fake_llm.requests[0]
    assert sent_images(request) == [f"data:image/png;base64,{base64.b64encode(png()).decode()}"]
    assert "[attachment: photo Screenshot 2026-12-03.png (image/png, 1 KB)]" in request.last_user_text
    assert fake_slack.downloads == [(shot.id, True, len(png()))]  # once, for message and app_mention both
    [kept] = kept_files(tmp_path)
    assert kept.name.endswith("-Screenshot 2026-12-03.png") and kept.read_bytes() == png()


async def test_a_text_file_in_a_dm_is_described_by_name_type_and_size(slack_bot, fake_slack, fake_llm):
    e, adapter = await slack_bot()
    fake_llm.script(Reply(text="Read it."))
    notes = fake_slack.upload("notes.csv", b"name,count\nalpha,1\n" * 200, "text/csv")
    await fake_slack.say("UALICE", DM, "", files=[notes])
    await fake_slack.wait_for(lambda: fake_slack.bot_messages(DM))
    await settle(e, adapter)

    request = fake_llm.requests[0]
    assert "[attachment: document notes.csv (text/csv, 3 KB)]" in request.last_user_text
    assert sent_images(request) == []


async def test_a_file_over_the_cap_without_a_stated_size_is_stopped_at_the_cap_and_the_person_told(
        slack_bot, fake_slack, fake_llm, tmp_path):
    e, adapter = await slack_bot(options={"max_file_mb": 0.25})
    fake_llm.script(Reply(text="Noted."))
    big = fake_slack.upload("dump.bin", b"\x01" * (4 * 1024 * 1024), state_size=False)
    await fake_slack.say("UALICE", DM, "here is the dump", files=[big])
    await fake_slack.wait_for(lambda: len(fake_slack.bot_messages(DM)) >= 2)
    await settle(e, adapter)

    told, answer = fake_slack.bot_messages(DM)
    assert told.visible == "I did not read dump.bin: it is larger than the 0.25 MB limit for files."
    assert answer.visible == "Noted."
    assert "[attachment refused: dump.bin" in fake_llm.requests[0].last_user_text
    [(file_id, token_ok, sent)] = fake_slack.downloads
    assert token_ok and sent < 4 * 1024 * 1024  # the adapter stopped reading at the cap
    assert kept_files(tmp_path) == []  # nothing of it was kept, not even the partial file


async def test_file_names_that_climb_out_or_hold_control_characters_are_stored_sanitised_inside_the_folder(
        slack_bot, fake_slack, fake_llm, tmp_path):
    e, adapter = await slack_bot()
    fake_llm.script(Reply(text="Two files."))
    climbing = fake_slack.upload("../../etc/passwd", b"root:x:0:0\n", "text/plain")
    hidden = fake_slack.upload("invoice\u202egpj.exe\x07\n", b"MZ\x90\x00" + b"\x00" * 64, "image/jpeg")
    await fake_slack.say("UALICE", DM, "two files", files=[climbing, hidden])
    await fake_slack.wait_for(lambda: fake_slack.bot_messages(DM))
    await settle(e, adapter)

    kept = kept_files(tmp_path)
    folder = kept[0].parent
    assert folder.parent == tmp_path / "attachments" and all(p.parent == folder for p in kept)
    assert sorted(p.name.split("-", 1)[1] for p in kept) == ["invoicegpj.exe", "passwd"]
    text = fake_llm.requests[0].last_user_text
    assert "[attachment: document passwd (text/plain" in text
    assert "\u202e" not in text and "\x07" not in text
    assert sent_images(fake_llm.requests[0]) == []  # the "image/jpeg" was an executable by its bytes
    assert not (tmp_path / "etc").exists()


async def test_a_png_whose_bytes_are_not_an_image_is_not_sent_to_the_model_as_one(slack_bot, fake_slack, fake_llm):
    e, adapter = await slack_bot()
    fake_llm.script(Reply(text="That is text."))
    fake = fake_slack.upload("chart.png", b"this is not a picture, only words\n", "image/png")
    await fake_slack.say("UALICE", DM, "my chart", files=[fake])
    await fake_slack.wait_for(lambda: fake_slack.bot_messages(DM))
    await settle(e, adapter)

    request = fake_llm.requests[0]
    assert sent_images(request) == []
    assert "[attachment: document chart.png (text/plain, 1 KB)]" in request.last_user_text


async def test_a_file_an_event_names_outside_slack_is_not_fetched_and_the_token_stays_home(
        slack_bot, fake_slack, fake_llm, tmp_path):
    e, adapter = await slack_bot()
    fake_llm.script(Reply(text="Only words."))
    elsewhere = {"id": "FELSEWHERE", "name": "x.png", "mimetype": "image/png", "size": 10, "mode": "hosted",
                 "url_private_download": "https://files.example.net/x.png"}
    ts = fake_slack.new_ts()
    await fake_slack.post_event({"type": "message", "subtype": "file_share", "channel": DM, "user": "UALICE",
                                 "text": "look", "ts": ts, "event_ts": ts, "channel_type": "im",
                                 "team": fake_slack.team, "files": [elsewhere]})
    await fake_slack.wait_for(lambda: fake_slack.bot_messages(DM))
    await settle(e, adapter)

    assert fake_llm.requests[0].last_user_text == "look"
    assert kept_files(tmp_path) == []


def test_the_slack_manifest_asks_for_the_scope_file_downloads_need():
    manifest = yaml.safe_load((Path(__file__).parents[2] / "bots/slack-channel-bot/manifest.yaml").read_text())
    assert "files:read" in manifest["oauth_config"]["scopes"]["bot"]


async def test_a_file_the_event_withholds_is_looked_up_with_files_info_and_fetched(slack_bot, fake_slack, fake_llm):
    e, adapter = await slack_bot()
    fake_llm.script(Reply(text="Seen."))
    shot = fake_slack.upload("shared.png", png(), "image/png")
    ts = fake_slack.new_ts()
    await fake_slack.post_event({"type": "message", "subtype": "file_share", "channel": DM, "user": "UALICE",
                                 "text": "from the other org", "ts": ts, "event_ts": ts, "channel_type": "im",
                                 "team": fake_slack.team,
                                 "files": [{"id": shot.id, "file_access": "check_file_info"}]})
    await fake_slack.wait_for(lambda: fake_slack.bot_messages(DM))
    await settle(e, adapter)

    assert [c.params.get("file") for c in fake_slack.calls_to("files.info")] == [shot.id]
    assert len(sent_images(fake_llm.requests[0])) == 1


async def test_a_text_only_model_gets_the_screenshot_described_and_an_audio_clip_is_a_voice_note(
        slack_bot, fake_slack, fake_llm, monkeypatch):
    monkeypatch.setenv("HERMES_TEXT_ONLY_MODELS", "openai:gpt-test")
    e, adapter = await slack_bot()
    fake_llm.script(Reply(text="Described."))
    shot = fake_slack.upload("screen.png", png(), "image/png")
    webm = (b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\xf7\x81\x01\x42\xf2\x81\x04\x42\xf3\x81\x08"
            b"\x42\x82\x84webm\x42\x87\x81\x04\x42\x85\x81\x02" + b"\x00" * 500)  # an EBML header, doctype webm
    clip = fake_slack.upload("audio_message.webm", webm, "audio/webm", subtype="slack_audio")
    await fake_slack.say("UALICE", DM, "", files=[shot, clip])
    await fake_slack.wait_for(lambda: fake_slack.bot_messages(DM))
    await settle(e, adapter)

    request = fake_llm.requests[0]
    assert sent_images(request) == []
    assert "[attachment: photo screen.png (image/png, 1 KB)]" in request.last_user_text
    assert "[attachment: voice audio_message.webm (" in request.last_user_text


async def test_an_audio_clip_reaches_the_model_as_its_transcript_and_a_pdf_as_its_text(
        slack_bot, fake_slack, fake_llm, monkeypatch):
    from documents_kit import pdf_bytes

    from hermes_engine.attachments.voice import TRANSCRIPT

    monkeypatch.setenv("HERMES_STT_MODEL", "whisper-1")  # at the fake LLM, through OPENAI_BASE_URL
    fake_llm.transcripts.append("please read the attached plan")
    e, adapter = await slack_bot()
    fake_llm.script(Reply(text="Read it."))
    webm = (b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\xf7\x81\x01\x42\xf2\x81\x04\x42\xf3\x81\x08"
            b"\x42\x82\x84webm\x42\x87\x81\x04\x42\x85\x81\x02" + b"\x00" * 500)
    clip = fake_slack.upload("audio_message.webm", webm, "audio/webm", subtype="slack_audio")
    plan = fake_slack.upload("plan.pdf", pdf_bytes("Phase one ships in March"), "application/pdf")
    await fake_slack.say("UALICE", DM, "", files=[clip, plan])
    await fake_slack.wait_for(lambda: fake_slack.bot_messages(DM))
    await settle(e, adapter)

    [upload] = fake_llm.transcriptions
    assert upload.data == webm and upload.model == "whisper-1"
    said = fake_llm.requests[0].last_user_text
    assert said.startswith(f"{TRANSCRIPT} please read the attached plan")
    assert "[untrusted data from the document plan.pdf" in said and "Phase one ships in March" in said
