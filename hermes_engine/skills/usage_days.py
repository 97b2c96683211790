"""A library's per-day usage figures, one small file per UTC day: `<library>/.usage-days/YYYY-MM-DD.json`,
`{skill: {counted, calls, tokened, tokens}}`.

They live apart from the usage file because a turn that used a skill then rewrites only today's file (one
entry per skill used today) rather than every skill's ninety days, and because a reader can tell by a file's
stat which days changed and re-read only those. The usage log (`skills.usage`) writes them under its own
lock; nothing else does. In a database-backed library they travel as any other file of the folder.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from hermes_engine.atomic import atomic_write_text, in_flight
from hermes_engine.confine import is_real_dir, own_dir

log = logging.getLogger(__name__)

DAYS_KEPT = 90  # days of per-day figures kept (the learning chart's span)
_DAY_FILE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.json$")

Stamp = tuple[int, int, int]  # (inode, mtime_ns, size): a file rewritten by `atomic_write` gets a new inode


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


def _figures(raw: Any) -> dict[str, int] | None:
    if not isinstance(raw, dict):
        return None
    try:
        return {k: int(raw.get(k) or 0) for k in ("counted", "calls", "tokened", "tokens")}
    except (TypeError, ValueError):
        return None


class DayFiles:
    """The folder of day files. Reading takes no lock (each file is replaced atomically); writing is the
    usage log's, under its lock."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, day: str) -> Path:
        return self.folder / f"{day}.json"

    # ------------------------------------------------------------------ reading
    def stamps(self) -> dict[str, Stamp]:
        """Each day that has a file, with the file's stamp."""
        if not is_real_dir(self.folder):
            return {}
        found: dict[str, Stamp] = {}
        with os.scandir(self.folder) as entries:
            for entry in entries:
                match = _DAY_FILE.match(entry.name)
                if match is None or in_flight(entry.name) or not entry.is_file(follow_symlinks=False):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                found[match.group(1)] = (st.st_ino, st.st_mtime_ns, st.st_size)
        return found

    def read_raw(self, day: str) -> dict[str, dict[str, int]]:
        path = self.path(day)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (ValueError, OSError) as exc:
            log.warning("usage day file %s is unreadable (%s); taken as empty", path, exc)
            return {}
        if not isinstance(data, dict):
            return {}
        found: dict[str, dict[str, int]] = {}
        for name, raw in data.items():
            figures = _figures(raw)
            if figures is not None:
                found[str(name)] = figures
        return found

    def read(self, day: str) -> dict[str, DayUse]:
        """The day's figures by skill."""
        return {name: DayUse(**figures) for name, figures in self.read_raw(day).items()}

    # ------------------------------------------------------------------ writing (under the usage lock)
    def _write(self, day: str, data: dict[str, dict[str, int]]) -> None:
        own_dir(self.folder.parent, self.folder.name, error=OSError)
        atomic_write_text(self.path(day), json.dumps(data, ensure_ascii=False, sort_keys=True,
                                                     separators=(",", ":")))

    def count(self, day: str, names: Iterable[str], calls: int, tokens: int | None) -> None:
        """One turn of `day` used these skills and made `calls` tool calls (and `tokens` tokens, when known)."""
        fresh = not self.path(day).exists()
        data = self.read_raw(day)
        for name in names:
            bucket = data.setdefault(name, {"counted": 0, "calls": 0, "tokened": 0, "tokens": 0})
            bucket["counted"] += 1
            bucket["calls"] += calls
            if tokens is not None:
                bucket["tokened"] += 1
                bucket["tokens"] += tokens
        self._write(day, data)
        if fresh:  # a new day begins: the oldest may have passed out of the span
            self.prune(day)

    def merge(self, figures: dict[str, dict[str, dict[str, int]]]) -> None:
        """Add `{day: {skill: figures}}` (the days an older usage file kept inside its entries) to the files."""
        for day, skills in sorted(figures.items()):
            data = self.read_raw(day)
            for name, raw in skills.items():
                bucket = data.setdefault(name, {"counted": 0, "calls": 0, "tokened": 0, "tokens": 0})
                for key, value in raw.items():
                    bucket[key] += value
            self._write(day, data)
        if figures:
            self.prune(max(figures))

    def prune(self, newest: str) -> None:
        """Delete the files of days more than `DAYS_KEPT` days before `newest` ("YYYY-MM-DD")."""
        try:
            cutoff = (date.fromisoformat(newest) - timedelta(days=DAYS_KEPT - 1)).isoformat()
        except ValueError:
            return
        for day in self.stamps():
            if day < cutoff:
                with contextlib.suppress(FileNotFoundError):
                    self.path(day).unlink()


def legacy_days(entry: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The per-day figures an entry of an older usage file carried inside it (`"days"`), valid ones only."""
    raw = entry.get("days")
    if not isinstance(raw, dict):
        return {}
    found: dict[str, dict[str, int]] = {}
    for day, value in raw.items():
        figures = _figures(value)
        if figures is not None and isinstance(day, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", day):
            found[day] = figures
    return found


__all__ = ["DAYS_KEPT", "DayFiles", "DayUse", "Stamp", "legacy_days"]
