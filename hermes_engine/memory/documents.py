"""What a memory document is, whose it is, and the contract of where documents live.

A person owns two documents: MEMORY.md (notes about environment, projects, conventions) and USER.md (profile,
preferences, communication style). A group/channel/server may own a shared MEMORY.md. A document is a list
of entries; on disk they are separated by a line holding only `§`. The limits count the entries as the
prompt shows them, so the format and the counting live together here, apart from any storage or rule.
"""

from __future__ import annotations

import hashlib
import re
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

Target = Literal["memory", "user"]
TARGETS: tuple[str, ...] = ("memory", "user")
SEPARATOR = "§"
ENTRY_JOIN = f"\n{SEPARATOR}\n"
FILE_NAMES = {"memory": "MEMORY.md", "user": "USER.md"}


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


@runtime_checkable
class MemoryStore(Protocol):
    """Where memory documents live. Implementations: `FileMemoryStore`; a database backend fits the same seam.

    `write` replaces a document atomically (a reader sees the old or the new list, never a mix). `lock(owner)`
    serializes read-modify-write across tasks and processes; it is not re-entrant. Callers that change a
    document do `async with store.lock(owner): entries = await store.read(...); ...; await store.write(...)`.
    """

    async def read(self, owner: MemoryOwner, target: str) -> list[str]: ...

    async def write(self, owner: MemoryOwner, target: str, entries: list[str]) -> None: ...

    def lock(self, owner: MemoryOwner) -> AbstractAsyncContextManager[None]: ...


__all__ = [
    "ENTRY_JOIN", "FILE_NAMES", "MemoryOwner", "MemoryStore", "SEPARATOR", "TARGETS", "Target", "format_entries",
    "parse_entries", "safe_scope_name", "usage_text", "used_chars",
]
