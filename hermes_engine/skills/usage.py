"""Per-skill usage, kept in `<library>/.usage.json` (atomic writes, one writer at a time across processes).

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
from hermes_engine.skills.contract import USAGE_FILE

log = logging.getLogger(__name__)

RECENT = 20  # outcomes kept per skill
DAYS_KEPT = 90  # days of per-day figures kept per skill (the learning chart's span)


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
    days: dict[str, dict[str, int]] = field(default_factory=dict)  # "YYYY-MM-DD" (UTC) -> DayUse's fields

    def per_day(self) -> list[tuple[str, DayUse]]:
        """The turns that used it, by day (UTC), oldest first."""
        return sorted((day, DayUse.from_dict(v)) for day, v in self.days.items() if isinstance(v, dict))

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


@dataclass(frozen=True)
class DayUse:
    """One day's turns that used a skill: `counted` of them with their tool calls in `calls`, `tokened` with
    their tokens in `tokens` (a turn recorded before tokens were kept has calls only)."""

    counted: int = 0
    calls: int = 0
    tokened: int = 0
    tokens: int = 0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DayUse:
        get = data.get
        return cls(int(get("counted") or 0), int(get("calls") or 0), int(get("tokened") or 0),
                   int(get("tokens") or 0))

    def __add__(self, other: DayUse) -> DayUse:
        return DayUse(self.counted + other.counted, self.calls + other.calls, self.tokened + other.tokened,
                      self.tokens + other.tokens)

    @property
    def calls_per_use(self) -> float | None:
        return self.calls / self.counted if self.counted else None

    @property
    def tokens_per_use(self) -> float | None:
        return self.tokens / self.tokened if self.tokened else None


class UsageLog:
    """One library's usage file. Turns (gateway) and curator runs (CLI or scheduler) update it concurrently,
    so every update is a read-modify-write under a lock on `<file>.lock`."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = FileLock(self.path.with_name(self.path.name + ".lock"))

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
            yield data
            atomic_write_text(self.path, json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True))

    @staticmethod
    def _entry(data: dict[str, Any], name: str) -> dict[str, Any]:
        entry = data["skills"].setdefault(name, {})
        base = asdict(SkillUsage())
        for key, value in base.items():
            entry.setdefault(key, value)
        return entry

    # ------------------------------------------------------------------ reading
    def all(self) -> dict[str, SkillUsage]:
        return {name: SkillUsage.from_dict(v) for name, v in self._read()["skills"].items() if isinstance(v, dict)}

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
                    _count_day(entry, day, max(0, int(calls)), None if tokens is None else max(0, int(tokens)))
                if entry.get("status") == "stale":
                    entry["status"], entry["status_since"] = "active", stamp
                entry["recent"] = (entry["recent"] + [{"at": stamp, "outcome": "error" if failed else "ok"}])[-RECENT:]

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


def _count_day(entry: dict[str, Any], day: str, calls: int, tokens: int | None) -> None:
    days = entry.setdefault("days", {})
    if not isinstance(days, dict):
        days = entry["days"] = {}
    bucket = days.setdefault(day, {})
    bucket["counted"] = int(bucket.get("counted", 0)) + 1
    bucket["calls"] = int(bucket.get("calls", 0)) + calls
    if tokens is not None:
        bucket["tokened"] = int(bucket.get("tokened", 0)) + 1
        bucket["tokens"] = int(bucket.get("tokens", 0)) + tokens
    for old in sorted(days)[:-DAYS_KEPT]:
        del days[old]


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
