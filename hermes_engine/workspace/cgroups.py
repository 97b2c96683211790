"""A cgroup per command, so the sandbox's memory and process limits hold for the command's whole tree.

Rlimits are per process (memory) or per uid (processes): six processes under a 256 MB limit may hold six
times that. A cgroup counts them together. The gateway makes one under its own cgroup for each command
(`memory.max`, `memory.swap.max` and `pids.max`), the launcher moves itself into it between fork and exec
(so bwrap and everything it starts are inside before any of it runs), and the cgroup is emptied and removed
when the command ends. The cgroup file system is written directly, not through `systemd-run --scope`: that
needs a systemd on a bus, which a container has not, and a non-root service unit cannot reach the system one.

Where the gateway may make cgroups:
- cgroup v2 with the memory and pids controllers delegated to its cgroup: a systemd unit with `Delegate=yes`
  (deploy/hermes-gateway.service), or a container with a writable /sys/fs/cgroup. A v2 cgroup holding
  processes cannot give controllers to children, so the processes of the gateway's cgroup move first into a
  leaf beside the commands' (`gateway`).
- cgroup v1 with writable memory and pids hierarchies (hosts still on the hybrid layout).
Anywhere else `unavailable_reason()` says why, and the sandbox keeps its rlimits alone.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PROC_CGROUP = Path("/proc/self/cgroup")
MOUNTINFO = Path("/proc/self/mountinfo")
_NEEDED = ("memory", "pids")
_PREFIX = "hermes-sandbox-"
_NAME = re.compile(re.escape(_PREFIX) + "[0-9a-f]{32}")
_EMPTY_WAIT_SECONDS = 10.0


class CgroupUnavailable(RuntimeError):
    """No cgroup with memory and pids controllers may be made here; the message says why."""


@dataclass(frozen=True)
class Hierarchies:
    """The folders under which a command's cgroups are made: one (v2) or one per controller (v1)."""

    version: int
    memory: Path
    pids: Path

    def parents(self) -> tuple[Path, ...]:
        return (self.memory,) if self.memory == self.pids else (self.memory, self.pids)


@dataclass
class CommandGroup:
    """One command's cgroup (v1: one in each hierarchy). `procs` are open `cgroup.procs` files the launcher
    writes its pid into between fork and exec."""

    hierarchies: Hierarchies
    folders: tuple[Path, ...]
    procs: tuple[int, ...]

    def limit(self, memory_bytes: int, processes: int) -> None:
        """Bound the group's memory (swap none) and processes, before the launcher joins it."""
        first, last = self.folders[0], self.folders[-1]
        if self.hierarchies.version == 2:
            _write(first / "memory.max", str(memory_bytes))
            if (first / "memory.swap.max").exists():  # absent where swap is not accounted
                _write(first / "memory.swap.max", "0")
        else:
            _write(first / "memory.limit_in_bytes", str(memory_bytes))
            if (first / "memory.memsw.limit_in_bytes").exists():
                _write(first / "memory.memsw.limit_in_bytes", str(memory_bytes))
        _write(last / "pids.max", str(processes))

    def events(self) -> tuple[int, int]:
        """How many processes the memory limit killed and how many forks the process limit refused."""
        return _count(self.folders[0], "memory.events" if self.hierarchies.version == 2 else "memory.oom_control",
                      "oom_kill"), _count(self.folders[-1], "pids.events", "max")

    def empty(self) -> None:
        """Kill what is left and wait until the cgroups hold no process, so they can be removed."""
        deadline = time.monotonic() + _EMPTY_WAIT_SECONDS
        while True:
            pids = {pid for folder in self.folders for pid in _read(folder / "cgroup.procs").split()}
            if not pids or time.monotonic() > deadline:
                return
            if (self.folders[0] / "cgroup.kill").exists():  # v2 since Linux 5.14: no fork escapes it
                _write(self.folders[0] / "cgroup.kill", "1")
            else:
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.01)  # the kernel reaps them in its own time; nothing to wait on in v1


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _count(folder: Path, name: str, key: str) -> int:
    for line in _read(folder / name).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            return int(parts[1])
    return 0


def _mounts(mountinfo: Path) -> dict[str, Path]:
    """Mount points of the cgroup file systems: "2" for v2, each v1 controller by name."""
    found: dict[str, Path] = {}
    for line in _read(mountinfo).splitlines():
        fields, _, tail = line.partition(" - ")
        kind, _, options = tail.split(" ", 2) if tail.count(" ") >= 2 else (tail, "", "")
        point = Path(fields.split(" ")[4].replace("\\040", " "))
        if kind == "cgroup2":
            found.setdefault("2", point)
        elif kind == "cgroup":
            for option in options.split(","):
                if option in _NEEDED:
                    found.setdefault(option, point)
    return found


def _own_paths(proc_cgroup: Path) -> dict[str, str]:
    """A process's cgroup per hierarchy, from its /proc/<pid>/cgroup: "2" for v2, each v1 controller by name."""
    paths: dict[str, str] = {}
    for line in _read(proc_cgroup).splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else ["2"]:
            paths[name] = path.lstrip("/")
    return paths


