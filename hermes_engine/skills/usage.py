"""Per-skill usage, kept in `<library>/.usage.json` (atomic writes, one writer at a time across processes),
and its per-day figures beside it in `<library>/.usage-days/` (`skills.usage_days`).

For each skill: how often it was viewed, in how many turns, how those turns ended (ok / error / the
person corrected the agent next), when it was last used, and the curator's status (active / stale).

It also estimates what a skill saves: the tool calls of the turns that used it, against a baseline given
when the skill appeared in the library — the most tool calls a turn without a skill made since the library
last changed (the work the skill was learned from; the background review writes a skill right after such a
turn; the skills feature tracks it and calls `set_baseline`). The learning-curve suite's method: exploring
calls minus following calls.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hermes_engine.atomic import atomic_write_text
from hermes_engine.filelock import FileLock
from hermes_engine.skills.contract import USAGE_DAYS_DIR, USAGE_FILE
from hermes_engine.skills.usage_days import DAYS_KEPT, DayFiles, DayUse, Stamp, legacy_days

log = logging.getLogger(__name__)

RECENT = 20  # outcomes kept per skill


def utcnow() -> datetime:
    return datetime.now(UTC)


def _iso(at: datetime) -> str:
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).isoformat(timespec="seconds")


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


@dataclass
class SkillUsage:
    views: int = 0
    turns: int = 0
    errors: int = 0
    corrections: int = 0
    last_used: str | None = None
    status: str = "active"  # "active" | "stale" | "archived" (the curator) | "deleted"
    status_since: str | None = None
    absorbed_into: str | None = None  # merged into this skill (a curator merge, or a delete that names it)
    recent: list[dict[str, Any]] = field(default_factory=list)  # [{"at": iso, "outcome": ok|error|correction}]
    calls: int = 0  # tool calls of the turns that used it (those whose count was recorded)
    counted: int = 0  # turns whose tool calls are in `calls`
    baseline_calls: int | None = None  # tool calls of the skill-less work it was learned from (estimate)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SkillUsage:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    @property
    def last_used_at(self) -> datetime | None:
        return parse_time(self.last_used)

    @property
    def successes(self) -> int:
        """Uses that neither errored nor drew a correction."""
        return max(0, self.turns - self.errors - self.corrections)

    @property
    def calls_per_use(self) -> float | None:
        return self.calls / self.counted if self.counted else None

    @property
    def calls_saved_per_use(self) -> float | None:
        """Baseline tool calls minus the mean calls of a turn that used the skill; None while unknown."""
        per_use = self.calls_per_use
        if per_use is None or self.baseline_calls is None:
            return None
        return self.baseline_calls - per_use

    def bad_ratio(self, window: int = 10) -> tuple[int, int]:
        """(bad, total) over the last `window` uses: turns that errored or drew a correction."""
        recent = self.recent[-window:]
        return sum(1 for r in recent if r.get("outcome") in ("error", "correction")), len(recent)


class UsageLog:
    """One library's usage file. Turns (gateway) and curator runs (CLI or scheduler) update it concurrently,
    so every update is a read-modify-write under a lock on `<file>.lock`; the day files are written under
    the same lock. An older usage file kept each skill's days inside its entry: they are read as they are and
    moved to the day files by the next write, so an upgrade loses no figures."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = FileLock(self.path.with_name(self.path.name + ".lock"))
        self.days = DayFiles(self.path.with_name(USAGE_DAYS_DIR))

    @classmethod
    def for_library(cls, root: Path | str) -> UsageLog:
        return cls(Path(root) / USAGE_FILE)

    # ------------------------------------------------------------------ io
    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"skills": {}}
        except (ValueError, OSError) as exc:
            log.warning("usage file %s is unreadable (%s); starting afresh", self.path, exc)
            return {"skills": {}}
        if not isinstance(data, dict) or not isinstance(data.get("skills"), dict):
            return {"skills": {}}
        return data

    @contextlib.contextmanager
    def _update(self) -> Iterator[dict[str, Any]]:
        with self._lock.hold():
            data = self._read()
            self._move_days(data)
            yield data
            # compact: json's C encoder (an indented dump takes the pure-Python one, several times slower)
            text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
            atomic_write_text(self.path, text)

    def _move_days(self, data: dict[str, Any]) -> None:
        """Move the days an older file keeps inside its entries to the day files (before the entries lose
        them: a crash in between counts them twice rather than not at all)."""
        moved: dict[str, dict[str, dict[str, int]]] = {}
        for name, entry in data["skills"].items():
            if isinstance(entry, dict) and "days" in entry:
                for day, figures in legacy_days(entry).items():
                    moved.setdefault(day, {})[name] = figures
                del entry["days"]
        self.days.merge(moved)

    @staticmethod
    def _entry(data: dict[str, Any], name: str) -> dict[str, Any]:
        entry = data["skills"].setdefault(name, {})
        base = asdict(SkillUsage())
        for key, value in base.items():
            entry.setdefault(key, value)
        return entry

    # ------------------------------------------------------------------ reading
    def all(self) -> dict[str, SkillUsage]:
        return self.snapshot()[0]

    def snapshot(self) -> tuple[dict[str, SkillUsage], dict[str, dict[str, DayUse]]]:
        """(each skill's usage, the per-day figures an older usage file still holds inside its entries, by day
        then skill: empty once a write has moved them to the day files)."""
        usages: dict[str, SkillUsage] = {}
        legacy: dict[str, dict[str, DayUse]] = {}
        for name, raw in self._read()["skills"].items():
            if not isinstance(raw, dict):
                continue
            usages[name] = SkillUsage.from_dict(raw)
            for day, figures in legacy_days(raw).items():
                legacy.setdefault(day, {})[name] = DayUse(**figures)
        return usages, legacy

    def day_stamps(self) -> dict[str, Stamp]:
        """Each day (UTC, "YYYY-MM-DD") with a day file, and the file's stamp: what a reader keeps to re-read
        only the days that changed."""
        return self.days.stamps()

    def read_day(self, day: str) -> dict[str, DayUse]:
        """A day file's figures by skill (without what an older usage file still holds: see `snapshot`)."""
        return self.days.read(day)

    def per_day(self, name: str | None = None) -> list[tuple[str, dict[str, DayUse]]]:
        """Every day kept, oldest first, with its figures by skill (only skill `name`'s when given; a day it
        was not used on is left out)."""
        _, legacy = self.snapshot()
        days: dict[str, dict[str, DayUse]] = {day: self.read_day(day) for day in self.day_stamps()}
        for day, skills in legacy.items():
            into = days.setdefault(day, {})
            for skill, use in skills.items():
                into[skill] = into.get(skill, DayUse()) + use
        if name is not None:
            days = {day: {name: skills[name]} for day, skills in days.items() if name in skills}
        return sorted(days.items())

    def get(self, name: str) -> SkillUsage:
        raw = self._read()["skills"].get(name)
        return SkillUsage.from_dict(raw) if isinstance(raw, dict) else SkillUsage()

    # ------------------------------------------------------------------ recording
    def record_turn(self, views: dict[str, int] | Iterable[str], *, failed: bool = False,
                    at: datetime | None = None, calls: int | None = None, tokens: int | None = None) -> None:
        """One turn used these skills (`{name: skill_view calls}`); `failed` when the turn ended in an error;
        `calls` and `tokens`: the turn's tool calls and model tokens, when known (also kept per day)."""
        counts = dict(views) if isinstance(views, dict) else {n: 1 for n in views}
        if not counts:
            return
        when = at or utcnow()
        stamp, day = _iso(when), _iso(when)[:10]
        with self._update() as data:
            for name, n in counts.items():
                entry = self._entry(data, name)
                entry["views"] += max(0, int(n))
                entry["turns"] += 1
                entry["last_used"] = stamp
                if failed:
                    entry["errors"] += 1
                if calls is not None:
                    entry["calls"] += max(0, int(calls))
                    entry["counted"] += 1
                if entry.get("status") == "stale":
                    entry["status"], entry["status_since"] = "active", stamp
                entry["recent"] = (entry["recent"] + [{"at": stamp, "outcome": "error" if failed else "ok"}])[-RECENT:]
            if calls is not None:  # only today's file is rewritten
                self.days.count(day, counts, max(0, int(calls)), None if tokens is None else max(0, int(tokens)))

    def set_baseline(self, names: Iterable[str], baseline: int) -> None:
        """New skills `names` were learned from work that took `baseline` tool calls (skills that already have
        a baseline keep it)."""
        if baseline <= 0:
            return
        with self._update() as data:
            for name in names:
                entry = self._entry(data, name)
                if entry.get("baseline_calls") is None:
                    entry["baseline_calls"] = int(baseline)

    def record_view(self, name: str, at: datetime | None = None) -> None:
        self.record_turn({name: 1}, at=at)

    def record_correction(self, names: Iterable[str], at: datetime | None = None) -> None:
        """The person's next message corrected the turn that used these skills."""
        names = list(names)
        if not names:
            return
        with self._update() as data:
            for name in names:
                entry = self._entry(data, name)
                entry["corrections"] += 1
                if entry["recent"] and entry["recent"][-1].get("outcome") == "ok":
                    entry["recent"][-1]["outcome"] = "correction"
                else:
                    corrected = {"at": _iso(at or utcnow()), "outcome": "correction"}
                    entry["recent"] = (entry["recent"] + [corrected])[-RECENT:]

    def set_status(self, name: str, status: str, at: datetime | None = None) -> None:
        with self._update() as data:
            entry = self._entry(data, name)
            if entry.get("status") != status:
                entry["status"], entry["status_since"] = status, _iso(at or utcnow())

    def annotate(self, name: str, **fields: Any) -> None:
        """Free-form notes on a skill (e.g. archived_to, absorbed_into)."""
        with self._update() as data:
            self._entry(data, name).update(fields)


def describe(name: str, usage: SkillUsage) -> str:
    """One line for /status and `hermes-gateway skills stats`."""
    last = usage.last_used_at
    saved = usage.calls_saved_per_use
    parts = [f"{usage.turns} use{'s' if usage.turns != 1 else ''}", f"{usage.successes} ok",
             f"last used {last.strftime('%Y-%m-%d %H:%M')} UTC" if last else "never used",
             f"{saved:.1f} tool calls saved per use" if saved is not None
             else "tool calls saved per use: unknown"]
    return f"{name}: " + ", ".join(parts)


def ranked(usages: dict[str, SkillUsage], names: Iterable[str] | None = None) -> list[tuple[str, SkillUsage]]:
    """Skills (all of `names`, or every one with usage) most used first, then by name; deleted ones left out."""
    chosen = sorted(set(names)) if names is not None else sorted(usages)
    rows = [(n, usages.get(n, SkillUsage())) for n in chosen]
    rows = [(n, u) for n, u in rows if u.status != "deleted"]
    return sorted(rows, key=lambda r: (-r[1].turns, r[0]))


__all__ = ["DAYS_KEPT", "DayUse", "SkillUsage", "UsageLog", "describe", "parse_time", "ranked", "utcnow"]
