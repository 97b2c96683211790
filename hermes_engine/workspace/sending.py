"""`send_file`: a file of the conversation's workspace sent to the person, through their platform's outlet.

The file is confined as every file tool's path is (relative, no `..`, never through a symlink, opened with
O_NOFOLLOW one folder at a time, a regular file only), and its size is checked against the platform's limit
on the open descriptor before a byte is read, so a 3 GB file is refused at once and never loaded. Its type
is read from its bytes, never from its name: a `.png` that holds text goes as a document.

A file the person sent is reached as ``/attachments/<name>``: the adapters keep those outside the workspace,
in the conversation's attachment folder (which /forget removes), and the newest of that name is sent (on
PostgreSQL the newest the database keeps, brought from there when another replica received it).

The idempotency key is made of the conversation, the message being answered, the file's name and digest
and the caption: the same send asked again in one turn (after a restart the model sees its cut call as
interrupted and asks again) finds the first one in the delivery ledger and is not sent twice.
"""

from __future__ import annotations

import errno
import hashlib
import mimetypes
import os
import stat
from dataclasses import replace
from pathlib import Path, PurePosixPath

from hermes_engine.attachments.blobs import current
from hermes_engine.ports.reply import FileOutlet, OutgoingFile
from hermes_engine.ports.tools import ToolContext
from hermes_engine.workspace.space import Workspace, WorkspaceError

__all__ = ["ATTACHED", "FileOutlets", "attached", "prepare", "send_key", "sent_file"]

ATTACHED = "/attachments/"  # `send_file("/attachments/notes.csv")`: a file the person sent in this conversation

SNIFF_BYTES = 8 * 1024  # enough for every magic number `filetype` reads
OCTET_STREAM = "application/octet-stream"
_TEXT_TYPES = {".csv": "text/csv", ".md": "text/markdown", ".json": "application/json", ".txt": "text/plain"}


class FileOutlets:
    """The outlets that can send files, one per platform; the composition root adds each adapter."""

    def __init__(self) -> None:
        self._outlets: dict[str, FileOutlet] = {}

    def add(self, outlet: FileOutlet) -> None:
        self._outlets[outlet.platform] = outlet

    def get(self, platform: str) -> FileOutlet | None:
        return self._outlets.get(platform)


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):,.0f} MB" if size >= 1024 * 1024 else f"{size:,} bytes"


def media_type(head: bytes, name: str) -> str:
    """What the bytes say (magic numbers); a file without any keeps the text type its name gives, if any."""
    import filetype

    kind = filetype.guess(head) if head else None
    if kind is not None:
        return str(kind.mime)
    suffix = PurePosixPath(name).suffix.lower()
    guessed = _TEXT_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or ""
    if guessed.startswith("text/") or guessed == "application/json":
        return guessed
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return OCTET_STREAM
    return "text/plain"


def prepare(ws: Workspace, path: str, caption: str, outlet: FileOutlet) -> OutgoingFile:
    """Open `path` inside the workspace, check it is a regular file within the platform's limit, read it."""
    rel = ws.checked(path)
    if rel == PurePosixPath("."):
        raise WorkspaceError("Give the path of a file, not the workspace itself.")
    with ws.folder(rel.parent) as parent:
        try:
            fd = os.open(rel.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=parent)
        except FileNotFoundError:
            raise WorkspaceError(f"{path} does not exist in the workspace.") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # the file itself is a symlink
                raise WorkspaceError(f"{path} is a symlink; files are sent only from real files of the "
                                     f"workspace, never through a link.") from None
            raise WorkspaceError(f"{path} cannot be read: {exc.strerror}.") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise WorkspaceError(f"{path} is not a regular file; only regular files can be sent.")
    with os.fdopen(fd, "rb") as handle:
        if st.st_size == 0:
            raise WorkspaceError(f"{path} is empty; there is nothing to send.")
        head = handle.read(SNIFF_BYTES)
        kind = media_type(head, rel.name)
        limit = outlet.max_file_bytes(kind)
        if limit <= 0:
            raise WorkspaceError(f"Files cannot be sent on {outlet.platform}.")
        if st.st_size > limit:
            raise WorkspaceError(f"Refused: {path} is {_mb(st.st_size)}, over {outlet.platform}'s limit of "
                                 f"{_mb(limit)} for a file a bot sends. Make it smaller (compress or split it).")
        data = head + handle.read(limit + 1 - len(head))
        if len(data) > limit:  # grown since the check
            raise WorkspaceError(f"Refused: {path} grew past {outlet.platform}'s limit of {_mb(limit)}.")
    return OutgoingFile(name=rel.name, data=data, media_type=kind, caption=caption.strip())


def sent_file(folder: Path, path: str) -> tuple[Workspace, str]:
    """Where the newest file the person sent as ``/attachments/<name>`` is (kept as ``<message id>-<name>`` in
    the conversation's attachment folder, `folder`): that folder as a workspace, so the file is confined there
    as workspace files are in theirs, and its stored name."""
    name = path.strip()[len(ATTACHED):].strip()
    if not name or "/" in name or name in (".", ".."):
        raise WorkspaceError(f"Give the name of a file the person sent, as {ATTACHED}<name>.")
    return Workspace(folder, 0), _newest_sent(folder, name)


def attached(folder: Path, path: str, caption: str, outlet: FileOutlet) -> OutgoingFile:
    """The newest file the person sent under this name, to send back."""
    ws, stored = sent_file(folder, path)
    return replace(prepare(ws, stored, caption, outlet), name=path.strip()[len(ATTACHED):].strip())


def _newest_sent(folder: Path, name: str) -> str:
    """The stored name of the newest file sent as `name`. Where the database keeps every replica's files it
    says which (another replica may have received it: brought here first; a copy left on this disk after
    `/forget` or the retention elsewhere is not one); otherwise the folder does."""
    files = current()
    if files.shared:
        found = files.named(folder.name, name)
        if found is None or found.parent != folder:
            raise WorkspaceError(f"The person has sent no file named {name} in this conversation.")
        return found.name
    try:
        entries = [e for e in os.scandir(folder) if e.name.endswith(f"-{name}") and e.is_file(follow_symlinks=False)]
    except FileNotFoundError:
        entries = []
    if not entries:
        raise WorkspaceError(f"The person has sent no file named {name} in this conversation.")
    return max(entries, key=lambda e: e.stat(follow_symlinks=False).st_mtime_ns).name


def send_key(ctx: ToolContext, file: OutgoingFile) -> str:
    """One key per send asked in a turn (see the module docstring); `report.csv` and
    `/workspace/report.csv` are one send."""
    answering = ctx.target.reply_to_id if ctx.target is not None else None
    digest = hashlib.sha256()
    for part in (ctx.session_key, answering or "", file.name, hashlib.sha256(file.data).hexdigest(), file.caption):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\x00")
    return f"file:{ctx.session_id}:{digest.hexdigest()[:32]}"
