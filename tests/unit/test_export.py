"""`hermes-gateway export trajectories`: one valid JSON line per session, OpenAI format, secrets redacted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_engine.config import load_settings
from hermes_engine.history.export import REDACTED, redact
from hermes_engine.ports.conversation import Message, ToolCall, Usage
from hermes_gateway.cli.main import app
from storage.search import record_compaction
from storage.store import SqlStore

OPENAI_KEY = "sk-proj-" + "a1B2c3D4" * 5
SLACK_TOKEN = "xoxb-123456789012-abcdefghijkl"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


def populate() -> dict[str, int]:
    """Two people: alice (a DM with a tool call and secrets, later compressed) and bob (a DM), plus a group
    where both spoke."""

    async def run() -> dict[str, int]:
        store = SqlStore(load_settings().db_url)
        await store.init()
        try:
            alice = (await store.resolve_account("test", "acct", "alice", "Alice")).person_id
            bob = (await store.resolve_account("test", "acct", "bob", "Bob")).person_id
            dm = await store.active_session("test:acct:dm:alice", "bot")
            await store.update_session(dm.id, state={"system_prompt": f"You are helpful. Admin key {OPENAI_KEY}"})
            call = ToolCall(id="call_1", name="http_get", arguments=json.dumps(
                {"url": "https://api.example.com", "headers": {"Authorization": f"Bearer {SLACK_TOKEN}"}}))
            first = await store.append_message(dm.id, Message(role="user", content=f"My AWS key is {AWS_KEY}"),
                                               person_id=alice)
            await store.append_message(dm.id, Message(role="assistant", content="", tool_calls=(call,)),
                                       usage=Usage(100, 20, 50, 0), model="openai:gpt-4o")
            await store.append_message(dm.id, Message(role="tool", content='{"status": 200}', tool_call_id="call_1",
                                                      tool_name="http_get"))
            last = await store.append_message(dm.id, Message(role="assistant", content="Done; never share keys."),
                                              usage=Usage(150, 10, 0, 0), model="openai:gpt-4o")
            await record_compaction(store.engine, session_id=dm.id, first_message_id=first, last_message_id=last,
                                    summary=f"## Critical facts\n- key {AWS_KEY}", tokens_before=500,
                                    tokens_after=100)
            bob_dm = await store.active_session("test:acct:dm:bob", "bot")
            await store.append_message(bob_dm.id, Message(role="user", content="bob's private question"),
                                       person_id=bob)
            group = await store.active_session("test:acct:group:g", "bot")
            await store.append_message(group.id, Message(role="user", content="[Alice] hello group"),
                                       person_id=alice)
            await store.append_message(group.id, Message(role="user", content="[Bob] bob says hi"), person_id=bob)
            return {"alice": alice, "bob": bob, "dm": dm.id, "bob_dm": bob_dm.id, "group": group.id}
        finally:
            await store.close()

    return asyncio.run(run())


def export(tmp_path: Path, *args: str) -> list[dict]:
    out = tmp_path / "out" / "trajectories.jsonl"
    result = CliRunner().invoke(app, ["export", "trajectories", "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    lines = out.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_export_writes_one_valid_json_line_per_session_in_openai_format(tmp_path):
    ids = populate()
    records = export(tmp_path)
    assert [r["session_id"] for r in records] == [ids["dm"], ids["bob_dm"], ids["group"]]
    dm = records[0]
    assert [m["role"] for m in dm["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    call = dm["messages"][2]["tool_calls"][0]
    assert call["id"] == "call_1" and call["type"] == "function" and call["function"]["name"] == "http_get"
    assert json.loads(call["function"]["arguments"])["url"] == "https://api.example.com"
    assert dm["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": '{"status": 200}'}
    assert dm["usage"] == {"input_tokens": 250, "output_tokens": 30, "cache_read_tokens": 50, "cache_write_tokens": 0}
    assert dm["models"] == ["openai:gpt-4o"] and dm["platform"] == "test"
    assert dm["compactions"][0]["tokens_before"] == 500
    assert "alice" not in json.dumps(records)  # session keys (platform user ids) stay out


def test_export_redacts_secrets_and_tokens_everywhere(tmp_path):
    populate()
    dump = json.dumps(export(tmp_path))
    for secret in (OPENAI_KEY, SLACK_TOKEN, AWS_KEY):
        assert secret not in dump
    assert dump.count(REDACTED) >= 4  # system prompt, user message, tool arguments, summary


# What people paste into a chat when they set up a bot: each must leave the export redacted.
TELEGRAM_TOKEN = "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11"  # the Bot API documentation's shape (34 characters)
DISCORD_TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.GbCdEf.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789ab"
DISCORD_USER_TOKEN = "mfa.VkO_2G4Qv3T--NO--lWetW_tjND--TOKEN--QFTm6YGtzq9PH--4U--tG0"
DISCORD_WEBHOOK_SECRET = "Zx9-AbCdEfGhIjKlMnOpQrStUvWxYz_0123456789abcdefgh"


def test_export_leaves_no_pasted_platform_token_in_clear(tmp_path):
    async def run() -> None:
        store = SqlStore(load_settings().db_url)
        await store.init()
        try:
            person = (await store.resolve_account("test", "acct", "carol", "Carol")).person_id
            dm = await store.active_session("test:acct:dm:carol", "bot")
            await store.append_message(dm.id, Message(role="user", content=(
                f"my telegram bot is {TELEGRAM_TOKEN} and the discord one {DISCORD_TOKEN}; old login "
                f"{DISCORD_USER_TOKEN}; alerts go to https://discord.com/api/webhooks/123456789012345678/"
                f"{DISCORD_WEBHOOK_SECRET}")), person_id=person)
            call = ToolCall(id="call_1", name="http_get", arguments=json.dumps(
                {"url": f"https://api.telegram.org/file/bot{TELEGRAM_TOKEN.replace(':', '%3A')}/documents/a.pdf"}))
            await store.append_message(dm.id, Message(role="assistant", content="", tool_calls=(call,)))
            await store.append_message(dm.id, Message(role="tool", tool_call_id="call_1", tool_name="http_get",
                                                      content=f"403 for bot {TELEGRAM_TOKEN.split(':')[0]}%3A"
                                                              f"{TELEGRAM_TOKEN.split(':')[1]}"))
        finally:
            await store.close()

    asyncio.run(run())
    dump = json.dumps(export(tmp_path))
    for secret in (TELEGRAM_TOKEN.split(":")[1], DISCORD_TOKEN, DISCORD_TOKEN.split(".")[2], DISCORD_USER_TOKEN,
                   DISCORD_WEBHOOK_SECRET):
        assert secret not in dump
    assert dump.count(REDACTED) == 6


def test_export_for_one_person_leaves_out_other_peoples_sessions_and_words(tmp_path):
    ids = populate()
    records = export(tmp_path, "--person", str(ids["alice"]))
    assert [r["session_id"] for r in records] == [ids["dm"], ids["group"]]
    group = records[1]["messages"]
    assert group[0]["content"] == "[Alice] hello group"
    assert "bob says hi" not in json.dumps(records)


def test_export_since_a_date_skips_older_sessions(tmp_path):
    populate()
    assert export(tmp_path, "--since", "2999-01-01") == []
    assert len(export(tmp_path, "--since", "2000-01-01")) == 3
    result = CliRunner().invoke(app, ["export", "trajectories", "--since", "last tuesday"])
    assert result.exit_code == 2 and "not a date" in result.output


@pytest.mark.parametrize("text", [
    "token ghp_" + "A" * 36,
    "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "password: hunter2hunter2",
    "session 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
])
def test_secret_shapes_are_redacted(text):
    assert REDACTED in redact(text)


def test_ordinary_text_paths_and_slugs_survive_redaction():
    text = ("See /usr/lib/python3.11/site-packages/hermes_engine/agent/compression.py and "
            "https://example.com/docs/a-very-long-slug-with-2-numbers-in-it-and-more-words for details.")
    assert redact(text) == text
