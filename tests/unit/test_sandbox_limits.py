"""The sandbox bounds the whole command, not each process: six processes cannot hold more memory together
than the command's limit, a fork bomb stops at the command's process limit and the result says so, the
command's cgroup is gone when it ends, and /tmp holds no more than the workspace has left of its quota."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from sandbox_kit import SIX_HOLDERS, held_at_once

from hermes_engine.config import WorkspaceSettings
from hermes_engine.workspace import cgroups, sandbox
from hermes_engine.workspace.feature import WorkspaceFeature
from hermes_engine.workspace.space import Workspace

MB = 1024 * 1024
needs_cgroups = pytest.mark.skipif(cgroups.hierarchies() is None,
                                   reason=f"no cgroup can be made here: {cgroups.unavailable_reason()}")


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws", 16 * MB).ensure()


@needs_cgroups
def test_six_processes_of_200_mb_cannot_hold_more_than_the_memory_limit_together(ws: Workspace) -> None:
    (ws.root / "six.py").write_text(SIX_HOLDERS)
    result = sandbox.run(ws.root, "python3 six.py; echo after", sandbox.Limits(seconds=60, memory_bytes=256 * MB))
    text = result.text()
    assert 0 <= held_at_once(text) <= 1, text
    assert "after" in text and "[the command reached its memory limit of 256 MB" in text


@needs_cgroups
def test_a_fork_bomb_stops_at_the_commands_process_limit_and_says_so(ws: Workspace) -> None:
    bomb = ("python3 -c 'import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
            "            time.sleep(60)\n        n += 1\nexcept OSError:\n    print(\"forked\", n)'; echo after")
    result = sandbox.run(ws.root, bomb, sandbox.Limits(seconds=30, processes=24))
    text = result.text()
    forked = [line for line in text.splitlines() if line.startswith("forked ")]
    assert forked and int(forked[0].split()[1]) < 24, text
    assert "after" in text and "[the command reached its limit of 24 processes" in text
    assert result.exit_code == 0


def _descends_from_us(pid: int) -> bool:
    """Whether `pid` was started, through any number of parents, by this test process."""
    while pid > 1:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return False
        pid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
        if pid == os.getpid():
            return True
    return False


@needs_cgroups
def test_the_command_runs_in_a_cgroup_of_its_own_that_is_removed_when_it_ends(ws: Workspace) -> None:
    found = cgroups.hierarchies()
    assert found is not None
    seen: dict[Path, list[Path]] = {}  # hierarchy → the groups holding this command's processes
    running = threading.Event()

    def look(chunk: bytes) -> None:
        if b"running" in chunk and not running.is_set():
            for parent in found.parents():  # other tests' commands may have groups of their own here
                seen[parent] = [d for d in parent.glob("hermes-sandbox-*")
                                if any(_descends_from_us(int(p)) for p in (d / "cgroup.procs").read_text().split())]
            running.set()

    result = sandbox.run(ws.root, "echo running; sleep 0.5 & sleep 0.5; wait", sandbox.Limits(seconds=30),
                         on_output=look)
    assert result.exit_code == 0 and running.is_set()
    assert seen and all(seen.values())  # the command's processes were inside, in every hierarchy
    assert not [d for groups in seen.values() for d in groups if d.exists()]  # and its groups are gone


def test_writing_past_the_quota_in_tmp_fails_and_the_commands_after_it_run(tmp_path: Path) -> None:
    small = Workspace(tmp_path / "small", 4 * MB).ensure()
    # three files of 2 MB: each fits the file-size limit, together they are past what the quota leaves
    command = ("for i in 1 2 3; do head -c 2097152 /dev/zero > /tmp/f$i || echo refused $i; done; "
               "du -sk /tmp | cut -f1; echo after")
    result = sandbox.run(small.root, command, sandbox.Limits(seconds=30, file_bytes=small.room()))
    lines = result.text().splitlines()
    assert "refused 3" in lines and "after" in lines, result.text()
    kept_kib = int(lines[lines.index("after") - 1])
    assert kept_kib <= 4 * 1024


def test_mountinfo_inside_names_no_host_path_of_the_workspace_or_the_home(tmp_path: Path, tmpfs_root: Path) -> None:
    home = tmp_path / "home"
    feature = WorkspaceFeature(home, "helper-bot", WorkspaceSettings(), admins=[], root=tmpfs_root)
    ws = feature.workspace_for(chat_kind="dm", person_id=987654, session_key="telegram:dm:987654")
    result = sandbox.run(ws.root, "cat /proc/self/mountinfo", sandbox.Limits(seconds=20))
    text = result.text()
    assert result.exit_code == 0, text
    assert str(home) not in text and str(tmp_path) not in text
    assert "987654" not in text and "person" not in text and "helper" not in text
    line = next(f for f in (row.split(" ") for row in text.splitlines()) if len(f) > 4 and f[4] == "/workspace")
    assert line[3] == f"/{ws.root.name}"  # the folder's path within its own file system: its opaque name


def test_a_full_tmp_refuses_a_write_before_the_command_runs_out_of_memory(tmp_path: Path) -> None:
    roomy = Workspace(tmp_path / "roomy", 512 * MB).ensure()
    command = "head -c 150000000 /dev/zero > /tmp/big || echo refused; rm /tmp/big; echo after"
    result = sandbox.run(roomy.root, command, sandbox.Limits(seconds=30, memory_bytes=128 * MB,
                                                             file_bytes=roomy.room()))
    text = result.text()
    assert "No space left on device" in text and "refused" in text, text
    assert text.endswith("after\n[exit code 0]")


@needs_cgroups
def test_a_fork_bomb_leaves_a_command_running_beside_it_in_the_same_workspace_able_to_fork(ws: Workspace) -> None:
    # both run as one uid (a root gateway's lease is per workspace; a non-root gateway's uid is its own); the
    # bomb says "full" once a fork fails, and holds its processes until the test stops it
    bomb = ("python3 -c 'import os, time\nsaid = False\nwhile True:\n    try: os.fork()\n    except OSError:\n"
            "        said = said or print(\"full\", flush=True) or True\n        time.sleep(0.01)'")
    full, calm_done = threading.Event(), threading.Event()
    outcome: dict[str, sandbox.RunResult] = {}

    def watch(chunk: bytes) -> None:
        if b"full" in chunk:
            full.set()

    def run_bomb() -> None:
        outcome["bomb"] = sandbox.run(ws.root, bomb, sandbox.Limits(seconds=60, processes=32), on_output=watch,
                                      stop=calm_done)

    thread = threading.Thread(target=run_bomb)
    thread.start()
    try:
        assert full.wait(30)
        calm = sandbox.run(ws.root, "for i in $(seq 40); do /bin/true || exit 7; done; echo calm",
                           sandbox.Limits(seconds=20, processes=32))
    finally:
        calm_done.set()
        thread.join(30)
    assert calm.text() == "calm\n[exit code 0]"
    assert "[the command reached its limit of 32 processes" in outcome["bomb"].text()
