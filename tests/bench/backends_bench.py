"""Storage backends benchmark: what keeping memory and skills in the database costs against files.

Per backend (files, the database on SQLite, and on PostgreSQL when HERMES_TEST_POSTGRES_URL is set): a
memory `add` through `MemoryBook` (lock, read, write), the skill library's `revision()` with 50 skills and
nothing changed (what the hints ask on every message), and a skill `patch` (lease, sync, write back).

    python tests/bench/backends_bench.py [--rounds 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skills_kit import skill_md  # noqa: E402

from hermes_engine.memory import FileMemoryStore, MemoryBook, MemoryOwner  # noqa: E402
from hermes_engine.memory.database import DatabaseMemoryStore  # noqa: E402
from hermes_engine.skills.contract import SkillChange  # noqa: E402
from hermes_engine.skills.database import DatabaseSkillLibrary  # noqa: E402
from hermes_engine.skills.files import FileSkillLibrary  # noqa: E402
from storage.store import SqlStore  # noqa: E402

PG_URL = os.environ.get("HERMES_TEST_POSTGRES_URL")


async def per_call_ms(rounds: int, call: Callable[[int], Awaitable[object]]) -> float:
    started = time.perf_counter()
    for i in range(rounds):
        await call(i)
    return (time.perf_counter() - started) / rounds * 1000


async def measure(kind: str, folder: Path, rounds: int) -> str:
    store: SqlStore | None = None
    if kind == "files":
        memory, library = FileMemoryStore(folder / "memories"), FileSkillLibrary(folder / "skills")
    else:
        if kind == "sqlite":
            url = f"sqlite+aiosqlite:///{folder / 'hermes.db'}"
        else:
            from postgres import execute

            schema = f"bench_{uuid.uuid4().hex[:8]}"
            await execute(f"CREATE SCHEMA {schema}")
            url = f"{PG_URL}{'&' if '?' in (PG_URL or '') else '?'}options=-c%20search_path%3D{schema}"
        store = SqlStore(url)
        await store.init()
        memory, library = DatabaseMemoryStore(store, store), DatabaseSkillLibrary(folder / "copy", store, store, "b")
    try:
        book = MemoryBook(memory)
        add = await per_call_ms(rounds, lambda i: book.add(MemoryOwner.person(1), "memory", f"fact {i}"))
        for i in range(50):
            await library.apply(SkillChange("create", f"skill-{i}", content=skill_md(f"skill-{i}"), category="c"))
        revision = await per_call_ms(rounds, lambda i: library.revision())
        patch = await per_call_ms(min(rounds, 50), lambda i: library.apply(SkillChange(
            "patch", f"skill-{i}", old_string="git rebase -i main", new_string=f"git rebase -i main  # {i}")))
    finally:
        if store is not None:
            await store.close()
            if kind == "postgres":
                from postgres import execute

                await execute(f"DROP SCHEMA {schema} CASCADE")
    return f"{kind:9} memory add {add:6.1f} ms | skill revision, 50 skills {revision:5.1f} ms | skill patch {patch:5.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    for kind in ("files", "sqlite", *(["postgres"] if PG_URL else [])):
        with tempfile.TemporaryDirectory() as folder:
            print(asyncio.run(measure(kind, Path(folder), args.rounds)))


if __name__ == "__main__":
    main()
