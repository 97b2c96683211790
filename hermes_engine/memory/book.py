"""The rules of memory: limits, duplicates, unique matching and the security scan, over any `MemoryStore`.

The `memory` tool, the prompt contributor and the `/memory` command all change documents through
`MemoryBook`, so one set of rules holds wherever a change comes from; every change is a read-modify-write
inside `store.lock(owner)`. A call is a list of `Change`s applied all or nothing: one `add`, `replace` or
`remove` is a list of one, the tool's `operations` form a longer one. The caller says how strictly its new
text is scanned (`scan_mode`): the tool strictly when its turn read untrusted content, a person's command
ordinarily. Messages are written for the model:
they say what happened and what to do next, never echo an entry that fails the scan, and a `replace` says
what it overwrote, so no text leaves a document unseen.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hermes_engine.config import MemorySettings
from hermes_engine.memory.documents import (
    ENTRY_JOIN,
    SEPARATOR,
    MemoryOwner,
    MemoryStore,
    UnreadableDocument,
    usage_text,
    used_chars,
)
from hermes_engine.policy.security import ORDINARY, Finding, ScanMode, explain, scan_on_load, scan_text

log = logging.getLogger(__name__)

LABELS = {"memory": "MEMORY.md", "user": "USER.md"}
ACTIONS = ("add", "replace", "remove")
_PREVIEW_CHARS = 60
_PRIVATE = "its text is private and not shown in a group chat"


def blocked_placeholder(findings: Iterable[Finding | str]) -> str:
    """`[blocked entry: <rule>, …]` for findings (or rule names)."""
    rules = dict.fromkeys(f if isinstance(f, str) else f.rule for f in findings)
    return f"[blocked entry: {', '.join(rules)}]"


def display_entry(entry: str) -> str:
    """An entry as it may be shown to a model: its text, or a placeholder when it fails the scan on load."""
    return scan_on_load(entry, kind="memory")


def preview(entry: str, width: int = _PREVIEW_CHARS) -> str:
    text = " ".join(display_entry(entry).split())
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class Change:
    """One operation: add `content`; replace the entry `old_text` names with `content`; remove that entry."""

    action: str
    content: str = ""
    old_text: str = ""

    @classmethod
    def of(cls, action: str, content: str | None = None, old_text: str | None = None) -> Change:
        return cls(str(action or ""), (content or "").strip(), (old_text or "").strip())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Change:
        """An item of the tool's `operations` list (`new_text` is taken for `content`, as the patch tool says)."""
        return cls.of(data.get("action") or "", data.get("content") or data.get("new_text"), data.get("old_text"))

    def to_dict(self) -> dict[str, str]:
        return {"action": self.action, "content": self.content, "old_text": self.old_text}


@dataclass(frozen=True)
class MemoryResult:
    """Outcome of one change. `str(result)` is the text for the model."""

    ok: bool
    message: str
    changed: bool = False
    usage: str = ""
    entries: tuple[str, ...] = field(default=(), repr=False)  # display form (blocked entries as placeholders)
    findings: tuple[Finding, ...] = ()
    replaced: tuple[str, ...] = field(default=(), repr=False)  # raw text of each entry a replace overwrote
    listing: str = field(default="", repr=False)  # the current entries, which end `message` after a failure

    def __str__(self) -> str:
        return self.message

    @property
    def without_listing(self) -> str:
        return self.message.removesuffix(" " + self.listing) if self.listing else self.message


@dataclass(frozen=True)
class _NoMatch:
    message: str
    ambiguous: bool


@dataclass
class _Plan:
    """The entries after a list of changes, and what the changes took out."""

    entries: list[str]
    matched: list[str] = field(default_factory=list)  # per change: the entry it named ("" for add)
    replaced: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    added: int = 0
    already: int = 0


@dataclass(frozen=True)
class Document:
    """A document as the prompt and `/memory` show it."""

    target: str
    entries: tuple[str, ...]  # raw text
    display: tuple[str, ...]  # blocked entries replaced by placeholders
    used: int
    limit: int
    unreadable: str | None = None  # why the file cannot be read (it is then shown as unreadable, never empty)

    @property
    def usage(self) -> str:
        return usage_text(self.used, self.limit)


