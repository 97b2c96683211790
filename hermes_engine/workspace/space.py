"""One workspace per conversation scope and bot, in a folder named opaquely under the workspaces' root
(`folders.py`).

The scope is the person in a direct message (`person-<id>`: their DMs on every linked platform share one
workspace) and the conversation in a group: the channel, or the thread when the message is in one
(`chat-<digest>`), so people working together in a thread share files and nobody else's leak into it.

A workspace has a size quota. File tools refuse a write that would take it past the quota; a terminal
command may write at most what is left (its file-size limit), and once the workspace is over quota every
write is refused until files are deleted. Paths never leave the workspace: they are relative, carry no
`..`, and no part of them is a symlink (the rule the skill library uses, `hermes_engine.confine`). Files are reached
by opening one folder at a time with O_NOFOLLOW, so a folder a command swaps for a link while a file tool
runs is refused too, not followed.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from hermes_engine.confine import inside, is_real_dir
from hermes_engine.errors import HermesError
from hermes_engine.workspace.sandbox import drops_privileges

# Never follow a planted symlink, and never block on a FIFO a command left where a file was expected.
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class WorkspaceError(HermesError):
    """A path or write the workspace refuses; the message is what the model reads."""


def scope_name(*, chat_kind: str, person_id: int | None, session_key: str) -> str:
    """The folder name of a conversation's workspace (see the module docstring)."""
    if chat_kind == "dm" and person_id is not None:
        return f"person-{person_id}"
    where = session_key.split(":user:", 1)[0]  # a group's workspace is the group's, not one member's
    return "chat-" + hashlib.sha256(where.encode()).hexdigest()[:16]


def tree_size(root: Path) -> int:
    """Bytes used by the regular files under `root`, symlinks not followed."""
    total = 0
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(Path(entry.path))
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


@dataclass(frozen=True)
class Workspace:
    root: Path
    quota_bytes: int

    def ensure(self) -> Workspace:
        """Create the folder (a root gateway hands it to a sandbox uid before each command runs)."""
        self.root.parent.mkdir(parents=True, exist_ok=True)
        if not self.root.exists():
            self.root.mkdir(mode=0o755)
        if not is_real_dir(self.root):
            raise WorkspaceError(f"The workspace {self.root} is not a real folder; nothing was done.")
        return self

    def _own(self, path: Path | int) -> None:
        """Give what a file tool made to the workspace's owner, the uid its commands run as."""
        if drops_privileges():
            st = os.lstat(self.root)
            os.chown(path, st.st_uid, st.st_gid)

    def size(self) -> int:
        return tree_size(self.root)

    def room(self) -> int:
        """Bytes that may still be written."""
        return max(0, self.quota_bytes - self.size())

    def reset(self) -> None:
        """Delete everything in the workspace (the folder stays)."""
        for entry in list(os.scandir(self.root)):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)

    # ------------------------------------------------------------------ paths

    def relative(self, path: str) -> PurePosixPath:
        """A path the model gave, as a clean relative path; `/workspace/...` (what commands see) is accepted."""
        text = path.strip()
        if text in ("", ".", "/workspace", "/workspace/"):
            return PurePosixPath(".")
        if text.startswith("/workspace/"):
            text = text[len("/workspace/"):]
        rel = PurePosixPath(text)
        if rel.is_absolute() or ".." in rel.parts or "\x00" in text:
            raise WorkspaceError(f"{path!r} is outside the workspace: use a relative path without '..'.")
        return rel

    def checked(self, path: str) -> PurePosixPath:
        """`path` as a clean relative path, refused at once (with a message saying which part) when an existing
        part is a symlink. The opens below enforce the same rule again, race-free."""
        rel = self.relative(path)
        if rel != PurePosixPath("."):
            inside(self.root, rel, owner="workspace tools", error=WorkspaceError)
        return rel

    @contextlib.contextmanager
    def folder(self, rel: PurePosixPath, *, create: bool = False) -> Iterator[int]:
        """An open descriptor of the folder `rel` (`create`: made as needed), reached one part at a time from
        the workspace with O_NOFOLLOW. Checking a path and then opening it by name would let a command swap a
        folder for a symlink in between (its files run in parallel with the tools); each open here refuses a
        link itself, so what it reaches stays inside the workspace."""
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for part in rel.parts if rel != PurePosixPath(".") else ():
                inner = self._open_part(fd, part, rel, create)
                os.close(fd)
                fd = inner
            yield fd
        finally:
            os.close(fd)

    def _open_part(self, fd: int, part: str, rel: PurePosixPath, create: bool) -> int:
        """The descriptor of the folder `part` inside the folder `fd`; a missing one is made if `create`."""
        try:
            return os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise WorkspaceError(f"{rel.as_posix()} does not exist.") from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise WorkspaceError(f"{rel.as_posix()} goes through {part!r}, which is not a folder (or is a "
                                     f"symlink, never followed); nothing was read or written.") from None
            raise WorkspaceError(f"{rel.as_posix()} cannot be reached: {exc.strerror}.") from None
        try:
            os.mkdir(part, 0o755, dir_fd=fd)
            inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            raise WorkspaceError(f"{rel.as_posix()} cannot be made: {exc.strerror}.") from None
        self._own(inner)
        return inner

    # ------------------------------------------------------------------ files

    def read_bytes(self, path: str) -> bytes:
        rel = self.checked(path)
        with self.folder(rel.parent) as parent:
            try:
                fd = os.open(rel.name or ".", os.O_RDONLY | _NOFOLLOW, dir_fd=parent)
            except FileNotFoundError:
                raise WorkspaceError(f"{path} does not exist.") from None
            except OSError as exc:
                raise WorkspaceError(f"{path} cannot be read: {exc.strerror}.") from None
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise WorkspaceError(f"{path} is not a regular file.")
            return handle.read()

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a file (folders made as needed), refused beyond the quota; never follows a symlink."""
        rel = self.checked(path)
        if rel == PurePosixPath("."):
            raise WorkspaceError("Give a file name, not the workspace itself.")
        with self.folder(rel.parent, create=True) as parent:
            try:
                old: os.stat_result | None = os.stat(rel.name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            if old is not None and not stat.S_ISREG(old.st_mode):
                raise WorkspaceError(f"{path} exists and is not a regular file; nothing was written.")
            old_size = old.st_size if old is not None else 0
            used = self.size()
            if used - old_size + len(data) > self.quota_bytes:
                raise WorkspaceError(f"Refused: writing {len(data):,} bytes would take the workspace past its "
                                     f"quota of {self.quota_bytes:,} bytes ({used:,} used). Delete files first.")
            try:
                fd = os.open(rel.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o644, dir_fd=parent)
            except OSError as exc:
                raise WorkspaceError(f"{path} cannot be written: {exc.strerror}.") from None
        with os.fdopen(fd, "wb") as handle:
            self._own(handle.fileno())
            handle.write(data)
