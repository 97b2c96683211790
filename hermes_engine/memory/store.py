"""Memory documents and the logic that edits them.

A person owns two documents: MEMORY.md (notes about environment, projects, conventions) and USER.md (profile,
preferences, communication style). A group/channel/server may own a shared MEMORY.md. A document is a list
of entries; on disk they are separated by a line holding only `§`.

Two layers:
- `MemoryStore` (Protocol): where documents live. `read`/`write` whole entry lists plus `lock(owner)`, an
  async context manager that serializes read-modify-write for one owner. `FileMemoryStore` keeps Markdown
  files under `<HERMES_HOME>/memories/`; a database backend implements the same three methods.
- `MemoryBook`: the rules (limits, duplicates, unique matching, the security scan), used by the `memory`
  tool, the prompt contributor and the `/memory` command. Every change happens inside `store.lock(owner)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncContextManager, AsyncIterator, Iterable, Literal, Protocol, runtime_checkable

from hermes_engine.atomic import atomic_write
from hermes_engine.config import MemorySettings
from hermes_engine.policy.security import Finding, explain, scan_text

try:  # POSIX; elsewhere the in-process lock still serializes writers of one process
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

Target = Literal["memory", "user"]
TARGETS: tuple[str, ...] = ("memory", "user")
SEPARATOR = "§"
ENTRY_JOIN = f"\n{SEPARATOR}\n"
FILE_NAMES = {"memory": "MEMORY.md", "user": "USER.md"}


# --------------------------------------------------------------------------------------------------------
# owners and the file format
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class MemoryOwner:
    """Whose documents: a person (`MemoryOwner.person(42)`) or a shared scope (`MemoryOwner.shared(key)`)."""

    kind: Literal["person", "shared"]
    key: str

    @classmethod
    def person(cls, person_id: int) -> "MemoryOwner":
        if isinstance(person_id, bool) or not isinstance(person_id, int):
            raise TypeError(f"person_id must be an int, not {type(person_id).__name__}")
        return cls("person", str(person_id))

    @classmethod
    def shared(cls, scope: str) -> "MemoryOwner":
        if not scope or not isinstance(scope, str):
            raise ValueError("a shared memory scope needs a non-empty key")
        return cls("shared", scope)

    @property
    def is_shared(self) -> bool:
        return self.kind == "shared"

    def targets(self) -> tuple[str, ...]:
        """Documents this owner can have: a shared scope has MEMORY.md only."""
        return ("memory",) if self.is_shared else TARGETS

    def __str__(self) -> str:
        return f"shared scope {self.key!r}" if self.is_shared else f"person {self.key}"


def parse_entries(text: str) -> list[str]:
    """Split a document into entries: a line holding only `§` separates them; blank entries are dropped."""
    entries: list[str] = []
    current: list[str] = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line.strip() == SEPARATOR:
            entries.append("\n".join(current).strip())
            current = []
        else:
            current.append(line)
    entries.append("\n".join(current).strip())
    return [e for e in entries if e]


def format_entries(entries: list[str]) -> str:
    return ENTRY_JOIN.join(entries) + "\n" if entries else ""


def used_chars(entries: list[str]) -> int:
    """What counts against the limit: the entries joined by the separator (as they appear in the prompt)."""
    return len(ENTRY_JOIN.join(entries))


def usage_text(used: int, limit: int) -> str:
    return f"{used:,}/{limit:,} chars"


def safe_scope_name(scope: str) -> str:
    """A folder name for a shared scope key: readable slug plus a hash, so distinct keys never collide and no
    key can climb out of the memories folder."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", scope).strip("._-")[:80] or "scope"
    digest = hashlib.sha256(scope.encode("utf-8")).hexdigest()[:12]
    return f"{slug}-{digest}"


# --------------------------------------------------------------------------------------------------------
# stores
# --------------------------------------------------------------------------------------------------------


@runtime_checkable
class MemoryStore(Protocol):
    """Where memory documents live. Implementations: `FileMemoryStore`; a database backend fits the same seam.

    `write` replaces a document atomically (a reader sees the old or the new list, never a mix). `lock(owner)`
    serializes read-modify-write across tasks and processes; it is not re-entrant. Callers that change a
    document do `async with store.lock(owner): entries = await store.read(...); ...; await store.write(...)`.
    """

    async def read(self, owner: MemoryOwner, target: str) -> list[str]: ...

    async def write(self, owner: MemoryOwner, target: str, entries: list[str]) -> None: ...

    def lock(self, owner: MemoryOwner) -> AsyncContextManager[None]: ...


