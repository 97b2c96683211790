"""Who holds a lease or a claim, written so that another process on the same host can tell it is dead.

Every lease and kanban claim names its holder as `<replica>:<boot id>:<pid>:<start>:<tag>`: the replica
(`HERMES_REPLICA_ID`, by default the host name: the space in which pids mean something), the kernel's boot id,
the process id and the process's start time (clock ticks since boot, from `/proc`), and a tag that tells apart
several holders inside one process. A process that finds a lease held under its own replica name can then
know for sure that the holder is gone — from an earlier boot, or a pid that no longer runs (or now runs
another program) — and take the lease at once instead of waiting out its time to live. A holder on another
replica is never judged: its pids belong to another machine, and only its lease period speaks for it.

Replicas that share a host name but not a process space (containers given one host name, host networking)
must each set `HERMES_REPLICA_ID`, as they already must for their leases to tell them apart.
"""

from __future__ import annotations

import functools
import os
import secrets
import socket
from dataclasses import dataclass

__all__ = ["Holder", "holder_gone", "new_holder", "process_holder"]

_BOOT_ID = "/proc/sys/kernel/random/boot_id"


@dataclass(frozen=True)
class Holder:
    replica: str
    boot: str  # the first 8 hex digits of the boot id; "" where the system does not tell
    pid: int
    started: int  # clock ticks after boot when the process started; 0 where the system does not tell
    tag: str = ""

    def __str__(self) -> str:
        return f"{self.replica}:{self.boot}:{self.pid}:{self.started}:{self.tag}"

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        """The holder `text` names, or None for text written another way (a fixed name, an older format): such
        a holder is never judged dead. A kanban claim's `#attempt` is ignored."""
        replica, *rest = text.split("#", 1)[0].rsplit(":", 4)
        if len(rest) != 4 or not replica:
            return None
        boot, pid, started, tag = rest
        if not (pid.isdigit() and started.isdigit()) or (boot and not _is_hex(boot)):
            return None
        return cls(replica, boot, int(pid), int(started), tag)


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def _replica(replica: str | None) -> str:
    return replica or os.environ.get("HERMES_REPLICA_ID") or socket.gethostname()


@functools.cache
def _boot_id() -> str:
    try:
        with open(_BOOT_ID, encoding="ascii") as f:
            return f.read().strip().replace("-", "")[:8]
    except OSError:
        return ""


def _stat(pid: int) -> tuple[str, int] | None:
    """A process's state letter and start time from `/proc/<pid>/stat`, or None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()  # the command name before it may hold spaces and parentheses
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def _this_process() -> Holder:
    return _process(os.getpid())  # looked up by pid: a forked child is a process of its own


@functools.cache
def _process(pid: int) -> Holder:
    stat = _stat(pid)
    return Holder("", _boot_id(), pid, stat[1] if stat else 0)


def process_holder(replica: str | None = None) -> str:
    """This process as one holder: every part of it that passes the same name shares its leases."""
    me = _this_process()
    return str(Holder(_replica(replica), me.boot, me.pid, me.started))


def new_holder(replica: str | None = None) -> str:
    """A holder of this process of its own, told apart from the process's others by a random tag."""
    me = _this_process()
    return str(Holder(_replica(replica), me.boot, me.pid, me.started, secrets.token_hex(4)))


def holder_gone(text: str, *, replica: str | None = None) -> bool:
    """True only when `text` names a process of this replica that is surely no longer running: one from an
    earlier boot, a pid that does not exist or is a zombie, or a pid reused by a process started later."""
    holder = Holder.parse(text)
    if holder is None or holder.replica != _replica(replica):
        return False
    me = _this_process()
    if holder.boot and me.boot and holder.boot != me.boot:
        return True
    if holder.pid == me.pid:
        return bool(holder.started and me.started and holder.started != me.started)
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # it runs, as another user
    except OSError:
        return False
    stat = _stat(holder.pid)
    if stat is None:
        return False
    state, started = stat
    if state in ("Z", "X"):  # killed, not yet reaped by its parent
        return True
    return bool(holder.started and started and started != holder.started)
