"""The launcher of a sandboxed MCP server (hermes_gateway/mcp/launch.py), run as the SDK runs it: a spec it
cannot read is one sentence and starts nothing, a launcher whose gateway is already gone starts nothing, and
the cgroup of a launcher killed outright is removed by the gateway once it lets the server go."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hermes_engine.config.mcp import McpServerSettings
from hermes_engine.workspace import cgroups, sandbox
from hermes_engine.workspace.uids import pool_for
from hermes_gateway.mcp.confined import ServerSandbox
from hermes_gateway.mcp.launch import FAILED, LaunchSpec


def spec(tmp_path: Path, **changes: object) -> LaunchSpec:
    values: dict[str, object] = {
        "command": ["/bin/sh", "-c", "touch /data/ran"], "folder": str(tmp_path), "uid": None, "read": [],
        "write": [], "cwd": "/data", "memory_bytes": 256 << 20, "processes": 32, "network": False,
        "parent": os.getpid(), "cgroup": None, **changes}
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


@pytest.mark.skipif(cgroups.hierarchies() is None or sandbox.unavailable_reason() is not None,
                    reason=f"no cgroup or no sandbox here: {cgroups.unavailable_reason() or sandbox.unavailable_reason()}")
def test_the_cgroup_of_a_launcher_killed_outright_is_removed_when_the_gateway_lets_the_server_go(
        tmp_path: Path) -> None:
    found = cgroups.hierarchies()
    assert found is not None
    servers = ServerSandbox(tmp_path / "servers", pool_for())
    settings = McpServerSettings(command="sh", args=["-c", "touch /data/ran; exec sleep 60"])
    with contextlib.ExitStack() as held:  # what the gateway holds while the server runs
        params = asyncio.run(servers.parameters("slow", settings, held))
        folders = [parent / json.loads(params.args[-1])["cgroup"] for parent in found.parents()]
        proc = subprocess.Popen([params.command, *params.args], env={**os.environ, **(params.env or {})},
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 30
        while not (tmp_path / "servers" / "slow" / "ran").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the server never ran"
            time.sleep(0.02)
        assert all((folder / "cgroup.procs").read_text().split() for folder in folders)  # the server is in them
        os.killpg(proc.pid, signal.SIGKILL)  # as the SDK ends a launcher that outlives its SIGTERM
        proc.wait()
        assert all(folder.is_dir() for folder in folders)  # none of the launcher's clean-up ran
    assert not any(folder.exists() for folder in folders)