def _check_target(owner: MemoryOwner, target: str) -> None:
    if target not in owner.targets():
        raise ValueError(f"{owner} has no {target!r} document (choose from {', '.join(owner.targets())})")


class FileMemoryStore:
    """Markdown files: `<root>/<person_id>/MEMORY.md|USER.md` and `<root>/shared/<safe-scope>/MEMORY.md`.

    `root` is the memories folder itself; `FileMemoryStore.for_home(settings.home)` gives
    `<HERMES_HOME>/memories`. Writes go to a temp file in the same folder, are fsynced, then `os.replace`d.
    A per-owner `asyncio.Lock` serializes tasks of this process, an `fcntl.flock` on `<owner dir>/.lock`
    serializes processes.
    """

    LOCK_FILE = ".lock"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._locks: weakref.WeakValueDictionary[tuple[int, MemoryOwner], asyncio.Lock] = weakref.WeakValueDictionary()

    @classmethod
    def for_home(cls, home: str | os.PathLike[str]) -> "FileMemoryStore":
        return cls(Path(home) / "memories")

    # -- paths --

    def owner_dir(self, owner: MemoryOwner) -> Path:
        if owner.is_shared:
            return self.root / "shared" / safe_scope_name(owner.key)
        if not owner.key.isdigit():
            raise ValueError(f"person key must be a non-negative integer id, not {owner.key!r}")
        return self.root / owner.key

    def path(self, owner: MemoryOwner, target: str) -> Path:
        _check_target(owner, target)
        return self.owner_dir(owner) / FILE_NAMES[target]

    # -- the protocol --

    async def read(self, owner: MemoryOwner, target: str) -> list[str]:
        path = self.path(owner, target)
        return await asyncio.to_thread(self._read_file, path)

    async def write(self, owner: MemoryOwner, target: str, entries: list[str]) -> None:
        path = self.path(owner, target)
        await asyncio.to_thread(self._write_file, path, format_entries(list(entries)))

    @contextlib.asynccontextmanager
    async def lock(self, owner: MemoryOwner) -> AsyncIterator[None]:
        key = (id(asyncio.get_running_loop()), owner)
        task_lock = self._locks.get(key)
        if task_lock is None:
            task_lock = self._locks[key] = asyncio.Lock()
        async with task_lock:
            fd = await self._acquire_file_lock(owner)
            try:
                yield
            finally:
                if fd is not None:
                    os.close(fd)  # closing the descriptor releases the flock

    # -- file helpers (sync; run in a worker thread) --

    def _read_file(self, path: Path) -> list[str]:
        try:
            return parse_entries(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []

    def _write_file(self, path: Path, text: str) -> None:
        atomic_write(path, text.encode("utf-8"), replace=self._replace)

    def _replace(self, tmp: Path, final: Path) -> None:
        """The commit point of a write (a seam tests use to simulate a crash)."""
        os.replace(tmp, final)

    async def _acquire_file_lock(self, owner: MemoryOwner) -> int | None:
        if fcntl is None:  # pragma: no cover
            return None
        folder = self.owner_dir(owner)
        await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
        fd = os.open(folder / self.LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
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


class InMemoryStore:
    """A `MemoryStore` in a dict: for tests and throwaway sessions."""

    def __init__(self) -> None:
        self.documents: dict[tuple[MemoryOwner, str], list[str]] = {}
        self._locks: dict[MemoryOwner, asyncio.Lock] = {}

    async def read(self, owner: MemoryOwner, target: str) -> list[str]:
        _check_target(owner, target)
        return list(self.documents.get((owner, target), []))

    async def write(self, owner: MemoryOwner, target: str, entries: list[str]) -> None:
        _check_target(owner, target)
        self.documents[(owner, target)] = list(entries)

    @contextlib.asynccontextmanager
    async def lock(self, owner: MemoryOwner) -> AsyncIterator[None]:
        async with self._locks.setdefault(owner, asyncio.Lock()):
            yield


# --------------------------------------------------------------------------------------------------------
# the rules
# --------------------------------------------------------------------------------------------------------

LABELS = {"memory": "MEMORY.md", "user": "USER.md"}
_PREVIEW_CHARS = 60


def blocked_placeholder(findings: Iterable[Finding | str]) -> str:
    """`[blocked entry: <rule>, …]` for findings (or rule names)."""
    rules = dict.fromkeys(f if isinstance(f, str) else f.rule for f in findings)
    return f"[blocked entry: {', '.join(rules)}]"


def display_entry(entry: str) -> str:
    """An entry as it may be shown to a model: its text, or a placeholder when it fails the scan."""
    findings = scan_text(entry, kind="memory")
    return blocked_placeholder(findings) if findings else entry


def preview(entry: str, width: int = _PREVIEW_CHARS) -> str:
    text = " ".join(display_entry(entry).split())
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class MemoryResult:
    """Outcome of one change. `str(result)` is the text for the model."""

    ok: bool
    message: str
    changed: bool = False
    usage: str = ""
    entries: tuple[str, ...] = field(default=(), repr=False)  # display form (blocked entries as placeholders)
    findings: tuple[Finding, ...] = ()

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class _NoMatch:
    message: str
    ambiguous: bool


@dataclass(frozen=True)
class Document:
    """A document as the prompt and `/memory` show it."""

    target: str
    entries: tuple[str, ...]  # raw text
    display: tuple[str, ...]  # blocked entries replaced by placeholders
    used: int
    limit: int

    @property
    def usage(self) -> str:
        return usage_text(self.used, self.limit)


class MemoryBook:
    """Add / replace / remove with limits, duplicate and match rules, and the security scan.

    `show_entries=False` on a call keeps entry text out of error messages (used when the model works in a
    multi-speaker session, where a person's private notes must not be echoed).
    """

    def __init__(self, store: MemoryStore, limits: MemorySettings | None = None) -> None:
        self.store = store
        self.limits = limits or MemorySettings()

    def limit(self, target: str) -> int:
        return self.limits.user_chars if target == "user" else self.limits.memory_chars

    @staticmethod
    def label(owner: MemoryOwner, target: str) -> str:
        return f"shared {LABELS[target]}" if owner.is_shared else LABELS[target]

    # -- reading --

    async def entries(self, owner: MemoryOwner, target: str) -> list[str]:
        return await self.store.read(owner, target)

    async def document(self, owner: MemoryOwner, target: str) -> Document:
        entries = await self.store.read(owner, target)
        display = tuple(display_entry(e) for e in entries)
        return Document(target, tuple(entries), display, used_chars(entries), self.limit(target))

    # -- changing --

    async def add(self, owner: MemoryOwner, target: str, content: str, *, show_entries: bool = True) -> MemoryResult:
        content = (content or "").strip()
        problem = self._check_content(content)
        if problem:
            return problem
        label, limit = self.label(owner, target), self.limit(target)
        async with self.store.lock(owner):
            entries = await self.store.read(owner, target)
            if content in entries:
                used = used_chars(entries)
                return MemoryResult(True, f"Already remembered: that entry exists in {label} (no duplicate added). "
                                          f"Usage {usage_text(used, limit)}.", usage=usage_text(used, limit))
            new = entries + [content]
            if used_chars(new) > limit:
                return self._full(label, entries, limit, len(content), used_chars(new), show_entries)
            return await self._commit(owner, target, new, f"Added to {label}.")

    async def replace(self, owner: MemoryOwner, target: str, old_text: str, content: str, *,
                      show_entries: bool = True) -> MemoryResult:
        content = (content or "").strip()
        if not (old_text or "").strip():
            return MemoryResult(False, "Error: replace needs old_text, a short unique part of the entry to change.")
        problem = self._check_content(content, action="replace")
        if problem:
            return problem
        label, limit = self.label(owner, target), self.limit(target)
        async with self.store.lock(owner):
            entries = await self.store.read(owner, target)
            index = self._match(entries, old_text)
            if isinstance(index, _NoMatch):
                return self._with_entries(index, label, entries, limit, show_entries)
            new = list(entries)
            new[index] = content
            if content in entries and entries.index(content) != index:
                del new[index]  # the new text already exists as another entry: merge instead of duplicating
            if used_chars(new) > limit:
                return self._full(label, entries, limit, len(content), used_chars(new), show_entries)
            return await self._commit(owner, target, new, f"Replaced in {label}.")

    async def remove(self, owner: MemoryOwner, target: str, old_text: str, *,
                     show_entries: bool = True) -> MemoryResult:
        if not (old_text or "").strip():
            return MemoryResult(False, "Error: remove needs old_text, a short unique part of the entry to delete.")
        label, limit = self.label(owner, target), self.limit(target)
        async with self.store.lock(owner):
            entries = await self.store.read(owner, target)
            index = self._match(entries, old_text)
            if isinstance(index, _NoMatch):
                return self._with_entries(index, label, entries, limit, show_entries)
            new = entries[:index] + entries[index + 1:]
            return await self._commit(owner, target, new, f"Removed from {label}.")

    async def remove_at(self, owner: MemoryOwner, target: str, index: int, expected: str | None = None) -> MemoryResult:
        """Delete entry `index` (0-based). With `expected`, refuse if that slot now holds something else."""
        label, limit = self.label(owner, target), self.limit(target)
        async with self.store.lock(owner):
            entries = await self.store.read(owner, target)
            if not 0 <= index < len(entries) or (expected is not None and entries[index] != expected):
                return MemoryResult(False, "That entry no longer exists; list them again.",
                                    usage=usage_text(used_chars(entries), limit))
            new = entries[:index] + entries[index + 1:]
            return await self._commit(owner, target, new, f"Removed from {label}.")

    # -- helpers --

    def _check_content(self, content: str, action: str = "add") -> MemoryResult | None:
        if not content:
            hint = " Use remove to delete an entry." if action == "replace" else ""
            return MemoryResult(False, f"Error: content is empty; nothing was saved.{hint}")
        if any(line.strip() == SEPARATOR for line in content.splitlines()):
            return MemoryResult(False, f"Error: content must not contain a line holding only {SEPARATOR} "
                                       f"(it separates entries); save one fact per entry.")
        findings = scan_text(content, kind="memory")
        if findings:
            return MemoryResult(False, f"Error: nothing was saved. {explain(findings)}", findings=tuple(findings))
        return None

    @staticmethod
    def _match(entries: list[str], old_text: str) -> int | _NoMatch:
        """Index of the one entry `old_text` identifies: the entry equal to it, else the entry containing it.

        Blocked entries can also be named by their placeholder ("[blocked entry: exfiltration]"), since the model
        never sees their text. Identical duplicates count as one.
        """
        needle = old_text.strip()
        exact = [i for i, e in enumerate(entries) if e == needle]
        if exact:
            return exact[0]
        hits = [i for i, e in enumerate(entries) if needle in e]
        if not hits:
            hits = [i for i, e in enumerate(entries) if display_entry(e) != e and needle in display_entry(e)]
        if not hits:
            return _NoMatch(f'Error: no entry contains "{preview(needle)}".', ambiguous=False)
        if len({entries[i] for i in hits}) > 1:
            named = ", ".join(f'#{i + 1} "{preview(entries[i])}"' for i in hits[:5])
            more = f" and {len(hits) - 5} more" if len(hits) > 5 else ""
            return _NoMatch(f'Error: "{preview(needle)}" matches {len(hits)} entries: {named}{more}. '
                            f"Use a longer part of the one you mean; nothing was changed.", ambiguous=True)
        return hits[0]

    def _with_entries(self, miss: _NoMatch, label: str, entries: list[str], limit: int,
                      show_entries: bool) -> MemoryResult:
        usage = usage_text(used_chars(entries), limit)
        if miss.ambiguous or not show_entries:
            return MemoryResult(False, miss.message, usage=usage)
        return MemoryResult(False, f"{miss.message} {self._listing(label, entries, limit)}", usage=usage,
                            entries=tuple(display_entry(e) for e in entries))

    def _full(self, label: str, entries: list[str], limit: int, size: int, would_be: int,
              show_entries: bool) -> MemoryResult:
        used = used_chars(entries)
        head = (f"Error: {label} is full ({usage_text(used, limit)}); this change ({size:,} chars) would make it "
                f"{would_be:,}. Nothing was saved. Consolidate first: replace overlapping entries with one shorter "
                f"entry or remove stale ones, then retry.")
        if not show_entries:
            return MemoryResult(False, f"{head} ({len(entries)} entries; their text is private and not shown in a "
                                       f"group chat.)", usage=usage_text(used, limit))
        return MemoryResult(False, f"{head} {self._listing(label, entries, limit)}", usage=usage_text(used, limit),
                            entries=tuple(display_entry(e) for e in entries))

    @staticmethod
    def _listing(label: str, entries: list[str], limit: int) -> str:
        if not entries:
            return f"{label} is empty."
        body = ENTRY_JOIN.join(display_entry(e) for e in entries)
        return f"Current {label} entries [{usage_text(used_chars(entries), limit)}]:\n{body}"

    async def _commit(self, owner: MemoryOwner, target: str, entries: list[str], done: str) -> MemoryResult:
        limit = self.limit(target)
        try:
            await self.store.write(owner, target, entries)
        except OSError as exc:
            return MemoryResult(False, f"Error: memory could not be saved ({type(exc).__name__}); nothing was "
                                       f"changed. Try again later.")
        usage = usage_text(used_chars(entries), limit)
        return MemoryResult(True, f"{done} Usage {usage}, {len(entries)} entries. Saved; it shows in the prompt "
                                  f"from the next session. Do not repeat this call.", changed=True, usage=usage)
