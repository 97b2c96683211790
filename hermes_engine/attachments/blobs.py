"""The files people send, wherever this replica runs: `local_path` gives the file on this disk, brought here
from the store's blob store first when another replica downloaded it.

An adapter saves a file under the home of the replica that received it (`attachments/<folder>/<name>`), and the
message, recorded in the inbox, carries that absolute path. On PostgreSQL another replica may answer the
message, or a later one that reads the document on or sends the file back, and its disk has nothing there.
So where the store says blobs are shared (`AttachmentBlobs.blobs_shared`), each attachment is also put into
it, under its path relative to the attachments root, as soon as the engine sees it (`keep`: when the message
arrives, and again at the turn's first look, `ensure_local`); and a replica that lacks the file restores it
from there into its own attachments root, with the file's original time, so the retention sweep ages the copy
as it would the original. There the database is the record of what is kept: a copy left on a replica's disk
after `/forget` or the retention deleted the file (on whichever replica ran them) is not used again. On SQLite
(one process, one disk) nothing is put in the database.

The call sites (`load_images`, the document text, `read_document`, `send_file /attachments/…`) run in worker
threads and are plain functions the core calls with a message alone, so they find this replica's
`AttachmentFiles` through a context variable: `AttachmentsFeature` binds it in `on_turn_start`, so the turn's
worker threads and tool calls see the one of the gateway that runs it, also when several gateways share a
process. Without one bound (a bare test, a tool outside a turn), `local_path` is the file on disk or nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mimetypes
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Coroutine, Iterable
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from hermes_engine.attachments.folders import ATTACHMENTS
from hermes_engine.attachments.retention import partial_name
from hermes_engine.blocking import call_on_loop
from hermes_engine.ports.blobs import AttachmentBlobs, BlobGone
from hermes_engine.ports.inbound import Attachment

log = logging.getLogger(__name__)

READ_BYTES = 1024 * 1024  # what is read from a file at a time while it is put (the store keeps 1 MiB chunks)
KNOWN_KEPT = 4096  # paths this process knows are in the blob store, so a turn does not ask again
OCTET_STREAM = "application/octet-stream"
NEW_FILE_SECONDS = 3600.0  # a file on disk the shared store lacks is a new download this long, then a leftover


def blob_key(path: str | Path) -> str | None:
    """The blob name of a file of an attachments root, ``<folder>/<name>`` (the same on every replica
    whatever its home); None for a path outside that layout or with a part that could leave the root."""
    p = PurePosixPath(Path(path).as_posix())
    if len(p.parts) < 3 or p.parent.parent.name != ATTACHMENTS:
        return None
    folder, name = p.parent.name, p.name
    if folder in ("", ".", "..") or name in ("", ".", "..") or folder.startswith(".") or name.startswith("."):
        return None  # hidden names are downloads in progress (`retention.partial_name`)
    return f"{folder}/{name}"


class AttachmentFiles:
    """This replica's attachments root and, where blobs are shared, the store that holds every replica's."""

    def __init__(self, home: Path | None, blobs: AttachmentBlobs | None = None,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        """`home`: this replica's HERMES_HOME (None: only the paths messages give are looked at); `loop`: the
        event loop the store runs on (by default the one running now, if any)."""
        self.root = Path(home) / ATTACHMENTS if home is not None else None
        self.blobs = blobs if getattr(blobs, "blobs_shared", False) else None  # a store without the role: the disk only
        if loop is None:
            with contextlib.suppress(RuntimeError):
                loop = asyncio.get_running_loop()
        self.loop = loop
        self._kept: OrderedDict[str, None] = OrderedDict()

    @property
    def shared(self) -> bool:
        return self.blobs is not None

    def here(self, key: str) -> Path | None:
        return self.root / key if self.root is not None else None

    # ----------------------------------------------------------------- on the event loop

    async def keep(self, path: str | Path, mime_type: str = "") -> bool:
        """Put the file at `path` into the blob store unless it is there already (or blobs are not shared);
        True when this call stored it."""
        key = blob_key(path)
        if self.blobs is None or key is None or key in self._kept:
            return False
        try:
            st = await asyncio.to_thread(os.stat, path)
        except OSError:
            return False
        when = datetime.fromtimestamp(st.st_mtime, UTC)
        mime = mime_type or mimetypes.guess_type(str(path))[0] or OCTET_STREAM
        try:
            info, stored = await self.blobs.put_blob(key, _read(Path(path)), mime_type=mime, created_at=when)
        except (OSError, BlobGone) as exc:  # the file went meanwhile (retention, /forget)
            log.info("could not keep the attachment %s in the database: %s", key, exc)
            return False
        except Exception as exc:  # noqa: BLE001 - the database failing: the file is still here, the turn goes on
            log.warning("could not keep the attachment %s in the database: %s", key, exc)
            return False
        self._known(key)
        if stored:
            log.debug("kept the attachment %s in the database (%d bytes)", key, info.size)
        return stored

    async def adopt(self, path: Path, key: str, mime_type: str = "") -> Path | None:
        """`path` when the store keeps `key`, or keeps it now as a new file; None for a leftover copy."""
        assert self.blobs is not None
        try:
            kept = await self.blobs.blob_info(key) is not None
        except Exception as exc:  # noqa: BLE001 - the database failing: the file on disk serves
            log.warning("could not look for the attachment %s in the database: %s", key, exc)
            return path
        if kept:
            self._known(key)
            return path
        try:
            age = time.time() - (await asyncio.to_thread(os.stat, path)).st_mtime
        except OSError:
            return None
        if age > NEW_FILE_SECONDS:
            log.info("not using %s: the database no longer keeps it (deleted by /forget or the retention)", key)
            return None
        await self.keep(path, mime_type)
        return path

    async def keep_all(self, attachments: Iterable[Attachment]) -> None:
        for attachment in attachments:
            if attachment.path and not attachment.refused_reason:
                await self.keep(attachment.path, attachment.mime_type)

    async def restore(self, key: str) -> Path | None:
        """The blob `key` written into this replica's attachments root (through a temporary file renamed into
        place once whole); None when the store does not have it."""
        if self.blobs is None:
            return None
        try:
            info = await self.blobs.blob_info(key)
        except Exception as exc:  # noqa: BLE001 - the database failing: the file is missing, as without one
            log.warning("could not look for the attachment %s in the database: %s", key, exc)
            return None
        if info is None:
            return None
        target = self.here(key)
        if target is None:
            return None
        partial = target.with_name(partial_name())
        try:
            out = await asyncio.to_thread(_create, partial)
            try:
                size = 0
                async for chunk in self.blobs.blob_chunks(key):
                    await asyncio.to_thread(out.write, chunk)
                    size += len(chunk)
            finally:
                await asyncio.to_thread(out.close)
            if size != info.size:
                raise BlobGone(f"{key}: {size} of {info.size} bytes")
            stamp = info.created_at.timestamp()
            await asyncio.to_thread(os.utime, partial, (stamp, stamp))
            await asyncio.to_thread(os.replace, partial, target)
        except Exception as exc:  # noqa: BLE001 - a disk or database failure: the file is missing, one log line
            log.warning("could not bring the attachment %s from the database: %s", key, exc)
            return None
        finally:
            with contextlib.suppress(FileNotFoundError):
                await asyncio.to_thread(partial.unlink)
        self._known(key)
        log.info("brought the attachment %s from the database (%d bytes)", key, info.size)
        return target

    async def bring_named(self, folder: str, name: str) -> Path | None:
        """The newest file the person sent as `name` in the conversation folder `folder` (stored as
        ``<message id>-<name>``), brought here if only the store has it; None when the store has none."""
        if self.blobs is None:
            return None
        sent = [b for b in await self.blobs.list_blobs(folder) if b.path.rpartition("/")[2].endswith(f"-{name}")]
        if not sent:
            return None
        newest = max(sent, key=lambda b: b.created_at)
        target = self.here(newest.path)
        if target is not None and await asyncio.to_thread(target.is_file):
            return target
        return await self.restore(newest.path)

    # ----------------------------------------------------------------- from worker threads

    def local_path(self, where: Attachment | str | Path) -> Path | None:
        """The file on this disk: where the message says it is, else in this replica's attachments root, else
        restored there from the blob store. None when neither has it. Blocks: call it from a worker thread.

        Where blobs are shared the store says which files are kept: a file on disk it lacks is put into it when
        it arrived within `NEW_FILE_SECONDS` (its message's own arrival, whose keep may still be under way), and
        is otherwise a copy left on this disk after `/forget` or the retention deleted the file elsewhere: not
        served. A store that cannot be asked leaves the file on disk in use."""
        if isinstance(where, Attachment):
            if not where.path or where.refused_reason:
                return None
            raw, mime = where.path, where.mime_type
        else:
            raw, mime = str(where), ""
        key = blob_key(raw)
        # where the replica that downloaded it put it, then where this replica keeps it (its home may differ)
        for candidate in (Path(raw), self.here(key) if key else None):
            if candidate is not None and candidate.is_file():
                if key and self.blobs is not None and key not in self._kept:
                    return self._on_loop(self.adopt(candidate, key, mime), "keeping an attachment")
                return candidate
        if key is None or self.blobs is None:
            return None
        return self._on_loop(self.restore(key), "bringing an attachment")

    def named(self, folder: str, name: str) -> Path | None:
        """`bring_named`, from a worker thread."""
        return self._on_loop(self.bring_named(folder, name), "bringing an attachment") if self.blobs else None

    def ensure_local(self, attachments: Iterable[Attachment]) -> None:
        """Every downloaded attachment of a message kept in the store and present on this disk."""
        for attachment in attachments:
            self.local_path(attachment)

    def _on_loop(self, call: Coroutine[Any, Any, Any], what: str) -> Path | None:
        if self.loop is None or self.loop.is_closed():
            call.close()
            return None
        try:
            result = call_on_loop(self.loop, call, what)
        except RuntimeError as exc:  # called on the loop itself: only what is on disk
            log.debug("%s", exc)
            return None
        except Exception as exc:  # noqa: BLE001 - the database failing: as if the store had nothing
            log.warning("%s failed: %s", what, exc)
            return None
        return result if isinstance(result, Path) else None

    def _known(self, key: str) -> None:
        self._kept[key] = None
        self._kept.move_to_end(key)
        while len(self._kept) > KNOWN_KEPT:
            self._kept.popitem(last=False)


async def _read(path: Path) -> AsyncIterator[bytes]:
    handle = await asyncio.to_thread(path.open, "rb")
    try:
        while chunk := await asyncio.to_thread(handle.read, READ_BYTES):
            yield chunk
    finally:
        await asyncio.to_thread(handle.close)


def _create(partial: Path) -> BinaryIO:
    partial.parent.mkdir(parents=True, exist_ok=True)
    return partial.open("xb")


# ----------------------------------------------------------------- the replica of the turn running here

DISK = AttachmentFiles(None)  # what is on disk, nothing more: where no gateway bound its own
_CURRENT: ContextVar[AttachmentFiles | None] = ContextVar("attachment_files", default=None)


def bind(files: AttachmentFiles) -> None:
    """Make `files` the one `local_path` uses in this task (a turn) and what it starts from now on."""
    _CURRENT.set(files)


def current() -> AttachmentFiles:
    return _CURRENT.get() or DISK


def local_path(where: Attachment | str | Path) -> Path | None:
    """`AttachmentFiles.local_path` of the replica running this turn (see the module docstring)."""
    return current().local_path(where)


def ensure_local(attachments: Iterable[Attachment]) -> None:
    current().ensure_local(attachments)


__all__ = ["AttachmentFiles", "blob_key", "bind", "current", "ensure_local", "local_path"]
