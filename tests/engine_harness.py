"""A real gateway (SQLite store, real providers via the SDKs) pointed at the fake LLM, plus an outlet
that records what a person would see. Used by the engine's integration tests and benchmarks."""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schema_kit import at_head

from hermes_engine.config import BotProfile, Settings, default_soul
from hermes_engine.core.gateway import Gateway
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.inbound import ChatKind, InboundMessage, ReplyTarget
from hermes_engine.ports.metrics import NO_METRICS, Metrics
from hermes_engine.ports.reply import ReplyStream
from hermes_gateway.wiring import build_gateway
from storage.store import SqlStore

_ids = itertools.count(1)


@dataclass
class Delivered:
    target: ReplyTarget
    text: str
    deltas: list[str] = field(default_factory=list)
    kind: str = "final"  # "final" | "send" | "abort"


class RecordingStream(ReplyStream):
    def __init__(self, outlet: RecordingOutlet, target: ReplyTarget, key: str) -> None:
        self.outlet, self.target, self.key = outlet, target, key
        self.deltas: list[str] = []

    async def push(self, delta: str) -> None:
        self.deltas.append(delta)
        self.outlet.first_delta.set()

    async def finish(self, text: str) -> None:
        self.outlet._deliver(Delivered(self.target, text, list(self.deltas), "final"))

    async def abort(self, note: str | None = None) -> None:
        self.outlet._deliver(Delivered(self.target, note or "", list(self.deltas), "abort"))


class RecordingOutlet:
    """Implements the engine's `Outlet` protocol and records every delivery in order."""

    def __init__(self, platform: str = "test") -> None:
        self.platform = platform
        self.delivered: list[Delivered] = []
        self.typing_calls = 0
        self.first_delta = asyncio.Event()
        self._changed = asyncio.Condition()

    def open_stream(self, target: ReplyTarget, *, idempotency_key: str) -> ReplyStream:
        return RecordingStream(self, target, idempotency_key)

    async def send(self, target: ReplyTarget, text: str, *, idempotency_key: str | None = None) -> None:
        self._deliver(Delivered(target, text, [], "send"))

    async def typing(self, target: ReplyTarget) -> None:
        self.typing_calls += 1

    def _deliver(self, item: Delivered) -> None:
        self.delivered.append(item)

        async def notify() -> None:
            async with self._changed:
                self._changed.notify_all()

        asyncio.get_running_loop().create_task(notify())

    @property
    def texts(self) -> list[str]:
        return [d.text for d in self.delivered]

    async def wait_for(self, count: int, timeout: float = 10.0) -> list[Delivered]:
        """Wait until at least `count` deliveries happened."""
        async def reached() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self.delivered) >= count)

        await asyncio.wait_for(reached(), timeout)
        return self.delivered


