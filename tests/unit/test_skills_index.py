"""The prompt index (size bound, stability) and per-message hints (FTS5 ranking, relevance cut)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from hermes_engine.ports.conversation import estimate_tokens
from hermes_engine.skills.index import EMPTY_INDEX, HintRanker, hint_text, render_index, token_budget
from hermes_engine.skills.model import Skill, parse_skill, render

CATALOG = Path(__file__).resolve().parents[1] / "bench" / "data" / "skill_catalog.jsonl"


def catalog_skills() -> list[Skill]:
    rows = [json.loads(line) for line in CATALOG.read_text(encoding="utf-8").splitlines() if line.strip()]
    skills = []
    for i, row in enumerate(rows):
        meta = {"name": row["name"], "description": row["description"], "category": row["category"],
                "tags": row["tags"], "created_by": "user" if i % 5 == 0 else "agent"}
        body = f"## When to use\n- {row['when']}\n- Typical requests: {row['triggers']}.\n\n## Steps\n1. x\n\n## Pitfalls\n- y\n"
        skills.append(parse_skill(render(meta, body), category=row["category"]))
    return skills


@pytest.fixture(scope="module")
def catalog() -> list[Skill]:
    return catalog_skills()


def skill(name: str, description: str, *, tags: tuple[str, ...] = (), when: str = "", category: str = "general",
          created_by: str = "agent") -> Skill:
    meta = {"name": name, "description": description, "category": category, "tags": list(tags),
            "created_by": created_by}
    return parse_skill(render(meta, f"## When to use\n{when}\n\n## Steps\n1. x\n\n## Pitfalls\n- y\n"),
                       category=category)


@pytest.mark.parametrize("size, target", [(50, 630), (200, 800)])
def test_index_stays_within_the_token_targets(catalog, size, target):
    chosen = catalog[::4] if size == 50 else catalog
    assert len(chosen) == size
    index = render_index(chosen)
    assert estimate_tokens(index) <= target
    assert token_budget(size) == target
    for category in {s.category for s in chosen}:  # every category stays reachable through skills_list
        assert f"- {category}: " in index


def test_small_library_lists_every_skill_with_its_description(catalog):
    few = catalog[:6]
    index = render_index(few)
    for s in few:
        assert s.name in index
    assert "Squash a feature branch" in index


def test_index_is_stable_whatever_the_input_order(catalog):
    shuffled = list(catalog)
    random.Random(7).shuffle(shuffled)
    assert render_index(shuffled) == render_index(catalog)
    assert render_index(catalog[::4]) == render_index(list(reversed(catalog[::4])))


def test_index_holds_nothing_that_changes_with_use(catalog):
    index = render_index(catalog)
    assert not re.search(r"\d{4}-\d{2}-\d{2}|views|used \d", index)
    # usage metadata is not part of a Skill, and mtimes do not enter the text
    touched = [s.__class__(**{**s.__dict__, "updated_at": 123.0}) for s in catalog]
    assert render_index(touched) == index


def test_truncated_index_says_how_many_more_per_category(catalog):
    index = render_index(catalog)
    assert "+3 more" in index or "more" in index
    listed = sum(1 for s in catalog if re.search(rf"\b{re.escape(s.name)}\b", index))
    assert 100 <= listed < 200


def test_empty_library_index_invites_saving_skills():
    assert render_index([]) == EMPTY_INDEX and "skill_manage" in EMPTY_INDEX


@pytest.fixture
def small_ranker() -> HintRanker:
    return HintRanker([
        skill("git-squash-commits", "Squash a branch's commits into one before merging.", tags=("git", "rebase"),
              when="The branch has many wip commits; clean up history."),
        skill("docker-build-cache", "Speed up slow Docker image builds with layer caching.", tags=("docker", "build"),
              when="Docker builds reinstall dependencies every time."),
        skill("postgres-slow-query", "Find and fix slow PostgreSQL queries with EXPLAIN and indexes.",
              tags=("postgres", "sql", "index"), when="A query or page is slow; missing index."),
        skill("travel-itinerary", "Plan a day-by-day trip itinerary.", tags=("travel", "trip"),
              when="Planning a holiday or city trip: what to see each day."),
        skill("csv-cleanup", "Clean messy CSV files: encodings, duplicates and blank rows.", tags=("csv", "data"),
              when="A CSV export has garbled characters or duplicate rows."),
    ])


@pytest.mark.parametrize("message, expected", [
    ("my docker builds are really slow, every build reinstalls packages", "docker-build-cache"),
    ("can I combine my last five commits into one?", "git-squash-commits"),
    ("this sql query on postgres takes 10 seconds", "postgres-slow-query"),
    ("plan four days in Rome for me, what should we see?", "travel-itinerary"),
    ("the exported csv has duplicate rows and weird characters", "csv-cleanup"),
])
def test_hint_ranks_the_right_skill_first(small_ranker, message, expected):
    hits = small_ranker.hints(message)
    assert hits and hits[0].name == expected
    assert len(hits) <= 3
    assert expected in hint_text(hits) and "skill_view" in hint_text(hits)


@pytest.mark.parametrize("message", ["thanks, that worked!", "hi", "what's the capital of Peru?", "ok", ""])
def test_no_hint_when_nothing_is_relevant(small_ranker, message):
    assert small_ranker.hints(message) == []
    assert hint_text([]) is None


def test_rebuild_replaces_the_indexed_skills(small_ranker):
    small_ranker.rebuild([skill("sourdough-baking", "Bake sourdough bread.", tags=("bread", "baking"),
                                when="Loaves come out flat or dense.")])
    assert small_ranker.hints("my sourdough bread is flat and dense")[0].name == "sourdough-baking"
    assert small_ranker.hints("docker build is slow, builds take ages") == []


def test_hint_handles_fts_syntax_in_messages(small_ranker):
    for text in ['"unbalanced quote', "NEAR(docker build)", "docker AND OR NOT *", "col:umn docker build"]:
        assert isinstance(small_ranker.hints(text), list)  # never raises


def test_hints_on_the_full_catalog_find_typical_requests(catalog):
    ranker = HintRanker(catalog)
    assert "k8s-crashloopbackoff" in [h.name for h in ranker.hints("kubectl shows my pod in CrashLoopBackOff")]
    assert "flight-booking" in [h.name for h in ranker.hints("book me a cheap flight to Rome, best airfare?")]
