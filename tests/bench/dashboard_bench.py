"""Dashboard benchmark: time per page, as a signed-in admin's browser sees it on loopback, with 1,000
people and 10,000 sessions in a SQLite store and 500 skills in the bot's library (target: p99 at most 100 ms).

Pages: Overview, People (the first page of fifty), a person's page with MEMORY.md and USER.md; Kanban (500
cards in every column), a card with 40 lines of history, Jobs (200 jobs, a page of fifty) and Approvals (300
requests); Conversations (the first page of fifty, by last activity over four messages a session), a search
over them, one conversation, Goals (500 of them); Skills (the library with its usage, held changes and curator
reports), a skill with its patches as diffs, and Learning (every family's chart from 30 days of use; once as
the page is read again, once right after a turn changed the usage, which is read and drawn anew). Each request
passes the whole guard (Host check, the session read from the store, the headers). Before the pages: the time
one turn takes to record its use of a skill in that library (`UsageLog.record_turn`, in the turn's worker
thread).

    python tests/bench/dashboard_bench.py [--rounds 200] [--people 1000] [--sessions 10000] [--skills 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402
from aiohttp.test_utils import TestClient, TestServer  # noqa: E402
from gateway_kit import free_port  # noqa: E402

from hermes_engine.kanban.board import COLUMNS  # noqa: E402
from hermes_engine.memory import FileMemoryStore, MemoryBook, MemoryOwner  # noqa: E402
from hermes_engine.ports.cards import CardSpec  # noqa: E402
from hermes_engine.ports.conversation import Message, ToolCall  # noqa: E402
from hermes_engine.ports.jobs import JobSpec  # noqa: E402
from hermes_engine.skills.approvals import GatedLibrary  # noqa: E402
from hermes_engine.skills.contract import SkillChange  # noqa: E402
from hermes_engine.skills.curator import Curator  # noqa: E402
from hermes_engine.skills.feature import SkillsFeature  # noqa: E402
from hermes_gateway.dashboard.app import mount  # noqa: E402
from hermes_gateway.dashboard.config import Dashboard  # noqa: E402
from hermes_gateway.dashboard.links import sign_in_link  # noqa: E402
from hermes_gateway.dashboard.views import PlatformState, Sources  # noqa: E402
from hermes_gateway.serve import settle_heap  # noqa: E402
from storage.store import SqlStore  # noqa: E402

CARDS, JOBS, APPROVALS, HISTORY, GOALS = 500, 200, 300, 40, 500


async def converse(store: SqlStore, session_id: int, person_id: int, n: int) -> None:
    """A question, a tool call, its result and the answer: what a session of a DM holds after one turn."""
    call = ToolCall(f"call_{n}", "calculate", json.dumps({"expression": f"{n} * 3"}))
    await store.append_message(session_id, Message("user", f"How many teapots are in order {n}?"), person_id=person_id)
    await store.append_message(session_id, Message("assistant", "", tool_calls=(call,)), model="openai:gpt-test")
    await store.append_message(session_id, Message("tool", str(n * 3), tool_call_id=call.id, tool_name="calculate"))
    await store.append_message(session_id, Message("assistant", f"Order {n} holds {n * 3} teapots."),
                               model="openai:gpt-test")


async def fill(store: SqlStore, memory: MemoryBook, people: int, sessions: int) -> int:
    first = 0
    for n in range(people):
        account = await store.resolve_account("telegram", "bot", str(10_000 + n), f"Person {n}")
        first = first or account.person_id
    for n in range(sessions):
        session = await store.active_session(f"telegram:bot:dm:{10_000 + n % people}:{n}", "bot")
        await converse(store, session.id, first + n % people, n)
    for n in range(GOALS):
        goal = await store.create_goal(f"telegram:bot:dm:{10_000 + n}:{n}", "bot", f"Goal number {n}")
        await store.update_goal(goal.id, add_turns=n % 20, verdict={"verdict": "continue", "reason": "going on"})
    owner = MemoryOwner.person(first)
    for n in range(20):
        await memory.add(owner, "memory", f"Fact number {n} about this person, kept for the benchmark.")
    return first


async def fill_work(store: SqlStore, first_person: int, people: int) -> int:
    """The board, the clock's jobs and approval requests; the id of the card with the longest history."""
    specs = [CardSpec(title=f"Card {n}: a task of the benchmark", body="Some details " * 20, profile="bot",
                      status=COLUMNS[n % len(COLUMNS)]) for n in range(CARDS)]  # type: ignore[misc]
    cards = await store.create_cards(specs, actor="bench")
    busy = cards[0].id
    for n in range(HISTORY // 2):
        await store.move_card(busy, "blocked", actor="bench", reason=f"waiting for review {n}")
        await store.move_card(busy, "todo", actor="bench", reason="reviewed")
    due = datetime(2030, 1, 7, 8, tzinfo=UTC)
    for n in range(JOBS):
        await store.create_job(JobSpec(
            owner_id=first_person + n % people, bot="bot", target={"platform": "telegram", "account": "bot",
                                                                   "chat_id": str(10_000 + n % people)},
            session_key=f"telegram:bot:dm:{10_000 + n % people}", name=f"job {n}", schedule="every monday 9am",
            timezone="Europe/Berlin", kind="task" if n % 2 else "reminder", text="plan the week", next_due=due,
            once=False))
    soon = datetime.now(UTC) + timedelta(hours=1)
    for n in range(APPROVALS):
        await store.record_approval(f"req{n:06d}", "bot", f"telegram:bot:dm:{10_000 + n % people}", soon,
                                    asked_by=str(10_000 + n % people))
        if n % 2:
            await store.answer_approval(f"req{n:06d}", "bot", "once", "42")
    return busy


def skill_md(name: str, n: int) -> str:
    return (f"---\nname: {name}\ndescription: Procedure number {n} the agent learned\n---\n## When to use\n"
            f"When task {n} comes up.\n\n## Steps\n1. Look at the input.\n2. Do step {n}.\n\n## Pitfalls\n- None.\n")


async def fill_skills(feature: SkillsFeature, skills: int, days: int = 30) -> str:
    """`skills` skills in ten families, each used on each of `days` days, with a baseline; one skill patched
    five times; three changes held for approval; one curator report. The patched skill's name."""
    library = feature.raw_library("bot")
    names = [f"skill-{n:04d}" for n in range(skills)]
    for n, name in enumerate(names):
        await library.apply(SkillChange("create", name, skill_md(name, n), category=f"family-{n % 10}"))
    for n in range(5):
        await library.apply(SkillChange("patch", names[0], old_string="1. Look at the input.",
                                        new_string=f"1. Look at the input.\n{n + 3}. Check it again ({n})."))
    usage = feature.usage_for("bot")
    usage.set_baseline(names, 12)
    now = datetime.now(UTC)
    for day in range(days, 0, -1):
        usage.record_turn(dict.fromkeys(names, 1), calls=3 + day // 5, tokens=2000 + 40 * day,
                          at=now - timedelta(days=day))
    for n in range(3):
        await GatedLibrary(library).apply(SkillChange("create", f"held-{n}", skill_md(f"held-{n}", n)))
    await Curator(library, usage, llm_pass=False, bot="bot").run(dry_run=True)
    return names[0]


async def main(rounds: int, people: int, sessions: int, skills: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = SqlStore(f"sqlite+aiosqlite:///{Path(folder) / 'hermes.db'}")
        await store.init()
        memory = MemoryBook(FileMemoryStore.for_home(Path(folder)))
        started = time.perf_counter()
        person = await fill(store, memory, people, sessions)
        busy_card = await fill_work(store, person, people)
        feature = SkillsFeature(Path(folder) / "skills", bot="bot")
        patched = await fill_skills(feature, skills)
        print(f"filled {people} people, {sessions} sessions, {CARDS} cards, {JOBS} jobs, {APPROVALS} approval "
              f"requests and {skills} skills in {time.perf_counter() - started:.1f} s")
        turn_times = []
        for _ in range(50):
            t0 = time.perf_counter()
            feature.usage_for("bot").record_turn({patched: 1}, calls=3, tokens=2000)
            turn_times.append((time.perf_counter() - t0) * 1000)
        turn_times.sort()
        print(f"recording one turn's use ({skills} skills x 30 days): p50 {statistics.median(turn_times):.1f} ms, "
              f"p99 {turn_times[-1]:.1f} ms")
        port = free_port()
        dashboard = Dashboard(f"http://127.0.0.1:{port}", 600, 3600)
        http = web.Application()
        mount(http, Sources(store, memory, ["bot"], lambda: [PlatformState("bot", "telegram", True)],
                            skills={"bot": feature}), dashboard)
        client = TestClient(TestServer(http, host="127.0.0.1", port=port), cookie_jar=aiohttp.CookieJar(unsafe=True))
        await client.start_server()
        settle_heap()  # as `hermes-gateway run` does once it has started
        try:
            token = (await sign_in_link(store, dashboard, "operator")).split("token=", 1)[1]
            signed = await client.post("/admin/login", data={"token": token}, headers={"Origin": dashboard.origin})
            assert signed.status == 200, signed.status
            print(f"{'page':<24}{'p50 ms':>10}{'p99 ms':>10}")
            for name, path in (("Overview", "/admin/"), ("People", "/admin/people"),
                               ("A person", f"/admin/people/{person}"), ("Kanban", "/admin/kanban"),
                               ("A card", f"/admin/kanban/{busy_card}"), ("Jobs", "/admin/jobs"),
                               ("Approvals", "/admin/approvals"), ("Conversations", "/admin/conversations"),
                               ("Search", "/admin/conversations?q=teapots+order"),
                               ("A conversation", f"/admin/conversations/{sessions // 2}"), ("Goals", "/admin/goals"),
                               ("Skills", "/admin/skills"), ("A skill (5 patches)", f"/admin/skills/bot/{patched}"),
                               ("Learning", "/admin/learning"), ("Learning, after a turn", "/admin/learning")):
                times = []
                for _ in range(rounds):
                    if name.endswith("after a turn"):  # the usage file changed: read and drawn again
                        feature.usage_for("bot").record_turn({patched: 1}, calls=3, tokens=2000)
                    t0 = time.perf_counter()
                    response = await client.get(path)
                    body = await response.text()
                    times.append((time.perf_counter() - t0) * 1000)
                    assert response.status == 200 and re.search("</html>", body), (path, response.status)
                times.sort()
                p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
                print(f"{name:<24}{statistics.median(times):>10.1f}{p99:>10.1f}")
        finally:
            await client.close()
            await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--people", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--skills", type=int, default=500)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.people, args.sessions, args.skills))
