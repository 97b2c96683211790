"""Answers longer than one model call may write, through the real gateway, both SDKs (streaming) and the
fake LLM: each call asks for the model's own output maximum."""

from __future__ import annotations

import pytest
from engine_harness import make_profile
from fakes.fake_llm import Reply


@pytest.mark.parametrize(("model", "field", "maximum"), [("anthropic:claude-sonnet-4-5", "max_tokens", 64_000),
                                                         ("anthropic:claude-3-5-haiku-latest", "max_tokens", 8_192),
                                                         ("openai:gpt-4.1", "max_completion_tokens", 32_768),
                                                         ("openai:o4-mini", "max_completion_tokens", 100_000)])
@pytest.mark.parametrize("profile_limit", [None, 2_000, 1_000_000])
async def test_each_model_is_asked_for_its_own_output_maximum_and_a_lower_profile_limit_wins(
        engine, fake_llm, model, field, maximum, profile_limit):
    e = await engine(profile=make_profile(model=model, max_output_tokens=profile_limit))
    await e.say("hi")
    assert fake_llm.requests[0].body[field] == (2_000 if profile_limit == 2_000 else maximum)


async def test_a_fallback_model_is_asked_for_its_own_output_maximum(engine, fake_llm, monkeypatch):
    monkeypatch.setenv("HERMES_FALLBACK_MODELS", "openai:gpt-4o")
    e = await engine(profile=make_profile(model="anthropic:claude-3-5-haiku-20241022"))
    fake_llm.responder = lambda request: Reply(error=503) if request.api == "anthropic" else Reply(text="ok")

    assert await e.say("hi") == "ok"
    asked = {r.api: r.body.get("max_tokens") or r.body.get("max_completion_tokens") for r in fake_llm.requests}
    assert asked == {"anthropic": 8_192, "openai": 16_384}
