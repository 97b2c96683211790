"""Atomic file replacement for everything the engine keeps as files (memory, skills, pairing).

A reader sees the old content or the new, never half of either; a crash mid-write leaves the old file.
Atomic replacement alone does not make a read-modify-write safe: writers that must not lose each other's
changes also hold a `hermes_engine.filelock` lock.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def in_flight(name: str) -> bool:
    """Whether a file name is one of `atomic_write`'s temp files: a write under way, not content."""
    return name.startswith(".") and name.endswith(".tmp")


def atomic_write(path: Path, data: bytes, *, mode: int | None = None,
                 replace: Callable[[Path, Path], None] = lambda tmp, final: os.replace(tmp, final)) -> None:
    """Write `data` to a temp file beside `path`, fsync it, then rename it over `path` (with `replace`,
    the commit point) and fsync the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def atomic_write_text(path: Path, text: str) -> None:
    """`atomic_write` for UTF-8 text: skill files, reports and usage are all text."""
    atomic_write(path, text.encode("utf-8"))
