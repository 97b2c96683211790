"""The cgroup v2 code on a real cgroup2 hierarchy: a command's group is made, holds the command's whole
process tree, `cgroup.kill` ends it and the group is removed, nothing left; a cgroup without the memory and
pids controllers is refused saying so; and where they are delegated, the limits hold. Each test works under
a fresh parent cgroup of its own, removed afterwards; where no cgroup2 is writable the tests are skipped,
saying why."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_engine.workspace import cgroups

MB = 1024 * 1024


def _cgroup2_mount(tmp_path: Path) -> Iterator[Path]:
    """The cgroup2 file system: where it is mounted already, else freshly mounted (as root) at a temp dir."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, tail = line.partition(" - ")
        point = Path(fields.split(" ")[4])
        if tail.startswith("cgroup2 ") and os.access(point, os.W_OK):
            yield point
            return
    if os.geteuid() != 0:
        pytest.skip("no writable cgroup2 is mounted, and mounting one needs root")
    point = tmp_path / "cgroup2"
    point.mkdir()
    done = subprocess.run(["mount", "-t", "cgroup2", "none", str(point)], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        pytest.skip(f"no cgroup2 can be mounted here: {done.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def _remove_tree(folder: Path) -> None:
    for child in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        cgroups.CommandGroup(cgroups.Hierarchies(2, child, child), (child,), ()).empty()
        with contextlib.suppress(OSError):
            child.rmdir()
    cgroups.CommandGroup(cgroups.Hierarchies(2, folder, folder), (folder,), ()).empty()
    with contextlib.suppress(OSError):
        folder.rmdir()


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Path]:
    yield from _cgroup2_mount(tmp_path)


@pytest.fixture
def parent(mount: Path) -> Iterator[Path]:
    """A fresh cgroup under this process's own v2 cgroup, for one test."""
    own = next(line.split("::", 1)[1] for line in Path("/proc/self/cgroup").read_text().splitlines()
               if line.startswith("0::"))
    folder = mount / own.lstrip("/") / f"hermes-test-{uuid.uuid4().hex[:12]}"
    try:
        folder.mkdir()
    except OSError as exc:
        pytest.skip(f"no cgroup can be made under {folder.parent}: {exc.strerror}")
    try:
        yield folder
    finally:
        _remove_tree(folder)


def _v2_cgroup_of(pid: int) -> str | None:
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return line[3:]
    return None


def _gone(pid: int) -> bool:
    """Dead: no such process, or a zombie its new parent has not reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_a_v2_command_group_holds_the_whole_process_tree_and_cgroup_kill_ends_it_leaving_nothing(
        parent: Path) -> None:
    found = cgroups.Hierarchies(2, parent, parent)
    tree = "sleep 60 & sleep 60 & echo $!; wait"
    with cgroups.command_group(found) as group:
        [folder] = group.folders
        assert folder.parent == parent and (folder / "cgroup.kill").exists()  # Linux 5.14 and newer
        proc = subprocess.Popen(["sh", "-c", tree], stdout=subprocess.PIPE, text=True,
                                preexec_fn=lambda: os.write(group.procs[0], b"0"))
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        inside = {int(p) for p in (folder / "cgroup.procs").read_text().split()}
        assert {proc.pid, child} <= inside and len(inside) == 3  # the shell and both sleeps
        assert _v2_cgroup_of(child) == _v2_cgroup_of(proc.pid) and _v2_cgroup_of(child).endswith(folder.name)
        group.empty()
        assert proc.wait(10) == -signal.SIGKILL
        deadline = time.monotonic() + 10
        while not all(_gone(pid) for pid in inside) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert all(_gone(pid) for pid in inside)
        assert (folder / "cgroup.procs").read_text() == ""
        proc.stdout.close()
    assert not folder.exists()
    assert [p.name for p in parent.iterdir() if p.is_dir()] == []


def test_a_v2_command_group_left_with_processes_running_is_emptied_and_removed_when_the_block_ends(
        parent: Path) -> None:
    found = cgroups.Hierarchies(2, parent, parent)
    with cgroups.command_group(found) as group:
        proc = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"],
                                preexec_fn=lambda: os.write(group.procs[0], b"0"))
        deadline = time.monotonic() + 10
        while len((group.folders[0] / "cgroup.procs").read_text().split()) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert proc.wait(10) == -signal.SIGKILL
    assert not group.folders[0].exists()


def test_a_v2_cgroup_without_the_memory_and_pids_controllers_is_refused_saying_so(mount: Path, parent: Path,
                                                                                  tmp_path: Path) -> None:
    bare = parent / "bare"  # the parent's subtree_control gives it nothing, whatever the host delegates
    bare.mkdir()
    assert "memory" not in (bare / "cgroup.controllers").read_text().split()
    with pytest.raises(cgroups.CgroupUnavailable, match="lacks the memory and pids controllers"):
        cgroups.delegated_v2(mount, bare)
    table, own = tmp_path / "mountinfo", tmp_path / "cgroup"  # what find reads: a mount table, a process's cgroups
    table.write_text(f"41 31 0:38 / {mount} rw,relatime - cgroup2 cgroup2 rw\n")
    own.write_text(f"0::/{bare.relative_to(mount)}\n")
    with pytest.raises(cgroups.CgroupUnavailable, match=f"cgroup v2 at {bare} lacks"):
        cgroups.find(table, own)


SIX_HOLDERS = """\
import os, time
for _ in range(5):
    if os.fork() == 0:
        break
block = bytearray(40 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
print("held", flush=True)
time.sleep(5)
"""


def test_where_memory_and_pids_are_delegated_the_v2_limits_hold_for_the_whole_tree(mount: Path,
                                                                                   parent: Path) -> None:
    offered = set((parent / "cgroup.controllers").read_text().split())
    if not {"memory", "pids"} <= offered:
        pytest.skip(f"a cgroup made under {parent.parent} gets {sorted(offered) or 'no controllers'}: memory and "
                    "pids are not delegated there (on a hybrid host they are bound to cgroup v1)")
    gateway = subprocess.Popen(["sleep", "60"])  # a process in the parent: delegation moves it into a leaf
    try:
        (parent / "cgroup.procs").write_text(str(gateway.pid))
        found = cgroups.delegated_v2(mount, parent)
        assert found == cgroups.Hierarchies(2, parent, parent)
        assert (parent / "gateway" / "cgroup.procs").read_text().split() == [str(gateway.pid)]
        assert cgroups.delegated_v2(mount, parent / "gateway") == found  # a restart inside the leaf
        with cgroups.command_group(found) as group:
            group.limit(100 * MB, 16)
            done = subprocess.run([sys.executable, "-c", SIX_HOLDERS], capture_output=True, text=True,
                                  timeout=60, preexec_fn=lambda: os.write(group.procs[0], b"0"), check=False)
            killed, refused = group.events()
            assert killed >= 1 and done.stdout.count("held") < 6, done.stdout
            subprocess.run(["sh", "-c", "for i in $(seq 40); do sleep 5 & done 2>/dev/null; wait"],
                           capture_output=True, timeout=60, preexec_fn=lambda: os.write(group.procs[0], b"0"),
                           check=False)
            assert refused == 0 and group.events()[1] >= 1  # forks refused at pids.max
    finally:
        gateway.kill()
        gateway.wait()


HOLDER = """\
import os, subprocess, sys, time
from pathlib import Path
from hermes_engine.workspace import cgroups
parent = Path(sys.argv[1])
with cgroups.command_group(cgroups.Hierarchies(2, parent, parent), sys.argv[2]) as group:
    child = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: os.write(group.procs[0], b"0"))
    print(child.pid, flush=True)
    time.sleep(60)
"""


def test_a_v2_command_group_a_killed_process_left_behind_is_emptied_and_removed_by_its_name(parent: Path) -> None:
    found, name = cgroups.Hierarchies(2, parent, parent), cgroups.new_name()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(parent), name], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    child = int(holder.stdout.readline())
    holder.kill()  # as the MCP SDK kills a launcher: none of its clean-up runs
    holder.wait()
    holder.stdout.close()
    folder = parent / name
    assert (folder / "cgroup.procs").read_text().split() == [str(child)]  # left behind, still holding the child
    cgroups.remove_left(found, name)
    assert not folder.exists()
    deadline = time.monotonic() + 10
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _gone(child)
    cgroups.remove_left(found, name)  # gone already: nothing to do


@pytest.mark.parametrize("name", ["", ".", "..", "gateway", "hermes-sandbox-", "hermes-sandbox-0/../..",
                                  "hermes-sandbox-" + "A" * 32])
def test_only_a_name_new_name_makes_is_emptied_or_removed(parent: Path, name: str) -> None:
    """A wrong name never reaches the gateway's own cgroup or a folder beside it."""
    (parent / "gateway").mkdir()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        (parent / "gateway" / "cgroup.procs").write_text(str(sleeper.pid))
        with pytest.raises(ValueError, match="is not the name of a command's cgroup"):
            cgroups.remove_left(cgroups.Hierarchies(2, parent, parent), name)
        assert sleeper.poll() is None and (parent / "gateway").is_dir()
    finally:
        sleeper.kill()
        sleeper.wait()
