"""An image an MCP tool returns reaches a vision model as an image, in each wire format, through the real
`anthropic` and `openai` SDKs and the fake LLM: inside Anthropic's `tool_result` block, and for OpenAI in
a user message after the tool messages, labelled as the tool's output. A model named text-only gets the
description alone. The image is stored with the tool result, so a session loaded again still shows it."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

from engine_harness import make_profile
from fakes.fake_llm import Reply

FAKE_SERVER = str(Path(__file__).parent.parent / "fakes" / "mcp_server.py")
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")).decode()


def profile(model: str):  # type: ignore[no-untyped-def]
    server = {"command": sys.executable, "args": [FAKE_SERVER, "stdio"], "timeout": 20}
    return make_profile(model=model, mcp_servers={"fake": server})


def openai_tail(request) -> list[dict]:  # type: ignore[no-untyped-def]
    """The messages from the last tool call on."""
    messages = request.messages
    start = max(i for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("tool_calls"))
    return messages[start + 1:]


async def test_an_openai_model_sees_the_image_after_the_tool_message_labelled_as_tool_output(engine, fake_llm):
    e = await engine(profile=profile("openai:gpt-test"))
    fake_llm.script(Reply(tool_calls=[("fake__picture", {})]), Reply(text="a dot"))
    assert await e.say("show me", timeout=30) == "a dot"
    tool, after = openai_tail(fake_llm.requests[1])
    assert tool["role"] == "tool" and "[image image/png, 67 bytes: image 1 attached" in tool["content"]
    assert after["role"] == "user"
    label, image = after["content"]
    assert label["type"] == "text" and "returned by the tool call fake__picture" in label["text"]
    assert "not sent by the person" in label["text"]
    assert image == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}


async def test_an_anthropic_model_sees_the_image_inside_the_tool_result(engine, fake_llm):
    e = await engine(profile=profile("anthropic:claude-test"))
    fake_llm.script(Reply(tool_calls=[("fake__picture", {})]), Reply(text="a dot"))
    assert await e.say("show me", timeout=30) == "a dot"
    last = fake_llm.requests[1].messages[-1]
    result = next(b for b in last["content"] if b["type"] == "tool_result")
    text, image = result["content"]
    assert text["type"] == "text" and "image 1 attached" in text["text"]
    assert {k: v for k, v in image.items() if k != "cache_control"} == {
        "type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}


async def test_a_text_only_model_gets_the_description_and_no_image(engine, fake_llm, monkeypatch):
    monkeypatch.setenv("HERMES_TEXT_ONLY_MODELS", "anthropic:other, openai:*")
    e = await engine(profile=profile("openai:gpt-test"))
    fake_llm.script(Reply(tool_calls=[("fake__picture", {})]), Reply(text="described"))
    assert await e.say("show me", timeout=30) == "described"
    sent = json.dumps(fake_llm.requests[1].messages)
    assert "image_url" not in sent and PNG not in sent
    (tool,) = openai_tail(fake_llm.requests[1])
    assert "image 1 attached" in tool["content"] and "this model takes text only" in tool["content"]


async def test_the_image_is_stored_and_shown_again_after_a_restart(engine, fake_llm, tmp_path):
    first = await engine(profile=profile("openai:gpt-test"))
    fake_llm.script(Reply(tool_calls=[("fake__picture", {})]), Reply(text="a dot"))
    assert await first.say("show me", timeout=30) == "a dot"
    await first.stop()
    fake_llm.reset()
    second = await engine(profile=profile("openai:gpt-test"), home=tmp_path)
    fake_llm.script(Reply(text="still a dot"))
    assert await second.say("what was it?", timeout=30) == "still a dot"
    images = [part for m in fake_llm.requests[0].messages if isinstance(m.get("content"), list)
              for part in m["content"] if part["type"] == "image_url"]
    assert images == [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]
