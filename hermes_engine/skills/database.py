"""A bot's skill library kept in the database (the `DocumentStore` role), so replicas share one library.

The record is the database: one document per file of the library folder (every SKILL.md, its references/,
scripts/ and templates/, the archive, the backups, the approval queue, usage and reports), plus a revision
document bumped by every change. Each replica works on a private copy of that folder, and the folder library
(`FileSkillLibrary`) does all the deciding on it unchanged: parsing, scanning on write and on load,
confinement, the approval queue, limits. Only where the bytes live changes.

- Reading first brings the copy up to the database's revision (one query when nothing changed; readers
  arriving together share one).
- Changing (`apply`, `archive`, `backup`) holds a lease on the library across replicas, brings the copy up
  to date, lets the folder library change it, and writes every file that changed back, each compared and
  set on the version it was read at, then bumps the revision. Two replicas patching one skill therefore
  both land, one after the other, and neither overwrites the other.
- Files the folder's own bookkeeping writes outside a change (usage counts, the approval queue, reports)
  are written back at the next read, under the same lease; should another replica have changed the same
  file meanwhile, the database's copy wins.

The library is blocking (its callers run it in worker threads); each store call is handed to the event loop
the store lives on (`hermes_engine.blocking`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import shutil
import stat
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from hermes_engine.atomic import atomic_write, in_flight
from hermes_engine.blocking import call_on_loop
from hermes_engine.holders import new_holder
from hermes_engine.ports.storage import DocumentStore, LeaseStore
from hermes_engine.skills.contract import ChangeResult, SkillChange
from hermes_engine.skills.files import FileSkillLibrary
from hermes_engine.skills.model import Skill, SkillError

REVISION = "#revision"  # not a file name the folder can hold at its top ("#" starts no skill or bookkeeping)
_LOCAL_ONLY = {".locks", ".tmp"}
_TEXT, _BINARY = "t:", "b:"

T = TypeVar("T")


def area_of(bot: str) -> str:
    return f"skills/{bot}"


def encode(data: bytes) -> str:
    """A file's bytes as document text: UTF-8 text as it is, anything else (backups) as base64."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = "\x00"
    return _TEXT + text if "\x00" not in text else _BINARY + base64.b64encode(data).decode("ascii")


def decode(text: str) -> bytes:
    if text.startswith(_BINARY):
        return base64.b64decode(text[len(_BINARY):])
    return text.removeprefix(_TEXT).encode("utf-8")


def library_files(root: Path) -> dict[str, os.stat_result]:
    """Every regular file of a library folder by its path relative to the folder (symlinks never followed,
    the process-local lock and staging folders left out, and so are writes under way in other threads: their
    temp files, or a file gone since the folder was listed)."""
    found: dict[str, os.stat_result] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root:
            dirnames[:] = [d for d in dirnames if d not in _LOCAL_ONLY]
        for name in filenames:
            path = Path(dirpath) / name
            if in_flight(name):
                continue
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                found[path.relative_to(root).as_posix()] = st
    return found


@dataclass
class _Synced:
    version: int
    digest: str
    stamp: tuple[int, int]  # (mtime_ns, size) of the copy when it last matched the database


