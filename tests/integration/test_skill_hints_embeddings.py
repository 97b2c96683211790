"""Skill hints with an embedding model configured (HERMES_EMBEDDING_MODEL), through the real engine, the
openai SDK and the fake LLM's `/v1/embeddings`: the skill is embedded once, cached in the database, and its
hint rides on the user message; an embedding outage leaves the turn and its lexical hint intact."""

from __future__ import annotations

from engine_harness import make_profile
from fakes.fake_llm import Reply

from hermes_engine.skills.embeddings import content_hash, skill_document
from hermes_engine.skills.model import parse_skill

BOT = "testbot"
NAME = "sourdough-starter"
SKILL = """---
name: sourdough-starter
description: Revive a sluggish sourdough starter.
category: baking
tags: [bread, sourdough]
triggers: ["my starter stopped bubbling", "levain smells of nail polish"]
---

## When to use
The starter does not rise or smells of acetone.

## Steps
1. Discard all but 50 g, feed 1:1:1 twice a day at 24-26 C.

## Pitfalls
- Chlorinated tap water slows it down.
"""
HINT = f"(Skills that may fit this request: {NAME}. Load one with skill_view before starting.)"


def install(e) -> None:
    folder = e.home / "skills" / BOT / "baking" / NAME
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL, encoding="utf-8")


async def test_a_configured_embedding_model_embeds_the_skill_once_caches_it_and_the_hint_reaches_the_model(
        engine, fake_llm, monkeypatch):
    monkeypatch.setenv("HERMES_EMBEDDING_MODEL", "embed-test")
    e = await engine(profile=make_profile(skills={"curator_every_days": 0}))
    install(e)
    fake_llm.script(Reply(text="Feed it twice a day."), Reply(text="Use filtered water."))
    assert await e.say("My levain smells of nail polish, what now?") == "Feed it twice a day."
    assert await e.say("Any tips for my sourdough starter?") == "Use filtered water."

    document = skill_document(parse_skill(SKILL))
    assert fake_llm.embedding_inputs == [[document], ["My levain smells of nail polish, what now?"],
                                         ["Any tips for my sourdough starter?"]]
    chats = fake_llm.requests_for("openai")
    assert chats[0].last_user_text.endswith(HINT) and HINT not in chats[0].system
    assert chats[1].last_user_text.endswith(HINT)
    assert e.store is not None
    assert list(await e.store.get_skill_embeddings("embed-test", [content_hash(document)])) == [content_hash(document)]


async def test_an_embedding_outage_keeps_the_turn_and_its_lexical_hint(engine, fake_llm, monkeypatch):
    monkeypatch.setenv("HERMES_EMBEDDING_MODEL", "embed-test")
    e = await engine(profile=make_profile(skills={"curator_every_days": 0}))
    install(e)
    fake_llm.embedding_failures.extend([503, 503, 503])
    fake_llm.script(Reply(text="Feed it twice a day."))
    assert await e.say("My levain smells of nail polish, what now?") == "Feed it twice a day."
    assert fake_llm.requests_for("openai")[0].last_user_text.endswith(HINT)
