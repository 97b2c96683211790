"""Attachment retention: the files people sent are deleted once older than the profile's
`attachments.retention_days`, by a job the host's leased scheduler runs once a day on one replica.

The sweep walks `<HERMES_HOME>/attachments/` (every conversation's folder, the layout `/forget` knows),
deletes regular files last modified before the cutoff, then the folders left empty. It never follows a
symlink (a linked folder is not entered, a linked file not touched; a root that is a link is left alone) and
never leaves the root. Several bots sharing one home share its attachment folders, so each bot's job applies
its own period to all of them: the shortest period wins.

A download cut by a crash leaves its hidden temporary file (`.<hex>.part`, see `adapters/downloads.py`): the
sweep deletes those once untouched for `PARTIAL_GRACE_SECONDS` (a live download writes to its file at least
every read timeout), whatever the retention, and runs once when the gateway starts as well. What the model
was told about an old message stays as it was; a file gone since is one sentence from `read_document`.

Where the store shares blobs among replicas (PostgreSQL, `attachments/blobs.py`), the job deletes the blobs
past the retention too, by the time their file arrived: once that is gone from the database, no replica
can bring the file back, whichever replica's disk the sweep walked.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import stat
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_engine.attachments.folders import ATTACHMENTS
from hermes_engine.ports.blobs import AttachmentBlobs
from hermes_engine.ports.feature import Feature

if TYPE_CHECKING:
    from hermes_engine.ports.host import Host

log = logging.getLogger(__name__)

DAY = 86400.0
JOB = "attachments-prune"
PARTIAL_SUFFIX = ".part"
PARTIAL_GRACE_SECONDS = 3600.0
_PARTIAL = re.compile(r"^\.[0-9a-f]{32}\.part$")


def partial_name() -> str:
    """A fresh name for a download's hidden temporary file (the name the sweep recognises)."""
    return f".{uuid.uuid4().hex}{PARTIAL_SUFFIX}"


def is_partial(name: str) -> bool:
    return _PARTIAL.match(name) is not None


@dataclass(frozen=True)
class Swept:
    files: int = 0  # attachments past the retention
    partials: int = 0  # abandoned temporary files of cut downloads
    folders: int = 0  # folders left empty
    problems: int = 0  # entries that could not be removed (logged)
    blobs: int = 0  # attachments past the retention deleted from the database's blob store


def sweep(root: Path, now: float, retention_seconds: float | None,
          partial_grace: float = PARTIAL_GRACE_SECONDS) -> Swept:
    """Delete, under `root`, files last modified more than `retention_seconds` before `now` (None: none),
    temporary download files untouched for `partial_grace`, and the folders left empty (never `root`)."""
    if root.is_symlink() or not root.is_dir():
        return Swept()
    files = partials = folders = problems = 0
    for top, _dirs, names, top_fd in os.fwalk(root, follow_symlinks=False):  # linked folders not entered
        for name in names:
            try:
                st = os.stat(name, dir_fd=top_fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            age = now - st.st_mtime
            partial = is_partial(name)
            if not (age > partial_grace if partial else retention_seconds is not None and age > retention_seconds):
                continue
            try:
                os.unlink(name, dir_fd=top_fd)
            except FileNotFoundError:
                continue
            except OSError as exc:
                problems += 1
                log.warning("could not delete the attachment %s/%s: %s", top, name, exc.strerror or exc)
                continue
            partials += partial
            files += not partial
    for _top, dirs, _names, top_fd in os.fwalk(root, topdown=False, follow_symlinks=False):
        for name in dirs:
            try:
                os.rmdir(name, dir_fd=top_fd)  # only an empty folder; a linked one raises and stays
                folders += 1
            except OSError:
                continue
    return Swept(files, partials, folders, problems)


class AttachmentRetention(Feature):
    """Runs `sweep` on the home's attachment folders: at start (temporary files only) and once a day."""

    name = "attachment-retention"

    def __init__(self, home: Path, retention_days: float, *, every_seconds: float = DAY,
                 clock: Callable[[], float] = time.time) -> None:
        self.root = Path(home) / ATTACHMENTS
        self.retention_seconds = retention_days * DAY if retention_days > 0 else None
        self.every_seconds = every_seconds
        self.clock = clock
        self.blobs: AttachmentBlobs | None = None

    async def start(self, host: Host) -> None:
        store = host.store
        self.blobs = store if isinstance(store, AttachmentBlobs) and store.blobs_shared else None
        await asyncio.to_thread(sweep, self.root, self.clock(), None)
        host.schedule(f"{JOB}:{host.bot}", self.every_seconds, self.prune)

    async def prune(self) -> Swept:
        now = self.clock()
        swept = await asyncio.to_thread(sweep, self.root, now, self.retention_seconds)
        if self.blobs is not None and self.retention_seconds is not None:
            cutoff = datetime.fromtimestamp(now - self.retention_seconds, UTC)
            swept = Swept(swept.files, swept.partials, swept.folders, swept.problems,
                          await self.blobs.delete_blobs_before(cutoff))
        if swept.files or swept.partials or swept.folders or swept.blobs:
            log.info("deleted %d attachments past their retention (%d from the database), %d temporary files of "
                     "cut downloads and %d empty folders", swept.files, swept.blobs, swept.partials, swept.folders)
        return swept


__all__ = ["JOB", "PARTIAL_GRACE_SECONDS", "AttachmentRetention", "Swept", "is_partial", "partial_name", "sweep"]