class DatabaseSkillLibrary(FileSkillLibrary):
    """`SkillLibrary` whose record is the database (see the module docstring); `root` is this replica's
    private copy, emptied at the first read."""

    def __init__(self, root: Path | str, documents: DocumentStore, leases: LeaseStore, bot: str, *,
                 loop: asyncio.AbstractEventLoop | None = None, lease_seconds: float = 60.0,
                 wait_seconds: float = 120.0) -> None:
        self.documents = documents
        self.leases = leases
        self.area = area_of(bot)
        self.loop = loop or asyncio.get_running_loop()
        self.lease_seconds = lease_seconds
        self.wait_seconds = wait_seconds
        self._synced: dict[str, _Synced] = {}
        self._revision: int | None = None  # None: the copy was never brought up to date
        self._sync_lock = threading.RLock()
        self._refreshes_begun = 0  # refreshes started (under the lock) and the last one that completed
        self._refreshed = 0
        self._holding = threading.local()
        super().__init__(root)

    def __repr__(self) -> str:
        return f"DatabaseSkillLibrary({self.area!r}, copy at {str(self.root)!r})"

    def _run(self, call: Coroutine[Any, Any, T]) -> T:
        return call_on_loop(self.loop, call, "the database skill library")

    # ---------------------------------------------------------------- database → copy
    def _pull(self) -> None:
        head = self._run(self.documents.get_document(self.area, REVISION))
        version = head.version if head else 0
        if version == self._revision:
            return
        if self._revision is None:  # a copy left by an earlier run is not trusted: start empty
            for entry in self.root.iterdir():
                if entry.name in _LOCAL_ONLY:
                    continue
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        docs = self._run(self.documents.read_documents(self.area))
        docs.pop(REVISION, None)
        for rel, doc in docs.items():
            known = self._synced.get(rel)
            if known is not None and known.version == doc.version:
                continue
            data = decode(doc.text)
            target = self.root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, data)
            if doc.updated_at is not None:  # the copy's age is the document's: staleness is judged by it
                stamp = doc.updated_at.timestamp()
                os.utime(target, (stamp, stamp))
            self._synced[rel] = _Synced(doc.version, hashlib.sha256(data).hexdigest(), _stamp(target.stat()))
        for rel in [r for r in self._synced if r not in docs]:
            with contextlib.suppress(FileNotFoundError):
                (self.root / rel).unlink()
            del self._synced[rel]
            self._prune_empty((self.root / rel).parent)
        self._revision = version

    # ---------------------------------------------------------------- copy → database
    def _local_changes(self) -> tuple[dict[str, bytes], list[str]]:
        files = library_files(self.root)
        changed: dict[str, bytes] = {}
        for rel, st in files.items():
            known = self._synced.get(rel)
            if known is not None and known.stamp == _stamp(st):
                continue
            try:
                data = (self.root / rel).read_bytes()
            except FileNotFoundError:  # replaced or removed since it was listed: the next refresh sees it
                continue
            if known is not None and known.digest == hashlib.sha256(data).hexdigest():
                known.stamp = _stamp(st)
                continue
            changed[rel] = data
        return changed, [rel for rel in self._synced if rel not in files]

    def _push(self) -> None:
        changed, removed = self._local_changes()
        if not changed and not removed:
            return
        for rel, data in changed.items():
            known = self._synced.get(rel)
            version = self._run(self.documents.put_document(self.area, rel, encode(data),
                                                            expected_version=known.version if known else 0))
            if version is None:
                self._revision = -1  # re-read everything at the next pull
                raise SkillError(f"{rel} was changed by another replica at the same time; nothing more was "
                                 f"written. Try again.")
            self._synced[rel] = _Synced(version, hashlib.sha256(data).hexdigest(),
                                        _stamp((self.root / rel).stat()))
        for rel in removed:
            self._run(self.documents.delete_documents(self.area, rel))
            del self._synced[rel]
        self._bump()

    def _bump(self) -> None:
        for _ in range(50):
            head = self._run(self.documents.get_document(self.area, REVISION))
            version = self._run(self.documents.put_document(
                self.area, REVISION, str((head.version if head else 0) + 1),
                expected_version=head.version if head else 0))
            if version is not None:
                self._revision = version
                return
        raise SkillError("the skill library's revision kept changing; try again")

    # ---------------------------------------------------------------- the lease
    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """Hold the library across replicas, up to date, and write back what changed inside."""
        if getattr(self._holding, "yes", False):
            yield
            return
        with self._sync_lock:
            name, holder = f"{self.area}:write", new_holder()
            delay, waited = 0.02, 0.0
            while not self._run(self.leases.acquire_lease(name, holder, self.lease_seconds)):
                if waited >= self.wait_seconds:
                    raise SkillError("The skill library is being changed by another replica; try again shortly.")
                time.sleep(delay)
                waited, delay = waited + delay, min(delay * 2, 0.25)
            self._holding.yes = True
            try:
                self._pull()
                yield
                self._push()
            finally:
                self._holding.yes = False
                self._run(self.leases.release_lease(name, holder))

    def refresh(self) -> None:
        """Bring the copy up to the database, and write back what the folder's bookkeeping wrote since."""
        if getattr(self._holding, "yes", False):
            return
        asked = self._refreshes_begun
        with self._sync_lock:
            if self._refreshed > asked:  # one that began after this call did all it would: many turns
                return                   # reading at once share one query, not one each in a queue
            self._refreshes_begun += 1
            begun = self._refreshes_begun
            self._pull()
            if any(self._local_changes()):
                with self._changing():
                    pass
            self._refreshed = begun

    # ---------------------------------------------------------------- the folder library, synced
    def apply_sync(self, change: SkillChange, *, author: str = "agent", commit: bool = True) -> ChangeResult:
        if not commit:
            self.refresh()
            return super().apply_sync(change, author=author, commit=False)
        with self._changing():
            return super().apply_sync(change, author=author, commit=True)

    def archive_sync(self, name: str) -> str:
        with self._changing():
            return super().archive_sync(name)

    def backup_sync(self, keep: int = 5) -> str:
        with self._changing():
            return super().backup_sync(keep)

    def list_sync(self, category: str | None = None) -> list[Skill]:
        self.refresh()
        return super().list_sync(category)

    def get_sync(self, name: str) -> Skill | None:
        self.refresh()
        return super().get_sync(name)

    def read_file_sync(self, name: str, file_path: str) -> str:
        self.refresh()
        return super().read_file_sync(name, file_path)

    def revision_sync(self) -> str:
        self.refresh()
        return super().revision_sync()

    def archived(self) -> list[str]:
        self.refresh()
        return super().archived()

    def backups(self) -> list[Path]:
        self.refresh()
        return super().backups()


def _stamp(st: os.stat_result) -> tuple[int, int]:
    return st.st_mtime_ns, st.st_size


__all__ = ["DatabaseSkillLibrary", "REVISION", "area_of", "decode", "encode", "library_files"]
