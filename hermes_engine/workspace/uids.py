"""A uid of its own for each running sandbox, so one command's process limit is its own.

RLIMIT_NPROC counts every process of the real uid on the machine. If every sandbox ran as the same uid,
parallel commands (and any other process of that uid) would share one budget: a fork bomb in one chat
would leave another chat's command unable to fork. A root gateway therefore leases each workspace a uid
from a configured range while commands run in it (`workspace.uid_first`, `workspace.uid_count`; `setpriv`
needs no passwd entry). Commands running at the same time in the same workspace share its uid (they share
its files anyway); any other running command has a different one. A gateway that is not root cannot
change uid: its sandboxes all run as its own uid and share one process budget (the README says so).

The lease is machine-wide: each uid has a lock file (`flock`) under a root-owned folder, so gateways and
test runs on one host never hand out the same uid at once; the kernel drops the lock when a process dies.
Released uids go to the back of the queue, so a uid whose last processes are still being reaped is not
handed out again at once.

Before the first command of a lease the workspace's files are handed to the leased uid (walked with
`os.fwalk`, symlinks never followed), so a file one command made stays writable by the next.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_FIRST = 1_999_000_000  # outside what Debian and systemd give to users, services and containers
DEFAULT_COUNT = 1000
_LOCK_FOLDER = "hermes-sandbox-uids"


class NoFreeUid(RuntimeError):
    """Every uid of the range is leased: too many commands run at once on this machine."""


@dataclass
class _Lease:
    uid: int
    lock_fd: int
    users: int = 0
    ready: threading.Event = field(default_factory=threading.Event)


def lock_folder() -> Path:
    """Where the per-uid lock files live: /run/lock when there is one (a tmpfs, cleared at boot)."""
    base = Path("/run/lock") if os.path.isdir("/run/lock") else Path(tempfile.gettempdir())
    return base / _LOCK_FOLDER


def _private_folder(path: Path) -> Path:
    """The lock folder, created owner-only; refused when someone else made it (a planted folder or link)."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise NoFreeUid(f"{path} is not a private folder of this user; the sandbox uids cannot be leased safely.")
    return path


class UidPool:
    """Leases uids of [first, first + count) to workspaces while their commands run."""

    def __init__(self, first: int = DEFAULT_FIRST, count: int = DEFAULT_COUNT, folder: Path | None = None) -> None:
        if first < 1 or count < 1 or first + count > 2**32 - 1:
            raise ValueError(f"the sandbox uid range {first}+{count} is not a range of unprivileged uids")
        self.first, self.count = first, count
        self.folder = folder
        self._lock = threading.Lock()
        self._leases: dict[str, _Lease] = {}
        self._next = 0

    @contextlib.contextmanager
    def lease(self, workspace: Path) -> Iterator[int]:
        """The uid commands in `workspace` run as until the block ends; the files are theirs by then."""
        key = str(workspace)
        with self._lock:
            held = self._leases.get(key)
            first_user = held is None
            if held is None:
                held = self._leases[key] = self._take()
            held.users += 1
        try:
            if first_user:
                try:
                    hand_over(workspace, held.uid)
                finally:
                    held.ready.set()
            else:
                held.ready.wait()
            yield held.uid
        finally:
            with self._lock:
                held.users -= 1
                if held.users == 0:
                    del self._leases[key]
                    os.close(held.lock_fd)

    def _take(self) -> _Lease:
        folder = _private_folder(self.folder or lock_folder())
        for step in range(self.count):
            uid = self.first + (self._next + step) % self.count
            fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    continue
                raise
            self._next = (self._next + step + 1) % self.count
            return _Lease(uid, fd)
        raise NoFreeUid(f"all {self.count} sandbox uids from {self.first} are in use; try again when a command "
                        "has finished.")


def hand_over(workspace: Path, uid: int) -> None:
    """Make every entry of the workspace owned by `uid` (and its group), never following a symlink.

    Runs while no command runs in the workspace; `fwalk` works from open folders, so a folder swapped
    for a symlink during the walk is not entered."""
    os.chown(workspace, uid, uid, follow_symlinks=False)
    for _, dirs, names, dir_fd in os.fwalk(workspace, follow_symlinks=False):
        for name in (*dirs, *names):
            with contextlib.suppress(FileNotFoundError):
                if os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_uid != uid:
                    os.chown(name, uid, uid, dir_fd=dir_fd, follow_symlinks=False)


_pools: dict[tuple[int, int], UidPool] = {}
_pools_lock = threading.Lock()


def pool_for(first: int = DEFAULT_FIRST, count: int = DEFAULT_COUNT) -> UidPool:
    """One pool per range in a process (several bots in one gateway share it)."""
    with _pools_lock:
        pool = _pools.get((first, count))
        if pool is None:
            pool = _pools[(first, count)] = UidPool(first, count)
        return pool
