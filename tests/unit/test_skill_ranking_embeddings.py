"""Skill hints with embeddings: the `/v1/embeddings` client through the real openai SDK and the fake LLM,
vectors cached in the store by content hash, fusion with the lexical ranking, and lexical fallback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from fakes.fake_llm import FakeLLM
from postgres import PG_URL, fresh_schema

from hermes_engine.ports.embedding import EmbeddingError
from hermes_engine.providers.embedders import embedder_from_settings
from hermes_engine.providers.openai_embeddings import OpenAIEmbedder
from hermes_engine.providers.wordllama_embeddings import WordLlamaEmbedder
from hermes_engine.skills.embeddings import content_hash, skill_document
from hermes_engine.skills.hints import SkillHints
from hermes_engine.skills.model import Skill, parse_skill, render
from storage.store import SqlStore


def skill(name: str, description: str, when: str = "", tags: Sequence[str] = ()) -> Skill:
    meta = {"name": name, "description": description, "tags": list(tags)}
    return parse_skill(render(meta, f"## When to use\n{when}\n\n## Steps\n1. x\n\n## Pitfalls\n- y\n"))


SKILLS = [
    skill("git-squash-commits", "Squash a branch's commits into one before merging.", "Many wip commits."),
    skill("docker-build-cache", "Speed up slow Docker image builds with layer caching.", "Builds reinstall."),
    skill("travel-itinerary", "Plan a day-by-day trip itinerary.", "A city trip: what to see each day."),
]
MESSAGE = "can you squash my wip commits before merging"


@pytest.fixture(params=[
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.skipif(
        not PG_URL, reason="HERMES_TEST_POSTGRES_URL is not set (run .ci/postgres.sh)")),
])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    if request.param == "sqlite":
        s = SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'hermes.db'}")
        await s.init()
        yield s
        await s.close()
        return
    assert PG_URL
    async with fresh_schema() as schema:
        s = SqlStore(PG_URL, engine_options={"connect_args": {"server_settings": {"search_path": schema}}})
        await s.init()
        yield s
        await s.close()


async def test_the_store_keeps_skill_vectors_by_model_and_hash_and_never_overwrites(store):
    await store.put_skill_embeddings("m1", {"h1": [0.5, 0.25], "h2": [1.0, 0.0]})
    await store.put_skill_embeddings("m1", {"h1": [9.0, 9.0], "h3": [0.0, 1.0]})  # h1 exists: kept
    assert await store.get_skill_embeddings("m1", ["h1", "h3", "h9"]) == {"h1": [0.5, 0.25], "h3": [0.0, 1.0]}
    assert await store.get_skill_embeddings("m2", ["h1"]) == {}
    assert await store.get_skill_embeddings("m1", []) == {}


def embedder(fake: FakeLLM) -> OpenAIEmbedder:
    return OpenAIEmbedder("embed-test", base_url=fake.openai_base_url, api_key="test-key", max_retries=0)


async def test_the_embedder_returns_one_vector_per_text_through_the_openai_sdk(fake_llm):
    vectors = await embedder(fake_llm).embed(["squash commits", "squashing commit", "plan a trip"])
    assert len(vectors) == 3 and len({len(v) for v in vectors}) == 1
    assert vectors[0] == pytest.approx(vectors[1])  # same stems, same hashed vector
    assert vectors[0] != pytest.approx(vectors[2])


async def test_hints_with_embeddings_cache_skill_vectors_and_embed_only_the_message_next_time(fake_llm, store):
    hints = SkillHints(SKILLS, embedder=embedder(fake_llm), cache=store)
    assert [h.name for h in await hints.hints(MESSAGE)][0] == "git-squash-commits"
    assert sorted(fake_llm.embedding_inputs[0]) == sorted(skill_document(s) for s in SKILLS)
    assert fake_llm.embedding_inputs[1] == [MESSAGE]
    cached = await store.get_skill_embeddings("embed-test", [content_hash(skill_document(s)) for s in SKILLS])
    assert len(cached) == 3

    fake_llm.embedding_inputs.clear()
    restarted = SkillHints(SKILLS, embedder=embedder(fake_llm), cache=store)  # a new process: vectors from the store
    assert [h.name for h in await restarted.hints(MESSAGE)][0] == "git-squash-commits"
    assert fake_llm.embedding_inputs == [[MESSAGE]]


async def test_a_changed_skill_is_embedded_again_and_the_others_are_not(fake_llm, store):
    hints = SkillHints(SKILLS, embedder=embedder(fake_llm), cache=store)
    await hints.hints(MESSAGE)
    changed = skill("travel-itinerary", "Plan a day-by-day trip itinerary with museums.", "A city trip.")
    fake_llm.embedding_inputs.clear()
    hints.rebuild([*SKILLS[:2], changed])
    await hints.hints(MESSAGE)
    assert fake_llm.embedding_inputs == [[skill_document(changed)], [MESSAGE]]
    assert await store.get_skill_embeddings("embed-test", [content_hash(skill_document(changed))])


class TableEmbedder:
    """Vectors from a table: what a semantic model would say, for pinning the fusion itself."""

    model = "table"

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [next((v for k, v in self.table.items() if k in t), [0.0, 0.0, 1.0]) for t in texts]


async def test_fusion_adds_a_skill_only_the_embedding_finds_and_keeps_the_lexical_count():
    message = "we are off to Lisbon next month"  # no word of any skill
    table = {"travel itinerary": [1.0, 0.0, 0.0], "Lisbon": [0.9, 0.1, 0.0], "squash": [0.0, 1.0, 0.0],
             "docker": [0.0, 0.7, 0.7]}
    lexical = SkillHints(SKILLS)
    assert await lexical.hints(message) == []
    fused = SkillHints(SKILLS, embedder=TableEmbedder(table))
    assert [h.name for h in await fused.hints(message)] == ["travel-itinerary"]
    assert [h.name for h in await fused.hints(MESSAGE)][0] == "git-squash-commits"  # lexical top still leads


@pytest.mark.parametrize("failures", [[429, 429], [500, 500], ["garbage"]])
async def test_an_embedding_failure_serves_lexical_hints_for_that_turn(fake_llm, store, failures):
    hints = SkillHints(SKILLS, embedder=OpenAIEmbedder("embed-test", base_url=fake_llm.openai_base_url,
                                                        api_key="k", max_retries=1), cache=store, pause=0)
    fake_llm.embedding_failures.extend(failures)
    lexical = [h.name for h in SkillHints(SKILLS).lexical.hints(MESSAGE)]
    assert [h.name for h in await hints.hints(MESSAGE)] == lexical == ["git-squash-commits"]
    assert [h.name for h in await hints.hints(MESSAGE)] == lexical  # the next turn embeds again
    assert len(fake_llm.embedding_inputs) == len(failures) + 2


async def test_after_a_failure_the_next_turns_skip_embeddings_for_a_pause(fake_llm):
    hints = SkillHints(SKILLS, embedder=embedder(fake_llm), pause=3600)
    fake_llm.embedding_failures.append(503)
    assert [h.name for h in await hints.hints(MESSAGE)] == ["git-squash-commits"]
    assert [h.name for h in await hints.hints(MESSAGE)] == ["git-squash-commits"]
    assert len(fake_llm.embedding_inputs) == 1  # the second turn did not wait on the endpoint


async def test_garbage_vectors_raise_an_embedding_error(fake_llm):
    fake_llm.embedding_failures.append("garbage")
    with pytest.raises(EmbeddingError):
        await embedder(fake_llm).embed(["x"])


async def test_an_unreachable_embedding_server_serves_lexical_hints():
    dead = OpenAIEmbedder("embed-test", base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0, timeout=2)
    assert [h.name for h in await SkillHints(SKILLS, embedder=dead).hints(MESSAGE)] == ["git-squash-commits"]


def test_no_embedding_model_means_no_embedder():
    assert embedder_from_settings(None) is None and embedder_from_settings("") is None
    assert isinstance(embedder_from_settings("text-embedding-3-small", "http://127.0.0.1:1/v1"), OpenAIEmbedder)
    assert isinstance(embedder_from_settings("wordllama"), WordLlamaEmbedder)


async def test_the_bundled_wordllama_model_embeds_offline_and_fusion_finds_a_paraphrase_lexical_misses():
    message = "a long weekend in Lisbon, where should we go"  # no word of any skill
    assert await SkillHints(SKILLS).rank(message) == []
    fused = [h.name for h in await SkillHints(SKILLS, embedder=WordLlamaEmbedder()).rank(message)]
    assert fused[0] == "travel-itinerary"
