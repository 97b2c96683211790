"""The `files` toolset: read, write, patch, list and search files in the conversation's workspace.

Every path is relative, without `..`, and reached one folder at a time with O_NOFOLLOW (`Workspace.folder`),
so these tools reach nothing the sandboxed terminal could not, also while a command rearranges the folders.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import PurePosixPath

from hermes_engine.workspace.space import Workspace, WorkspaceError

MAX_READ_LINES = 2000
MAX_SEARCH_HITS = 200
MAX_SEARCH_FILE_BYTES = 2 * 1024 * 1024
SEARCH_SECONDS = 3.0  # within the tool's own limit, so the person gets the hits found so far


def read_lines(ws: Workspace, path: str, offset: int = 1, limit: int = 500) -> str:
    text = ws.read_bytes(path).decode("utf-8", "replace")
    lines = text.splitlines()
    start = max(1, offset)
    chosen = lines[start - 1:start - 1 + max(1, min(limit, MAX_READ_LINES))]
    if not chosen:
        return f"{path} has {len(lines)} lines; nothing at line {start}."
    width = len(str(start + len(chosen) - 1))
    body = "\n".join(f"{n:>{width}}| {line}" for n, line in enumerate(chosen, start=start))
    rest = len(lines) - (start - 1 + len(chosen))
    return body + (f"\n[{rest} more lines: read on with offset={start + len(chosen)}]" if rest > 0 else "")


def write_text(ws: Workspace, path: str, content: str) -> str:
    data = content.encode("utf-8")
    ws.write_bytes(path, data)
    return f"Wrote {len(data):,} bytes to {ws.relative(path).as_posix()}."


def patch_text(ws: Workspace, path: str, old: str, new: str) -> str:
    if not old:
        raise WorkspaceError("Give the exact text to replace (old must not be empty).")
    text = ws.read_bytes(path).decode("utf-8")
    count = text.count(old)
    if count != 1:
        where = "not found" if count == 0 else f"found {count} times; include more context so it is unique"
        raise WorkspaceError(f"The text to replace was {where} in {path}; nothing was changed.")
    ws.write_bytes(path, text.replace(old, new, 1).encode("utf-8"))
    return f"Patched {ws.relative(path).as_posix()}."


def list_entries(ws: Workspace, path: str = ".") -> str:
    rel = ws.checked(path)
    with ws.folder(rel) as folder:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
        lines = []
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode):
                lines.append(f"{entry.name}/")
            elif stat.S_ISLNK(st.st_mode):
                lines.append(f"{entry.name}@ (symlink, not followed)")
            else:
                lines.append(f"{entry.name}  {st.st_size:,} bytes")
    return "\n".join(lines) or "(empty)"


def search(ws: Workspace, pattern: str) -> str:
    """Lines matching a regular expression, in every regular file (symlinks are not followed).

    The expression is the model's: one like `^(a+)+$` backtracks for ever on a few dozen bytes, and Python's
    own `re` holds the GIL while it does, which would stall every chat. The `regex` engine matches with the
    GIL released and gives up at a deadline. It is imported by the first search, not with the toolset
    (some 30 ms and 1.3 MB of every start otherwise)."""
    import regex

    try:
        expression = regex.compile(pattern)
    except regex.error as exc:
        raise WorkspaceError(f"{pattern!r} is not a valid regular expression: {exc}.") from None
    deadline = time.monotonic() + SEARCH_SECONDS
    hits: list[str] = []

    def found(text: str) -> bool:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return expression.search(text, concurrent=True, timeout=left) is not None

    try:
        for rel, data in _files(ws):
            if found(rel):
                hits.append(f"{rel} (name)")
            for n, line in enumerate(data.decode("utf-8", "replace").splitlines() if data else [], start=1):
                if found(line):
                    hits.append(f"{rel}:{n}: {line[:200]}")
                    if len(hits) >= MAX_SEARCH_HITS:
                        return "\n".join(hits) + f"\n[stopped at {MAX_SEARCH_HITS} hits]"
    except TimeoutError:
        hits.append(f"[stopped after {SEARCH_SECONDS:g} s: the expression takes too long on these files; "
                    "a simpler one, without nested repetition, finds more]")
    return "\n".join(hits) or "No matches."


def _files(ws: Workspace) -> Iterator[tuple[str, bytes]]:
    """(path, head of the content; empty for a binary file) of every regular file. The walk holds each folder
    open (`os.fwalk`) and opens files relative to it without following links, so a folder swapped for a
    symlink during the search leads nowhere."""
    with ws.folder(PurePosixPath(".")) as root:
        for folder, dirs, names, fd in os.fwalk(".", dir_fd=root, follow_symlinks=False):
            dirs.sort()
            for name in sorted(names):
                try:
                    file = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
                except OSError:
                    continue
                with os.fdopen(file, "rb") as handle:
                    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                        continue
                    data = handle.read(MAX_SEARCH_FILE_BYTES)
                yield os.path.normpath(os.path.join(folder, name)), b"" if b"\x00" in data[:4096] else data
