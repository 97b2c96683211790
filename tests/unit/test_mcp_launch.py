"""The launcher of a sandboxed MCP server (hermes_gateway/mcp/launch.py), run as the SDK runs it: a spec it
cannot read is one sentence and starts nothing, and a launcher whose gateway is already gone starts nothing."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

from hermes_engine.workspace import sandbox
from hermes_engine.workspace.uids import pool_for
from hermes_gateway.mcp.launch import FAILED, LaunchSpec


def spec(tmp_path: Path, **changes: object) -> LaunchSpec:
    values: dict[str, object] = {
        "command": ["/bin/sh", "-c", "touch /data/ran"], "folder": str(tmp_path), "uid": None, "read": [],
        "write": [], "cwd": "/data", "memory_bytes": 256 << 20, "processes": 32, "network": False,
        "parent": os.getpid(), **changes}
    return LaunchSpec(**values)  # type: ignore[arg-type]


def launch(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)


def test_a_spec_the_launcher_cannot_read_is_one_sentence_and_starts_nothing(tmp_path: Path) -> None:
    argv = spec(tmp_path).argv()
    done = launch([*argv[:-1], argv[-1].replace('"processes": 32', '"processes": "many"')])
    assert done.returncode == 1
    assert done.stderr.strip() == "MCP server launcher: processes is invalid (str 'many'); nothing was started."
    assert not (tmp_path / "ran").exists()


def test_a_launcher_whose_gateway_is_gone_starts_nothing(tmp_path: Path) -> None:
    done = launch(spec(tmp_path, parent=1).argv())  # its parent is this test, not the gateway it was made for
    assert done.returncode == FAILED and not (tmp_path / "ran").exists()


def test_the_launcher_runs_the_command_in_the_sandbox_and_exits_with_its_status(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:  # a root gateway holds a uid's lease for the server
        uid = stack.enter_context(pool_for().lease(tmp_path)) if sandbox.drops_privileges() else None
        done = launch(spec(tmp_path, uid=uid, command=["/bin/sh", "-c", "touch /data/ran; exit 3"]).argv())
    assert done.returncode == 3, done.stderr
    assert (tmp_path / "ran").exists()
