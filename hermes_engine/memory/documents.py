"""What a memory document is, whose it is, and the contract of where documents live.

A person owns two documents: MEMORY.md (notes about environment, projects, conventions) and USER.md (profile,
preferences, communication style). A group/channel/server may own a shared MEMORY.md. A document is a list
of entries; on disk every entry is followed by a line holding only `§`. Ending each entry (rather than only
separating them) is what keeps hand-written text safe: text a person appends after the last `§` line, without
a `§` of its own, reads as an entry of its own, so a later change to the entry above it cannot take it along.
The limits count the entries as the prompt shows them, so the format and the counting live together here,
apart from any storage or rule.
"""

from __future__ import annotations

import hashlib
import json
import re
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

Target = Literal["memory", "user"]
TARGETS: tuple[str, ...] = ("memory", "user")
SEPARATOR = "§"
ENTRY_JOIN = f"\n{SEPARATOR}\n"
FILE_NAMES = {"memory": "MEMORY.md", "user": "USER.md"}
PENDING_FILE = "PENDING.json"


@dataclass(frozen=True, order=True)
class MemoryOwner:
    """Whose documents: a person (`MemoryOwner.person(42)`) or a shared scope (`MemoryOwner.shared(key)`)."""

    kind: Literal["person", "shared"]
    key: str

    @classmethod
    def person(cls, person_id: int) -> MemoryOwner:
        if isinstance(person_id, bool) or not isinstance(person_id, int):
            raise TypeError(f"person_id must be an int, not {type(person_id).__name__}")
        return cls("person", str(person_id))

    @classmethod
    def shared(cls, scope: str) -> MemoryOwner:
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
    """Split a document into entries at lines holding only `§`; blank entries are dropped and an entry that
    repeats an earlier one collapses into it (duplicates only cost prompt space)."""
    entries: list[str] = []
    current: list[str] = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line.strip() == SEPARATOR:
            entries.append("\n".join(current).strip())
            current = []
        else:
            current.append(line)
    entries.append("\n".join(current).strip())
    return list(dict.fromkeys(e for e in entries if e))


def format_entries(entries: list[str]) -> str:
    """The file text: each entry followed by a `§` line (see the module docstring for why)."""
    return "".join(f"{entry}\n{SEPARATOR}\n" for entry in entries)


class UnreadableDocument(Exception):
    """A document exists but cannot be read as text (not UTF-8, or the read failed). It is neither empty nor
    rewritable: showing it as empty would hide it, and rewriting it from nothing would destroy it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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


def owner_folder(owner: MemoryOwner) -> str:
    """Where an owner's documents live, relative to the memories folder: `<person_id>` or
    `shared/<safe scope name>`. The database backend keys documents by the same path, so a file home moves
    into it one file at a time."""
    if owner.is_shared:
        return f"shared/{safe_scope_name(owner.key)}"
    if not owner.key.isdigit():
        raise ValueError(f"person key must be a non-negative integer id, not {owner.key!r}")
    return owner.key


def check_target(owner: MemoryOwner, target: str) -> None:
    if target not in owner.targets():
        raise ValueError(f"{owner} has no {target!r} document (choose from {', '.join(owner.targets())})")


def pending_items(text: str, what: str) -> list[dict[str, Any]]:
    """The proposals a PENDING.json text holds (anything that is not a list of objects is dropped)."""
    try:
        items = json.loads(text) if text.strip() else []
    except ValueError:
        raise UnreadableDocument(f"{what} is not valid JSON") from None
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def pending_text(items: list[dict[str, Any]]) -> str:
    return json.dumps(items, ensure_ascii=False, indent=1) + "\n"


@runtime_checkable
class MemoryStore(Protocol):
    """Where memory documents live. Implementations: `FileMemoryStore` and `DatabaseMemoryStore`.

    `write` replaces a document atomically (a reader sees the old or the new list, never a mix). `lock(owner)`
    serializes read-modify-write across tasks and processes; it is not re-entrant. Callers that change a
    document do `async with store.lock(owner): entries = await store.read(...); ...; await store.write(...)`.
    """

    async def read(self, owner: MemoryOwner, target: str) -> list[str]:
        """The document's entries; raises `UnreadableDocument` when it exists but cannot be read."""

    async def write(self, owner: MemoryOwner, target: str, entries: list[str]) -> None: ...

    def lock(self, owner: MemoryOwner) -> AbstractAsyncContextManager[None]: ...

    async def read_pending(self, owner: MemoryOwner) -> list[dict[str, Any]]:
        """Changes proposed for the owner's approval (see `hermes_engine.memory.pending`), oldest first."""

    async def write_pending(self, owner: MemoryOwner, items: list[dict[str, Any]]) -> None: ...

    async def erase(self, owner: MemoryOwner) -> bool:
        """Delete everything kept for `owner` (documents, proposals, its folder); False if there was nothing."""


__all__ = [
    "ENTRY_JOIN", "FILE_NAMES", "MemoryOwner", "MemoryStore", "PENDING_FILE", "SEPARATOR", "TARGETS", "Target",
    "UnreadableDocument", "check_target", "format_entries", "owner_folder", "parse_entries", "pending_items",
    "pending_text", "safe_scope_name", "usage_text", "used_chars",
]
