"""Each running sandbox has a uid of its own, so the process limit of one command is not spent by another:
a fork bomb in one workspace leaves a command in another able to fork; the next command in a workspace
may run as another uid and still owns the files the last one made; an exhausted range refuses clearly."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from hermes_engine.workspace import sandbox
from hermes_engine.workspace.space import Workspace
from hermes_engine.workspace.uids import UidPool

# Every process keeps forking and ignores failures, so the bomb holds its whole process budget until the
# time limit ends it (a shell bomb gives up: dash exits when a fork fails).
BOMB = "python3 -c 'import os, time\nwhile True:\n    try: os.fork()\n    except OSError: time.sleep(0.01)'"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="uids are leased only when the gateway runs as root")


def first_line(result: sandbox.RunResult) -> str:
    return result.head.decode().splitlines()[0]


def test_a_fork_bomb_in_one_sandbox_does_not_starve_a_command_in_another(tmp_path: Path) -> None:
    bomb_ws = Workspace(tmp_path / "bomb", 1 << 20).ensure()
    calm_ws = Workspace(tmp_path / "calm", 1 << 20).ensure()
    bombing = threading.Event()
    outcome: dict[str, sandbox.RunResult] = {}

    def bomb() -> None:
        def seen(chunk: bytes) -> None:
            if b"bombing" in chunk:
                bombing.set()
        outcome["bomb"] = sandbox.run(bomb_ws.root, f"id -u; echo bombing; {BOMB}",
                                      sandbox.Limits(seconds=8, processes=32), on_output=seen)

    thread = threading.Thread(target=bomb)
    thread.start()
    try:
        assert bombing.wait(20)
        threading.Event().wait(1.0)  # let the bomb reach its process limit
        calm = sandbox.run(calm_ws.root, "for i in $(seq 40); do /bin/true || exit 7; done; id -u",
                           sandbox.Limits(seconds=20, processes=32))
    finally:
        thread.join(30)
    assert calm.exit_code == 0, calm.text()
    calm_uid = calm.head.decode().split()[-1]
    bomb_uid = first_line(outcome["bomb"])
    assert calm_uid != bomb_uid
    assert "0" not in (calm_uid, bomb_uid)


def test_the_next_command_may_run_as_another_uid_and_still_owns_the_files(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", 1 << 20).ensure()
    limits = sandbox.Limits(seconds=20)
    made = sandbox.run(ws.root, "id -u; mkdir d; chmod 700 d; echo one > d/f; chmod 600 d/f", limits)
    again = sandbox.run(ws.root, "id -u; echo two >> d/f; cat d/f; rm -r d", limits)
    assert made.exit_code == 0 and again.exit_code == 0, again.text()
    assert first_line(made) != first_line(again)  # released uids go to the back of the queue
    assert again.head.decode().splitlines()[1:] == ["one", "two"]


def test_commands_running_together_in_one_workspace_share_its_uid(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", 1 << 20).ensure()
    pool = UidPool(1_999_900_000, 5, folder=tmp_path / "locks")
    with pool.lease(ws.root) as first, pool.lease(ws.root) as second:
        assert first == second == os.lstat(ws.root).st_uid
        other = Workspace(tmp_path / "other", 1 << 20).ensure()
        with pool.lease(other.root) as third:
            assert third != first


def test_an_exhausted_uid_range_refuses_the_command_with_a_reason(tmp_path: Path) -> None:
    pool = UidPool(1_999_900_100, 1, folder=tmp_path / "locks")
    busy = Workspace(tmp_path / "busy", 1 << 20).ensure()
    other = Workspace(tmp_path / "other", 1 << 20).ensure()
    with pool.lease(busy.root):
        with pytest.raises(sandbox.SandboxUnavailable, match="all 1 sandbox uids"):
            sandbox.run(other.root, "true", sandbox.Limits(seconds=5), uids=pool)
    assert sandbox.run(other.root, "id -u", sandbox.Limits(seconds=5), uids=pool).head == b"1999900100\n"
