"""The rules of memory: limits, duplicates, unique matching and the security scan, over any `MemoryStore`.

The `memory` tool, the prompt contributor and the `/memory` command all change documents through
`MemoryBook`, so one set of rules holds wherever a change comes from; every change is a read-modify-write
inside `store.lock(owner)`. Messages are written for the model: they say what happened and what to do next,
and never echo an entry that fails the scan.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from hermes_engine.config import MemorySettings
from hermes_engine.memory.documents import ENTRY_JOIN, SEPARATOR, MemoryOwner, MemoryStore, usage_text, used_chars
from hermes_engine.policy.security import Finding, explain, scan_on_load, scan_text

LABELS = {"memory": "MEMORY.md", "user": "USER.md"}
_PREVIEW_CHARS = 60


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


__all__ = ["Document", "LABELS", "MemoryBook", "MemoryResult", "blocked_placeholder", "display_entry", "preview"]
