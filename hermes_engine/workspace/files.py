"""The `files` toolset: read, write, patch, list and search files in the conversation's workspace.

Every path goes through `Workspace.resolve` (relative, no `..`, no symlink on the way, last part opened
with O_NOFOLLOW), so these tools reach nothing the sandboxed terminal could not.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from hermes_engine.workspace.space import Workspace, WorkspaceError

MAX_READ_LINES = 2000
MAX_SEARCH_HITS = 200
MAX_SEARCH_FILE_BYTES = 2 * 1024 * 1024


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
    folder = ws.resolve(path)
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except FileNotFoundError:
        raise WorkspaceError(f"{path} does not exist.") from None
    except NotADirectoryError:
        raise WorkspaceError(f"{path} is not a folder.") from None
    lines = []
    for entry in entries:
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            lines.append(f"{entry.name}/")
        elif stat.S_ISLNK(st.st_mode):
            lines.append(f"{entry.name}@ (symlink, not followed)")
        else:
            lines.append(f"{entry.name}  {st.st_size:,} bytes")
    return "\n".join(lines) or "(empty)"


def search(ws: Workspace, pattern: str) -> str:
    """Lines matching a regular expression, in every regular file (symlinks are not followed)."""
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise WorkspaceError(f"{pattern!r} is not a valid regular expression: {exc}.") from None
    hits: list[str] = []
    for file in _files(ws.root):
        rel = file.relative_to(ws.root).as_posix()
        if regex.search(rel):
            hits.append(f"{rel} (name)")
        try:
            fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_SEARCH_FILE_BYTES)
        if b"\x00" in data[:4096]:
            continue
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            if regex.search(line):
                hits.append(f"{rel}:{n}: {line[:200]}")
                if len(hits) >= MAX_SEARCH_HITS:
                    return "\n".join(hits) + f"\n[stopped at {MAX_SEARCH_HITS} hits]"
    return "\n".join(hits) or "No matches."


def _files(root: Path) -> list[Path]:
    found: list[Path] = []
    stack = [root]
    while stack:
        folder = stack.pop()
        for entry in sorted(os.scandir(folder), key=lambda e: e.name, reverse=True):
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                found.append(Path(entry.path))
    return sorted(found)