def fake_llm_environment(fake: Any) -> dict[str, str]:
    """Environment that points both SDKs at the fake through their own variables, as a deployment would."""
    return {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": fake.openai_base_url,
            "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake.anthropic_base_url}


class Engine:
    """One bot's gateway on a temporary SQLite database (or `database`: a URL and engine options), with a
    recording outlet attached. With `adapters_first` it takes messages while the gateway starts, as `serve`
    does (its adapters start before the gateway): `starting` is the gateway's start, still under way."""

    def __init__(self, home: Path, profile: BotProfile, features: list[Feature] | None = None,
                 platform: str = "test", metrics: Metrics = NO_METRICS,
                 database: tuple[str, dict[str, Any]] | None = None, adapters_first: bool = False) -> None:
        self.home = home
        self.metrics = metrics
        self.settings = Settings(home=home)
        self.profile = profile
        self.features = features
        self.platform = platform
        self.store: SqlStore | None = None
        self.gateway: Gateway | None = None
        self.outlet = RecordingOutlet(platform)
        self.database = database or (self.settings.db_url, {})
        self.adapters_first = adapters_first
        self.starting: asyncio.Task[None] | None = None

    async def start(self) -> Engine:
        self.store = SqlStore(await at_head(self.database[0]), engine_options=self.database[1])
        await self.store.init()
        self.gateway = build_gateway(self.settings, self.profile, self.store, features=self.features,
                                     metrics=self.metrics)
        self.gateway.attach(self.outlet)
        if self.adapters_first:
            self.starting = asyncio.create_task(self.gateway.start())
        else:
            await self.gateway.start()
        return self

    async def stop(self) -> None:
        if self.starting:
            self.starting.cancel()
            await asyncio.gather(self.starting, return_exceptions=True)
        if self.gateway:
            await self.gateway.stop()
        if self.store:
            await self.store.close()

    def message(self, text: str, *, user: str = "u1", chat: str = "c1", kind: ChatKind = ChatKind.DM,
                thread: str | None = None, name: str = "", **facts: Any) -> InboundMessage:
        """`facts`: what else an adapter reports (e.g. `platform_admin`, `place_listed`)."""
        return InboundMessage(platform=self.platform, account="acct", chat_kind=kind, chat_id=chat,
                              user_id=user, user_name=name or user, text=text, message_id=f"m{next(_ids)}",
                              thread_id=thread, **facts)

    async def say(self, text: str, timeout: float = 10.0, **kwargs: Any) -> str:
        """Send a message and wait for the next delivery; returns its text."""
        before = len(self.outlet.delivered)
        assert self.gateway is not None
        await self.gateway.handle(self.message(text, **kwargs))
        await self.outlet.wait_for(before + 1, timeout)
        return self.outlet.delivered[before].text

    async def idle(self, timeout: float = 10.0) -> None:
        """Wait until no session has queued or running work and background tasks are done."""
        assert self.gateway is not None
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            if not self.gateway.busy:
                return
            await asyncio.sleep(0.01)
        raise TimeoutError("the gateway did not become idle")


    async def let_go(self, timeout: float = 10.0) -> None:
        """`idle`, and until no lane here holds its session's lease any more (a lane keeps it a moment for
        the session's next message): what comes now may go to another replica."""
        assert self.gateway is not None
        await self.idle(timeout)
        deadline = asyncio.get_running_loop().time() + timeout
        while self.gateway.holding:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError("a lane kept its session's lease")
            await asyncio.sleep(0.01)


def make_profile(**overrides: Any) -> BotProfile:
    base: dict[str, Any] = dict(name="testbot", model="openai:gpt-test", soul=default_soul(),
                                toolsets=["core", "memory", "skills", "search", "test"])
    base.update(overrides)
    return BotProfile(**base)


# -- scripting /goal: the judge and the worker ---------------------------------------------------------


def is_judge(request: Any) -> bool:
    """A judge call of the goal loop (recognised by its system prompt)."""
    from hermes_engine.loops.goals import JUDGE_SYSTEM

    return request.system.startswith(JUDGE_SYSTEM.splitlines()[0])


def verdict(v: str, reason: str = "because") -> str:
    return json.dumps({"verdict": v, "reason": reason})


def goal_script(verdicts: list[str], worker: Any = None) -> tuple[Any, dict[str, int]]:
    """A fake-LLM responder: judge calls get `verdicts` in order (the last repeats), worker calls `worker`
    (default: "worked step N"). Returns (responder, counts of judge and worker calls)."""
    from fakes.fake_llm import Reply

    worker = worker or (lambda request, n: Reply(text=f"worked step {n}"))
    state = {"judge": 0, "worker": 0}

    def respond(request: Any) -> Any:
        if is_judge(request):
            i = min(state["judge"], len(verdicts) - 1)
            state["judge"] += 1
            return Reply(text=verdicts[i])
        state["worker"] += 1
        return worker(request, state["worker"])

    return respond, state


def stored_tool_results(home: Path) -> list[str]:
    """The tool results in the database, read as another process would (the gateway is still running)."""
    return stored_contents(home, "tool")


def stored_contents(home: Path, role: str) -> list[str]:
    """The content of the messages of `role` in the database, read as another process would."""
    db = home / "hermes.db"
    if not db.exists():
        return []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        try:
            rows = conn.execute("SELECT content FROM messages WHERE role = ? ORDER BY id", (role,)).fetchall()
        except sqlite3.OperationalError:  # not migrated yet
            return []
    return [row[0] for row in rows]
