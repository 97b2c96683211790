"""Fixtures shared by every test suite. One section per area; keep each fixture small and documented."""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from fakes.fake_llm import FakeLLM
from postgres import STATE_BACKENDS

# -- isolation ---------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Loopback fakes must never be reached through a proxy (the SDKs read the proxy variables), and no test
    may touch the developer's real data directory."""
    loopback = "127.0.0.1,localhost"
    for name in ("NO_PROXY", "no_proxy"):
        current = os.environ.get(name, "")
        monkeypatch.setenv(name, f"{current},{loopback}" if current else loopback)
    for name in list(os.environ):
        real_setting = name.startswith(("ANTHROPIC_", "OPENAI_", "TELEGRAM_", "SLACK_", "DISCORD_", "HERMES_"))
        if real_setting and name != "HERMES_TEST_POSTGRES_URL":
            monkeypatch.delenv(name)  # a developer's real keys and endpoints never reach a test
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))


# -- fake remotes ------------------------------------------------------------------------------------------


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLM]:
    """A scripted LLM on 127.0.0.1 speaking OpenAI and Anthropic wire formats (see tests/fakes/fake_llm.py)."""
    async with FakeLLM() as fake:
        yield fake


@pytest.fixture
async def telegram(monkeypatch: pytest.MonkeyPatch):
    """A fake Telegram Bot API on 127.0.0.1, with the token and base URL set as a deployment would."""
    from fakes.fake_telegram import FakeTelegram

    async with FakeTelegram() as fake:
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", fake.token)
        monkeypatch.setenv("TELEGRAM_API_BASE_URL", fake.base_url)
        yield fake


# -- where memory, skills and pairing live ---------------------------------------------------------------
@pytest.fixture(params=STATE_BACKENDS)
async def state_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                        tmp_path: Path) -> AsyncIterator[str]:
    """`pytestmark = pytest.mark.usefixtures("state_backend")` runs a module's tests with memory, skills and
    pairing in files (on SQLite), in SQLite, and in PostgreSQL (where the database is the default), through
    the gateway's own wiring (`Settings` reads the environment). The value names the backend."""
    from state_backends import database_url

    if request.param == "files":
        yield "files"
        return
    async with database_url(request.param, tmp_path) as url:
        if request.param == "sqlite":
            monkeypatch.setenv("HERMES_STATE_BACKEND", "database")
        else:
            monkeypatch.setenv("HERMES_DATABASE_URL", url)
        yield request.param


# -- the engine ------------------------------------------------------------------------------------------


@pytest.fixture
async def engine(fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A factory for real gateways (SQLite under tmp_path) talking to the fake LLM; all stopped at teardown.

    `await engine()` gives a started `Engine` with the test profile; pass `profile=` or `features=`."""
    from engine_harness import Engine, fake_llm_environment, make_profile

    for name, value in fake_llm_environment(fake_llm).items():
        monkeypatch.setenv(name, value)
    started: list[Engine] = []

    async def make(profile=None, features=None, home: Path | None = None, platform: str = "test",
                   **options) -> Engine:
        e = Engine(home or tmp_path, profile or make_profile(), features, platform, **options)
        started.append(await e.start())
        return e

    yield make
    for e in reversed(started):
        await e.stop()


# -- file systems of their own ---------------------------------------------------------------------------


@pytest.fixture
def tmpfs_root(tmp_path: Path) -> Iterator[Path]:
    """A folder that is the root of a file system of its own (a tmpfs mounted there, as root; skipped
    otherwise): what a deploy gives `HERMES_WORKSPACE_ROOT`."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    root = tmp_path / "own-file-system"
    root.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(root)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here: {done.stderr.strip()}")
    try:
        yield root
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)
