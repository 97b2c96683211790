"""A bot's skills and their usage as the Skills and Learning pages read them: through the `SkillsFeature`'s
own library and usage log, read again only when they changed (the library's revision, the usage file's
stamp, each day file's stamp), since parsing a library of hundreds of skills and ninety days of their use on
every page view would take longer than the page may. A turn rewrites the usage file and today's day file
only, so the other days stay read, and what a page computed from them stays computed."""

from __future__ import annotations

import asyncio
import os
import weakref
from dataclasses import dataclass, field
from typing import Any

from hermes_engine.skills.feature import SkillsFeature
from hermes_engine.skills.model import Skill
from hermes_engine.skills.usage import DayUse, SkillUsage, UsageLog

DayStamp = tuple[Any, ...]  # the day file's stamp, and the usage file's while that still holds some of the day


@dataclass(frozen=True, eq=False)
class Day:
    """One day's figures by skill; `derived`: what a page computed from them, kept while the day is unchanged."""

    stamp: DayStamp
    uses: dict[str, DayUse]
    derived: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Read:
    skills: dict[str, Skill]  # by name, in the library's order (category, name)
    usages: dict[str, SkillUsage]
    days: dict[str, Day]  # by day (UTC, "YYYY-MM-DD"), oldest first
    derived: dict[str, Any]  # what a page computed from skills and usages, kept until either changes
    lasting: dict[str, Any]  # what a page keeps across changes, to tell for itself what is still the same


@dataclass
class _Kept:
    revision: str | None = None
    skills: dict[str, Skill] | None = None
    stamp: tuple[int, int, int] | None = None
    usages: dict[str, SkillUsage] | None = None
    legacy: dict[str, dict[str, DayUse]] = field(default_factory=dict)
    days: dict[str, Day] = field(default_factory=dict)
    derived: dict[str, Any] = field(default_factory=dict)
    lasting: dict[str, Any] = field(default_factory=dict)


_kept: weakref.WeakKeyDictionary[SkillsFeature, dict[str, _Kept]] = weakref.WeakKeyDictionary()


def _stamp(path: os.PathLike[str]) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _read_days(log: UsageLog, days: list[str]) -> dict[str, dict[str, DayUse]]:
    return {day: log.read_day(day) for day in days}


async def _days(kept: _Kept, log: UsageLog) -> bool:
    """Bring the kept days up to the day files (and the usage file's leftovers); whether any changed."""
    files = await asyncio.to_thread(log.day_stamps)
    wanted: dict[str, DayStamp] = {day: (files.get(day), kept.stamp if day in kept.legacy else None)
                                   for day in files.keys() | kept.legacy.keys()}
    stale = [day for day, stamp in wanted.items() if day not in kept.days or kept.days[day].stamp != stamp]
    if not stale and len(wanted) == len(kept.days):
        return False
    read = await asyncio.to_thread(_read_days, log, [day for day in stale if day in files])
    for day in stale:
        uses = read.get(day, {})
        for name, use in kept.legacy.get(day, {}).items():
            uses[name] = uses.get(name, DayUse()) + use
        kept.days[day] = Day(wanted[day], uses)
    kept.days = {day: kept.days[day] for day in sorted(wanted)}
    return True


async def read(feature: SkillsFeature, bot: str) -> Read:
    kept = _kept.setdefault(feature, {}).setdefault(bot, _Kept())
    library = feature.raw_library(bot)
    revision = await library.revision()  # a database library's copy is brought up to date by this first
    if kept.skills is None or revision != kept.revision:
        kept.skills = {s.name: s for s in await library.list_skills()}
        kept.revision, kept.derived = revision, {}
    log = feature.usage_for(bot)
    stamp = await asyncio.to_thread(_stamp, log.path)
    if kept.usages is None or stamp is None or stamp != kept.stamp:
        usages, kept.legacy = await asyncio.to_thread(log.snapshot)
        kept.usages, kept.stamp, kept.derived = usages, stamp, {}
    else:
        usages = kept.usages
    if await _days(kept, log):
        kept.derived = {}
    return Read(kept.skills, usages, kept.days, kept.derived, kept.lasting)


__all__ = ["Day", "Read", "read"]
