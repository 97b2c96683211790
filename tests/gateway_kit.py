"""Real gateway processes for tests and benchmarks: `hermes-gateway run` as an operator starts it, on a
database of the test's own (a SQLite file, or a fresh PostgreSQL schema), with the fakes' endpoints in its
environment."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from engine_harness import fake_llm_environment
from postgres import PG_URL, fresh_schema

from storage.store import SqlStore

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@asynccontextmanager
async def database_url(backend: str, folder: Path) -> AsyncIterator[str]:
    """The HERMES_DATABASE_URL of a database for this test alone: `backend` "sqlite" (a file in `folder`)
    or "postgres" (a schema dropped afterwards)."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{folder / 'hermes.db'}"
        return
    assert PG_URL
    async with fresh_schema() as schema:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"


@asynccontextmanager
async def gateway_process(bot: Path | str, env: Mapping[str, str], *,
                          stderr: int = asyncio.subprocess.DEVNULL) -> AsyncIterator[asyncio.subprocess.Process]:
    """`hermes-gateway run --bot BOT` with `env` added to this process's environment; killed on the way
    out if it still runs."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hermes_gateway.cli.main", "run", "--bot", str(bot), cwd=ROOT,
        env={**os.environ, **env}, stdout=asyncio.subprocess.DEVNULL, stderr=stderr)
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
        await proc.communicate()


@asynccontextmanager
async def telegram_dm_gateway(telegram: Any, fake_llm: Any, home: Path,
                              allowed: int) -> AsyncIterator[asyncio.subprocess.Process]:
    """The shipped Telegram DM assistant as a real process against the fakes, `allowed` its one person."""
    env = {**fake_llm_environment(fake_llm), "HERMES_HOME": str(home),
           "HERMES_MODEL": "openai:gpt-test", "HERMES_FALLBACK_MODELS": "", "HERMES_HTTP_PORT": "0",
           "TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_BASE_URL": telegram.base_url,
           "TELEGRAM_ALLOWED_USERS": str(allowed)}
    async with gateway_process("bots/telegram-dm-assistant", env, stderr=asyncio.subprocess.PIPE) as proc:
        yield proc


async def wait_ready(url: str, proc: asyncio.subprocess.Process, timeout: float = 90.0) -> dict[str, Any]:
    """`/ready`'s body once it answers 200; fails at once if the process exits first."""
    deadline = asyncio.get_running_loop().time() + timeout
    async with aiohttp.ClientSession(trust_env=False) as http:
        while asyncio.get_running_loop().time() < deadline:
            assert proc.returncode is None, "the gateway exited"
            with contextlib.suppress(aiohttp.ClientConnectionError):
                async with http.get(url) as response:
                    if response.status == 200:
                        return dict(await response.json())
            await asyncio.sleep(0.1)
    raise AssertionError(f"{url} never said ready")


async def wait_until(predicate: Callable[[], Awaitable[bool]], timeout: float) -> None:
    """Wait for `predicate()`; `timeout` is a hang guard, not a speed target."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.1)


async def all_answered(db_url: str) -> bool:
    """No inbound event is waiting for its answer in the database, read as another process would."""
    store = SqlStore(db_url)
    try:
        await store.init()  # at head already: the replicas migrated it
        return not await store.pending_inbound()
    finally:
        await store.close()


async def ready_roles(http: aiohttp.ClientSession, port: int) -> dict[str, str] | None:
    """The elected roles a replica's `/ready` reports while it answers 200; None while it does not."""
    try:
        async with http.get(f"http://127.0.0.1:{port}/ready") as response:
            return dict((await response.json()).get("roles", {})) if response.status == 200 else None
    except aiohttp.ClientError:
        return None  # not listening yet


async def leader_and_stand_by(http: aiohttp.ClientSession, ports: Mapping[str, int], lease: str,
                              also: Callable[[], bool], timeout: float) -> tuple[str, str]:
    """Wait until both replicas are ready, one leads `lease`, the other stands by, and `also()`; return
    the names of the leader and the stand-by."""
    roles: dict[str, str] = {}

    async def settled() -> bool:
        for name, port in ports.items():
            roles[name] = ((await ready_roles(http, port)) or {}).get(lease, "")
        return sorted(roles.values()) == ["leader", "stand-by"] and also()

    await wait_until(settled, timeout)
    leader = next(name for name, role in roles.items() if role == "leader")
    return leader, next(name for name in roles if name != leader)


@asynccontextmanager
async def replica(name: str, folder: Path, bot: Path, db_url: str, port: int, env: Mapping[str, str],
                  fake_llm: Any) -> AsyncIterator[asyncio.subprocess.Process]:
    """One of several gateway replicas on database `db_url`: its own HERMES_HOME (`folder/name`) and HTTP
    port, the model behind `fake_llm`, the platform's endpoints in `env`. Replicas on one host are told apart by
    `HERMES_REPLICA_ID`; a short session lease lets a survivor take over a killed one's chats quickly."""
    home = folder / name
    home.mkdir()
    async with gateway_process(bot, {**fake_llm_environment(fake_llm), "HERMES_HOME": str(home),
                                     "HERMES_DATABASE_URL": db_url, "HERMES_FALLBACK_MODELS": "",
                                     "HERMES_HTTP_PORT": str(port), "HERMES_REPLICA_ID": name,
                                     "HERMES_SESSION_LEASE_SECONDS": "2", **env}) as proc:
        yield proc