def delegated_v2(mount: Path, own: Path) -> Hierarchies:
    """The v2 cgroup `own` (under the cgroup2 mount `mount`) made ready to hold commands' cgroups: its
    children get the memory and pids controllers; raises CgroupUnavailable saying why they cannot."""
    if not set(_NEEDED) <= set(_read(own / "cgroup.controllers").split()):
        raise CgroupUnavailable(f"cgroup v2 at {own} lacks the memory and pids controllers (not delegated).")
    if own.name == "gateway" and own != mount and set(_NEEDED) <= set(_read(own.parent / "cgroup.subtree_control")
                                                                     .split()):
        return Hierarchies(2, own.parent, own.parent)  # an earlier start in this cgroup made the leaf already
    enable = "+memory +pids"
    try:
        if not set(_NEEDED) <= set(_read(own / "cgroup.subtree_control").split()):
            try:
                _write(own / "cgroup.subtree_control", enable)
            except OSError as exc:
                if exc.errno != errno.EBUSY:  # busy: the cgroup holds processes, which a leaf must take first
                    raise
                leaf = own / "gateway"
                leaf.mkdir(exist_ok=True)
                for pid in _read(own / "cgroup.procs").split():
                    with contextlib.suppress(ProcessLookupError):
                        _write(leaf / "cgroup.procs", pid)
                _write(own / "cgroup.subtree_control", enable)
    except OSError as exc:
        raise CgroupUnavailable(f"cgroup v2 at {own} cannot be delegated to commands ({exc.strerror}).") from None
    return Hierarchies(2, own, own)


def find(mountinfo: Path = MOUNTINFO, proc_cgroup: Path = PROC_CGROUP) -> Hierarchies:
    """Where this process may make the commands' cgroups, from its mount table and its own cgroups (a
    process's /proc files by default); raises CgroupUnavailable saying why not."""
    mounts, own = _mounts(mountinfo), _own_paths(proc_cgroup)
    if "2" in mounts and "2" in own and not (set(_NEEDED) & set(mounts)):
        return delegated_v2(mounts["2"], mounts["2"] / own["2"])
    if set(_NEEDED) <= set(mounts) and set(_NEEDED) <= set(own):
        memory, pids = (mounts[name] / own[name] for name in _NEEDED)
        for folder in (memory, pids):
            if not os.access(folder, os.W_OK):
                raise CgroupUnavailable(f"the cgroup {folder} is not writable by this process.")
        return Hierarchies(1, memory, pids)
    raise CgroupUnavailable("no cgroup file system with the memory and pids controllers is mounted here.")


@functools.cache
def _found() -> Hierarchies | CgroupUnavailable:
    try:
        return find(MOUNTINFO, PROC_CGROUP)
    except CgroupUnavailable as exc:
        return exc


def hierarchies() -> Hierarchies | None:
    """`find()`, once per process; None where no cgroup can be made (`unavailable_reason` says why)."""
    found = _found()
    return found if isinstance(found, Hierarchies) else None


def unavailable_reason() -> str | None:
    found = _found()
    return str(found) if isinstance(found, CgroupUnavailable) else None


def new_name() -> str:
    """A fresh name for one command's cgroups (the same folder name in every hierarchy)."""
    return _PREFIX + uuid.uuid4().hex


def _checked(name: str) -> str:
    """`name` if `new_name` could have made it: a folder beside the gateway's own is never emptied or removed."""
    if _NAME.fullmatch(name) is None:
        raise ValueError(f"{name!r} is not the name of a command's cgroup")
    return name


@contextlib.contextmanager
def command_group(found: Hierarchies, name: str | None = None) -> Iterator[CommandGroup]:
    """A fresh cgroup for one command (v1: one in each hierarchy), emptied and removed when the block ends.
    It bounds nothing until `CommandGroup.limit`; the launcher joins it through `CommandGroup.procs`. `name`
    (from `new_name`) is given by whoever must find the cgroup again (`remove_left`); a fresh one otherwise.
    Raises ValueError for a name `new_name` would not make."""
    name = new_name() if name is None else _checked(name)
    folders = tuple(parent / name for parent in found.parents())
    made: list[Path] = []
    fds: list[int] = []
    try:
        for folder in folders:
            folder.mkdir(mode=0o755)
            made.append(folder)
        fds = [os.open(folder / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for folder in folders]
        yield CommandGroup(found, folders, tuple(fds))
    finally:
        for fd in fds:
            os.close(fd)
        for folder in reversed(made):
            _remove(found, folder)


def remove_left(found: Hierarchies, name: str) -> None:
    """The cgroups `name` that a process killed outright inside `command_group` left behind (SIGKILL runs no
    clean-up: an MCP server's launcher): emptied of what may still run in them, and removed; nothing where
    there are none. Raises ValueError for a name `new_name` would not make."""
    for parent in reversed(found.parents()):
        folder = parent / _checked(name)
        if folder.is_dir():
            _remove(found, folder)


def _remove(found: Hierarchies, folder: Path) -> None:
    CommandGroup(found, (folder,), ()).empty()
    with contextlib.suppress(OSError):
        folder.rmdir()
