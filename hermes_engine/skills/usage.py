"""Per-skill usage, kept in `<library>/.usage.json` (atomic writes, one writer at a time across processes).

For each skill: how often it was viewed, in how many turns, how those turns ended (ok / error / the
person corrected the agent next), when it was last used, and the curator's status (active / stale).
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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SkillUsage:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    @property
    def last_used_at(self) -> datetime | None:
        return parse_time(self.last_used)

    def bad_ratio(self, window: int = 10) -> tuple[int, int]:
        """(bad, total) over the last `window` uses: turns that errored or drew a correction."""
        recent = self.recent[-window:]
        return sum(1 for r in recent if r.get("outcome") in ("error", "correction")), len(recent)


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
                    at: datetime | None = None) -> None:
        """One turn used these skills (`{name: skill_view calls}`); `failed` when the turn ended in an error."""
        counts = dict(views) if isinstance(views, dict) else {n: 1 for n in views}
        if not counts:
            return
        stamp = _iso(at or utcnow())
        with self._update() as data:
            for name, n in counts.items():
                entry = self._entry(data, name)
                entry["views"] += max(0, int(n))
                entry["turns"] += 1
                entry["last_used"] = stamp
                if failed:
                    entry["errors"] += 1
                if entry.get("status") == "stale":
                    entry["status"], entry["status_since"] = "active", stamp
                entry["recent"] = (entry["recent"] + [{"at": stamp, "outcome": "error" if failed else "ok"}])[-RECENT:]

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


__all__ = ["SkillUsage", "UsageLog", "parse_time", "utcnow"]
