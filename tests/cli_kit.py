"""The command line as an operator runs it.

`cli` starts the real `python -m hermes_gateway.cli.main …` in a subprocess, from the repository root, with the
test's environment on top of the process's: for what only a process shows (the console script, a service
that keeps running, a signal). `invoke` runs the same command in this process on the app object (typer's
`CliRunner`), a fresh interpreter's start saved: the same exit status, standard output and standard error,
with the environment given, the working folder, logging and the dumpable flag as the process has them for the
call alone, all put back afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import importlib.util
import logging
import os
import socket
import sys
import threading
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4


class Ran(NamedTuple):
    """What a command left: its exit status and what it wrote on standard output and standard error."""

    code: int
    out: str
    err: str


async def cli(*args: str, env: dict[str, str], stdin: str = "", timeout: float = 60) -> Ran:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hermes_gateway.cli.main", *args, cwd=ROOT, env={**os.environ, **env},
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        raise AssertionError(f"hermes-gateway {' '.join(args)} still ran after {timeout} s: {err.decode()}") from None
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(), err.decode())


def invoke(*args: str, env: Mapping[str, str | None], stdin: str = "") -> Ran:
    """`hermes-gateway ARGS` in this process, from the repository root as `cli`, `env` on top of this process's
    environment for the call alone (a None value unsets the variable). An exception that escapes the command is written to standard error as
    the interpreter would (a traceback), and exits with status 1, so a test reads it as it would a process's."""
    from typer.testing import CliRunner

    import hermes_gateway.mcp.manager  # noqa: F401 - see below
    from hermes_gateway.cli.main import app

    # Imported before the runner's streams are in place: the MCP SDK's stdio client takes `sys.stderr` as its
    # default error log when its module is first imported, and a command importing it under the runner would
    # leave every later MCP server of this process writing to the runner's closed stream.
    with contextlib.chdir(ROOT), _fresh_logging(), _dumpable_kept():
        result = CliRunner().invoke(app, list(args), input=stdin, env=dict(env), prog_name="hermes-gateway")
    err = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        err += "".join(traceback.format_exception(result.exception))
    return Ran(result.exit_code, result.stdout, err)


async def invoke_beside(*args: str, env: Mapping[str, str | None], stdin: str = "", timeout: float = 60) -> Ran:
    """`invoke` on a thread of its own, while this loop serves the test's fakes. A command still running
    after `timeout` fails the test; its thread (a daemon) is left to end with the process."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Ran] = loop.create_future()

    def settle(outcome: Ran | BaseException) -> None:
        if done.done():
            return
        if isinstance(outcome, BaseException):
            done.set_exception(outcome)
        else:
            done.set_result(outcome)

    def work() -> None:
        outcome: Ran | BaseException
        try:
            outcome = invoke(*args, env=env, stdin=stdin)
        except BaseException as raised:  # noqa: BLE001 - handed to the waiting test as it is
            outcome = raised
        with contextlib.suppress(RuntimeError):  # the test's loop is closed: no one waits any more
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=work, name=f"hermes-gateway {' '.join(args)}", daemon=True).start()
    try:
        return await asyncio.wait_for(asyncio.shield(done), timeout)
    except TimeoutError:
        raise AssertionError(f"hermes-gateway {' '.join(args)} still ran after {timeout} s") from None


@contextlib.contextmanager
def _fresh_logging() -> Iterator[None]:
    """Logging as a fresh interpreter has it, for one command: the root logger with no handler at WARNING,
    so what the command logs reaches the standard error it writes (its own handler, or logging's last
    resort) and not the test runner's; the runner's handlers, the levels and the record factory the
    command may set (`hermes_gateway.logs.setup_logging`) are put back afterwards."""
    from hermes_gateway.logs import TRAFFIC_LOGGERS

    root = logging.getLogger()
    handlers, level, factory = root.handlers[:], root.level, logging.getLogRecordFactory()
    traffic = {name: logging.getLogger(name).level for name in TRAFFIC_LOGGERS}
    root.handlers.clear()
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.setLogRecordFactory(factory)
        for name, was in traffic.items():
            logging.getLogger(name).setLevel(was)


@contextlib.contextmanager
def _dumpable_kept() -> Iterator[None]:
    """A command makes its process non-dumpable (`hermes_gateway/dumpable.py`); this process is the test
    runner's, whose later tests read their own children's /proc as a gateway's would, so it is put back."""
    if not sys.platform.startswith("linux"):
        yield
        return
    libc = ctypes.CDLL(None, use_errno=True)
    was = libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)
    try:
        yield
    finally:
        if was in (0, 1):
            libc.prctl(_PR_SET_DUMPABLE, was, 0, 0, 0)


def deploy_validator() -> ModuleType:
    """`.ci/validate_deploy.py`, the checks CI runs on the deploy files, as a module."""
    spec = importlib.util.spec_from_file_location("validate_deploy", ROOT / ".ci" / "validate_deploy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
