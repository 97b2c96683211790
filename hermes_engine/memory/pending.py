"""Changes the background review may propose but not make: the review is a guest in a person's memory.

The review runs with no one watching, so it may add entries, but rewriting or removing what is already there
(often something the person said or wrote by hand) waits for the person: the change is checked as if it were
applied (matching, limits, scan), recorded with the full text of each entry it names, and shown by
`/memory pending`; `/memory apply N` makes it, `/memory drop N` discards it. Applying names each entry by the
text it had when proposed, so a proposal never lands on an entry that changed since.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hermes_engine.memory.book import LABELS, Change, MemoryBook, MemoryResult, preview, unreadable_result
from hermes_engine.memory.documents import MemoryOwner, UnreadableDocument
from hermes_engine.policy.security import ORDINARY, ScanMode
from hermes_engine.ports.storage import PeopleStore

MAX_PENDING = 20
ORIGIN = "background review"


@dataclass(frozen=True)
class Proposal:
    target: str
    changes: tuple[Change, ...]
    named: tuple[str, ...]  # per change: the full entry it names when proposed ("" for add)
    created_at: float
    origin: str = ORIGIN

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "changes": [c.to_dict() for c in self.changes], "named": list(self.named),
                "created_at": self.created_at, "origin": self.origin}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Proposal:
        changes = tuple(Change.from_dict(c) for c in data.get("changes") or () if isinstance(c, dict))
        named = tuple(str(n) for n in data.get("named") or ())
        return cls(str(data.get("target") or "memory"), changes, named, float(data.get("created_at") or 0),
                   str(data.get("origin") or ORIGIN))

    def describe(self) -> str:
        """One line per change, for the person."""
        lines = []
        for change, entry in zip(self.changes, self.named, strict=False):
            if change.action == "add":
                lines.append(f'add "{preview(change.content)}"')
            elif change.action == "remove":
                lines.append(f'remove "{preview(entry)}"')
            else:
                lines.append(f'rewrite "{preview(entry)}" as "{preview(change.content)}"')
        return f"{LABELS.get(self.target, self.target)}: " + "; ".join(lines)


class PendingChanges:
    """Staging, listing, applying and dropping proposals, over the book's store (kept beside the documents).

    With `people` (the gateway's store, set when the memory feature starts) a review also saves nothing for a
    person who no longer exists: a review still running when its person was forgotten must not bring their
    memory back."""

    def __init__(self, book: MemoryBook, clock: Callable[[], float] = time.time,
                 people: PeopleStore | None = None) -> None:
        self.book = book
        self.clock = clock
        self.people = people

    async def person_gone(self, person_id: int) -> bool:
        return self.people is not None and await self.people.get_person(person_id) is None

    async def stage(self, owner: MemoryOwner, target: str, changes: list[Change], *,
                    show_entries: bool = True, scan_mode: ScanMode = ORDINARY) -> MemoryResult:
        """Check the changes as the reviewer asked them scanned, then keep them for the person; applying them
        later is the person's own write, scanned ordinarily."""
        named = await self.book.check(owner, target, changes, show_entries=show_entries, scan_mode=scan_mode)
        if isinstance(named, MemoryResult):
            return named  # would fail anyway: tell the reviewer now, stage nothing
        proposal = Proposal(target, tuple(changes), tuple(named), self.clock())

        def add(items: list[Proposal]) -> str | None:
            if len(items) >= MAX_PENDING:
                return (f"Error: {MAX_PENDING} proposed changes already wait for the person; nothing was staged. "
                        f"Only add new entries for now.")
            items.append(proposal)
            return None

        refused = await self._update(owner, add)
        if isinstance(refused, MemoryResult):
            return refused
        if refused:
            return MemoryResult(False, refused)
        return MemoryResult(True, "Staged for the person: in a background review, rewriting or removing existing "
                                  "entries waits for their approval (they see it with /memory pending). Nothing was "
                                  "changed now; do not repeat this call.")

    async def waiting(self, owner: MemoryOwner) -> list[Proposal]:
        return [Proposal.from_dict(item) for item in await self.book.store.read_pending(owner)]

    async def apply(self, owner: MemoryOwner, number: int) -> MemoryResult:
        proposal = await self._get(owner, number)
        if isinstance(proposal, MemoryResult):
            return proposal
        pairs = zip(proposal.changes, proposal.named, strict=False)
        exact = [Change(c.action, c.content, entry or c.old_text) for c, entry in pairs]
        still = await self.book.check(owner, proposal.target, exact)
        result = await self.book.apply(owner, proposal.target, exact) if still == list(proposal.named) else None
        if result is None or not result.ok:
            return MemoryResult(False, f"Change {number} could not be applied; memory has changed since it was "
                                       f"proposed. `/memory drop {number}` discards it.")
        await self._update(owner, lambda items: _discard(items, proposal))
        return MemoryResult(True, f"Applied change {number} ({proposal.describe()}). Now {result.usage}.",
                            changed=True, usage=result.usage)

    async def drop(self, owner: MemoryOwner, number: int) -> MemoryResult:
        proposal = await self._get(owner, number)
        if isinstance(proposal, MemoryResult):
            return proposal
        await self._update(owner, lambda items: _discard(items, proposal))
        return MemoryResult(True, f"Dropped change {number} ({proposal.describe()}); memory is as it was.")

    async def _get(self, owner: MemoryOwner, number: int) -> Proposal | MemoryResult:
        try:
            items = await self.waiting(owner)
        except UnreadableDocument as exc:
            return unreadable_result("the list of proposed changes", exc.reason)
        if not 1 <= number <= len(items):
            return MemoryResult(False, f"There is no proposed change {number}; send /memory pending to see them.")
        return items[number - 1]

    async def _update(self, owner: MemoryOwner,
                      change: Callable[[list[Proposal]], str | None]) -> str | MemoryResult | None:
        try:
            async with self.book.store.lock(owner):
                items = [Proposal.from_dict(item) for item in await self.book.store.read_pending(owner)]
                outcome = change(items)
                await self.book.store.write_pending(owner, [p.to_dict() for p in items])
                return outcome
        except UnreadableDocument as exc:
            return unreadable_result("the list of proposed changes", exc.reason)
        except OSError as exc:
            return MemoryResult(False, f"Error: the proposal could not be saved ({exc.strerror or exc}); nothing "
                                       f"was changed.")


def _discard(items: list[Proposal], proposal: Proposal) -> None:
    if proposal in items:
        items.remove(proposal)


__all__ = ["MAX_PENDING", "PendingChanges", "Proposal"]
