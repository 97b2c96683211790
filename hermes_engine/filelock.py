"""Cross-process file locks for everything the engine keeps as files (memory, skills, usage, pairing).

The gateway and the CLI run as separate processes over the same `HERMES_HOME`, so a read-modify-write of a
shared file needs an exclusive `flock`; threads and tasks of one process need their own lock as well, because
the kernel lock only sees open file descriptions. Two shapes cover the callers:

- `FileLock(path).hold()` for code that runs in threads: one re-entrant thread lock per path shared by the
  whole process, and the `flock` taken once, by the outermost `hold()` of the owning thread.
- `AsyncFileLocks().hold(path)` for coroutines: one `asyncio.Lock` per path and event loop (owned by the
  `AsyncFileLocks` object), then the `flock`, waited for in a worker thread so the event loop keeps running.
  It is not re-entrant.

A lock file is opened with `O_NOFOLLOW` and kept at mode 0o600: it lives in folders other users may be able
to write, and following a planted symlink would let a lock open (or create) a file somewhere else.
Where `fcntl` is missing (Windows) only the in-process locks apply.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import stat
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_MODE = 0o600
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class UnsafeLockFile(OSError):
    """The lock path is a symlink or not a regular file; locking through it could touch another file."""


def _key(path: Path) -> str:
    """Two spellings of one lock file (relative, through a symlinked folder) must share one in-process lock."""
    return str(path.parent.resolve() / path.name)


def open_lock_file(path: Path) -> int:
    """A descriptor on `path` (created 0o600, parents created); refuses symlinks and non-regular files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, _OPEN_FLAGS, LOCK_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeLockFile(errno.ELOOP, "lock file is a symlink; refusing to follow it", str(path)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeLockFile(errno.EINVAL, "lock file is not a regular file", str(path))
        if stat.S_IMODE(st.st_mode) != LOCK_MODE:  # created under a strict umask, or by an older version
            with contextlib.suppress(OSError):
                os.fchmod(fd, LOCK_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _release(fd: int) -> None:
    if fcntl is not None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)  # closing would release the flock anyway; unlocking first keeps the order explicit


class _Shared:
    """Per-path state of one process: the thread lock and, while some thread holds it, the descriptor."""

    def __init__(self) -> None:
        self.rlock = threading.RLock()
        self.depth = 0  # only the thread holding `rlock` reads or writes these two
        self.fd: int | None = None


class FileLock:
    """An exclusive lock on one lock file for thread-side code, re-entrant within a thread.

    Every `FileLock` on the same path in this process shares one thread lock, so two objects over one folder
    serialize like two processes do; a nested `hold()` in the owning thread passes straight through.
    """

    _shared: weakref.WeakValueDictionary[str, _Shared] = weakref.WeakValueDictionary()
    _registry_lock = threading.Lock()

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        key = _key(self.path)
        with self._registry_lock:
            state = self._shared.get(key)
            if state is None:
                state = self._shared[key] = _Shared()
        self._state = state  # kept alive by every FileLock on the path

    def __repr__(self) -> str:
        return f"FileLock({str(self.path)!r})"

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        state = self._state
        with state.rlock:
            if state.depth == 0 and fcntl is not None:
                fd = open_lock_file(self.path)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except BaseException:
                    os.close(fd)
                    raise
                state.fd = fd
            state.depth += 1
            try:
                yield
            finally:
                state.depth -= 1
                if state.depth == 0 and state.fd is not None:
                    fd, state.fd = state.fd, None
                    _release(fd)


def _task_key(path: Path) -> str:
    """No file-system calls, so it can run on the event loop. Two spellings of one file would get two task
    locks, but the `flock` still excludes them from each other."""
    return os.path.abspath(path)


class AsyncFileLocks:
    """Exclusive per-path locks for coroutines, across the tasks of this object and across processes.

    Each object keeps its own task locks, so two objects over one folder meet only at the `flock`, exactly
    as two processes would. Locks are per event loop because an `asyncio.Lock` belongs to one loop.
    """

    def __init__(self) -> None:
        self._task_locks: weakref.WeakValueDictionary[tuple[int, str], asyncio.Lock] = weakref.WeakValueDictionary()

    @contextlib.asynccontextmanager
    async def hold(self, path: Path | str) -> AsyncIterator[None]:
        path = Path(path)
        key = (id(asyncio.get_running_loop()), _task_key(path))
        task_lock = self._task_locks.get(key)
        if task_lock is None:
            task_lock = self._task_locks[key] = asyncio.Lock()
        async with task_lock:
            fd = await self._acquire(path)
            try:
                yield
            finally:
                if fd is not None:
                    _release(fd)

    @staticmethod
    async def _acquire(path: Path) -> int | None:
        if fcntl is None:  # pragma: no cover
            return None
        await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
        fd = open_lock_file(path)  # no await between opening and the try below, so a cancel cannot leak it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            pass
        except BaseException:
            os.close(fd)
            raise
        # Another process holds it: wait in a worker thread so the event loop keeps running.
        waiting = asyncio.get_running_loop().run_in_executor(None, fcntl.flock, fd, fcntl.LOCK_EX)
        try:
            await asyncio.shield(waiting)
        except BaseException:
            # Cancelled (or failed) while waiting: close once the thread is done, which releases the lock.
            waiting.add_done_callback(lambda _f: os.close(fd))
            raise
        return fd


__all__ = ["LOCK_MODE", "AsyncFileLocks", "FileLock", "UnsafeLockFile", "open_lock_file"]