class MemoryBook:
    """Add / replace / remove (alone or as a batch) with limits, duplicate and match rules, and the scan.

    `show_entries=False` on a call keeps entry text out of messages (used when the model works in a
    multi-speaker session, where a person's private notes must not be echoed). `scan_mode` is how the new
    text of a call is scanned (`security.ScanMode`).
    """

    def __init__(self, store: MemoryStore, limits: MemorySettings | None = None) -> None:
        self.store = store
        self.limits = limits or MemorySettings()
        self._warned: set[tuple[MemoryOwner, str, int]] = set()

    def limit(self, target: str) -> int:
        return self.limits.user_chars if target == "user" else self.limits.memory_chars

    @staticmethod
    def label(owner: MemoryOwner, target: str) -> str:
        return f"shared {LABELS[target]}" if owner.is_shared else LABELS[target]

    # -- reading --

    async def entries(self, owner: MemoryOwner, target: str) -> list[str]:
        """The entries, or none when the document cannot be read (callers that copy or count entries skip it;
        the file itself is left alone)."""
        try:
            return await self.store.read(owner, target)
        except UnreadableDocument as exc:
            log.warning("%s of %s cannot be read and was skipped: %s", LABELS[target], owner, exc.reason)
            return []

    async def document(self, owner: MemoryOwner, target: str) -> Document:
        limit = self.limit(target)
        try:
            entries = await self.store.read(owner, target)
        except UnreadableDocument as exc:
            log.warning("%s of %s cannot be read: %s", LABELS[target], owner, exc.reason)
            return Document(target, (), (), 0, limit, unreadable=exc.reason)
        used = used_chars(entries)
        if used > limit and (owner, target, used) not in self._warned:
            self._warned.add((owner, target, used))
            log.warning("%s of %s is over its limit (%s); it loads whole and the agent is asked to consolidate it",
                        LABELS[target], owner, usage_text(used, limit))
        display = tuple(display_entry(e) for e in entries)
        return Document(target, tuple(entries), display, used, limit)

    # -- changing --

    async def add(self, owner: MemoryOwner, target: str, content: str, *, show_entries: bool = True,
                  scan_mode: ScanMode = ORDINARY) -> MemoryResult:
        return await self.apply(owner, target, [Change.of("add", content)], show_entries=show_entries,
                                scan_mode=scan_mode)

    async def replace(self, owner: MemoryOwner, target: str, old_text: str, content: str, *,
                      show_entries: bool = True, scan_mode: ScanMode = ORDINARY) -> MemoryResult:
        return await self.apply(owner, target, [Change.of("replace", content, old_text)], show_entries=show_entries,
                                scan_mode=scan_mode)

    async def remove(self, owner: MemoryOwner, target: str, old_text: str, *,
                     show_entries: bool = True) -> MemoryResult:
        return await self.apply(owner, target, [Change.of("remove", None, old_text)], show_entries=show_entries)

    async def apply(self, owner: MemoryOwner, target: str, changes: list[Change], *,
                    show_entries: bool = True, scan_mode: ScanMode = ORDINARY) -> MemoryResult:
        """Apply every change in order, or none: one scan for all of them, and only the final document has to
        fit the limit (so a batch can consolidate a full document)."""
        problem = self.check_changes(changes, scan_mode)
        if problem:
            return problem
        label = self.label(owner, target)

        async def work() -> MemoryResult:
            entries = await self.store.read(owner, target)
            plan = self._plan(entries, changes, label, self.limit(target), show_entries)
            if isinstance(plan, MemoryResult):
                return plan
            if plan.entries == entries:
                usage = usage_text(used_chars(entries), self.limit(target))
                return MemoryResult(True, f"Already remembered: that entry exists in {label} (no duplicate added). "
                                          f"Usage {usage}.", usage=usage)
            result = await self._commit(owner, target, plan.entries, self._done(label, changes, plan, show_entries))
            return MemoryResult(result.ok, result.message, result.changed, result.usage, replaced=tuple(plan.replaced))

        return await self._locked(owner, label, work)

    async def check(self, owner: MemoryOwner, target: str, changes: list[Change], *,
                    show_entries: bool = True, scan_mode: ScanMode = ORDINARY) -> MemoryResult | list[str]:
        """What `apply` would refuse, without writing; else, per change, the entry it names ("" for add)."""
        problem = self.check_changes(changes, scan_mode)
        if problem:
            return problem
        label = self.label(owner, target)
        try:
            entries = await self.store.read(owner, target)
        except UnreadableDocument as exc:
            return unreadable_result(label, exc.reason)
        plan = self._plan(entries, changes, label, self.limit(target), show_entries)
        return plan if isinstance(plan, MemoryResult) else plan.matched

    async def remove_at(self, owner: MemoryOwner, target: str, index: int, expected: str | None = None) -> MemoryResult:
        """Delete entry `index` (0-based). With `expected`, refuse if that slot now holds something else."""
        label, limit = self.label(owner, target), self.limit(target)

        async def work() -> MemoryResult:
            entries = await self.store.read(owner, target)
            if not 0 <= index < len(entries) or (expected is not None and entries[index] != expected):
                return MemoryResult(False, "That entry no longer exists; list them again.",
                                    usage=usage_text(used_chars(entries), limit))
            return await self._commit(owner, target, entries[:index] + entries[index + 1:], f"Removed from {label}.")

        return await self._locked(owner, label, work)

    # -- helpers --

    async def _locked(self, owner: MemoryOwner, label: str,
                      work: Callable[[], Awaitable[MemoryResult]]) -> MemoryResult:
        """Run a read-modify-write under the owner's lock; a document or lock that cannot be used is a clear
        refusal, never an exception out of a turn or a command."""
        try:
            async with self.store.lock(owner):
                return await work()
        except UnreadableDocument as exc:
            return unreadable_result(label, exc.reason)
        except OSError as exc:  # the lock file: refused (a planted symlink) or not creatable
            return MemoryResult(False, f"Error: {label} could not be locked for writing "
                                       f"({exc.strerror or type(exc).__name__}); nothing was changed.")

    @staticmethod
    def check_changes(changes: list[Change], scan_mode: ScanMode = ORDINARY) -> MemoryResult | None:
        """Refuse malformed changes and scan every new text once, before anything is read or written."""
        if not changes:
            return MemoryResult(False, "Error: no operations were given; nothing was changed.")
        for n, change in enumerate(changes, 1):
            where = f"operation {n}: " if len(changes) > 1 else ""
            if change.action not in ACTIONS:
                return MemoryResult(False, f"Error: {where}unknown action {change.action!r}; use add, replace or "
                                           f"remove. Nothing was changed.")
            if change.action != "add" and not change.old_text:
                verb = "change" if change.action == "replace" else "delete"
                return MemoryResult(False, f"Error: {where}{change.action} needs old_text, a short unique part of "
                                           f"the entry to {verb}.")
            if change.action == "remove":
                continue
            if not change.content:
                hint = " Use remove to delete an entry." if change.action == "replace" else ""
                return MemoryResult(False, f"Error: {where}content is empty; nothing was saved.{hint}")
            if any(line.strip() == SEPARATOR for line in change.content.splitlines()):
                return MemoryResult(False, f"Error: {where}content must not contain a line holding only "
                                           f"{SEPARATOR} (it separates entries); save one fact per entry.")
        texts = [c.content for c in changes if c.action != "remove"]
        findings = scan_text("\n\n".join(texts), kind="memory", mode=scan_mode) if texts else []
        if findings:
            return MemoryResult(False, f"Error: nothing was saved. {explain(findings)}", findings=tuple(findings))
        return None

    def _plan(self, entries: list[str], changes: list[Change], label: str, limit: int,
              show_entries: bool) -> _Plan | MemoryResult:
        plan = _Plan(list(entries))
        working = plan.entries
        for n, change in enumerate(changes, 1):
            if change.action == "add":
                plan.matched.append("")
                if change.content in working:
                    plan.already += 1
                else:
                    working.append(change.content)
                    plan.added += 1
                continue
            index = self._match(working, change.old_text)
            if isinstance(index, _NoMatch):
                where = f"operation {n}: " if len(changes) > 1 else ""
                return self._with_entries(index, where, label, working, limit, show_entries)
            old = working[index]
            plan.matched.append(old)
            if change.action == "remove":
                del working[index]
                plan.removed.append(old)
                continue
            plan.replaced.append(old)
            if change.content in working and working.index(change.content) != index:
                del working[index]  # the new text already exists as another entry: merge instead of duplicating
            else:
                working[index] = change.content
        used, before = used_chars(working), used_chars(entries)
        if used > limit and used > before:  # a document already over (hand-edited) may still shrink
            size = sum(len(c.content) for c in changes)
            return self._full(label, entries, limit, size, used, show_entries)
        return plan

    @staticmethod
    def _done(label: str, changes: list[Change], plan: _Plan, show_entries: bool) -> str:
        was = "; ".join(f'"{display_entry(e)}"' for e in plan.replaced) if show_entries else f"({_PRIVATE})"
        if len(changes) == 1:
            action = changes[0].action
            if action == "replace":
                return f"Replaced in {label}. The entry it overwrote was: {was}."
            return f"Added to {label}." if action == "add" else f"Removed from {label}."
        counts = [f"{plan.added} added", f"{len(plan.replaced)} replaced", f"{len(plan.removed)} removed"]
        if plan.already:
            counts.append(f"{plan.already} already there")
        text = f"Applied {len(changes)} operations to {label} ({', '.join(counts)})."
        return f"{text} Overwritten entries were: {was}." if plan.replaced else text

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
            return _NoMatch(f'no entry contains "{preview(needle)}".', ambiguous=False)
        if len({entries[i] for i in hits}) > 1:
            named = ", ".join(f'#{i + 1} "{preview(entries[i])}"' for i in hits[:5])
            more = f" and {len(hits) - 5} more" if len(hits) > 5 else ""
            return _NoMatch(f'"{preview(needle)}" matches {len(hits)} entries: {named}{more}. '
                            f"Use a longer part of the one you mean; nothing was changed.", ambiguous=True)
        return hits[0]

    def _with_entries(self, miss: _NoMatch, where: str, label: str, entries: list[str], limit: int,
                      show_entries: bool) -> MemoryResult:
        usage = usage_text(used_chars(entries), limit)
        message = f"Error: {where}{miss.message}" + (" Nothing was changed." if where and not miss.ambiguous else "")
        if miss.ambiguous or not show_entries:
            return MemoryResult(False, message, usage=usage)
        listing = self._listing(label, entries, limit)
        return MemoryResult(False, f"{message} {listing}", usage=usage,
                            entries=tuple(display_entry(e) for e in entries), listing=listing)

    def _full(self, label: str, entries: list[str], limit: int, size: int, would_be: int,
              show_entries: bool) -> MemoryResult:
        used = used_chars(entries)
        head = (f"Error: {label} is full ({usage_text(used, limit)}); this change ({size:,} chars) would make it "
                f"{would_be:,}. Nothing was saved. Consolidate first: replace overlapping entries with one shorter "
                f"entry or remove stale ones (one call with operations does both at once), then retry.")
        if not show_entries:
            return MemoryResult(False, f"{head} ({len(entries)} entries; {_PRIVATE}.)", usage=usage_text(used, limit))
        listing = self._listing(label, entries, limit)
        return MemoryResult(False, f"{head} {listing}", usage=usage_text(used, limit),
                            entries=tuple(display_entry(e) for e in entries), listing=listing)

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


def unreadable_result(label: str, reason: str) -> MemoryResult:
    return MemoryResult(False, f"Error: {label} cannot be read: {reason}. Nothing was changed; the file stays as it "
                               f"is until the person fixes it (it must be UTF-8 text) or deletes it.")


__all__ = ["ACTIONS", "Change", "Document", "LABELS", "MemoryBook", "MemoryResult", "blocked_placeholder",
           "display_entry", "preview", "unreadable_result"]
