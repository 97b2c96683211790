"""The real command line as an operator runs it: `python -m hermes_gateway.cli.main …` in a subprocess, from
the repository root, with the test's environment on top of the process's."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


async def cli(*args: str, env: dict[str, str], stdin: str = "", timeout: float = 60) -> tuple[int, str, str]:
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
    return proc.returncode, out.decode(), err.decode()


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
