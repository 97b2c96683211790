"""A bot's skills and their usage as the Skills and Learning pages read them: through the `SkillsFeature`'s
own library and usage log, read again only when they changed (the library's revision, the usage file's
size and time), since parsing a library of hundreds of skills on every page view would take longer than
the page may."""

from __future__ import annotations

import asyncio
import os
import weakref
from dataclasses import dataclass, field
from typing import Any

from hermes_engine.skills.feature import SkillsFeature
from hermes_engine.skills.model import Skill
from hermes_engine.skills.usage import SkillUsage


@dataclass(frozen=True)
class Read:
    skills: dict[str, Skill]  # by name, in the library's order (category, name)
    usages: dict[str, SkillUsage]
    derived: dict[str, Any]  # what a page computed from these two, kept until either changes


@dataclass
class _Kept:
    revision: str | None = None
    skills: dict[str, Skill] | None = None
    stamp: tuple[int, int, int] | None = None
    usages: dict[str, SkillUsage] | None = None
    derived: dict[str, Any] = field(default_factory=dict)


_kept: weakref.WeakKeyDictionary[SkillsFeature, dict[str, _Kept]] = weakref.WeakKeyDictionary()


def _stamp(path: os.PathLike[str]) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


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
        kept.usages = await asyncio.to_thread(log.all)
        kept.stamp, kept.derived = stamp, {}
    return Read(kept.skills, kept.usages, kept.derived)


__all__ = ["Read", "read"]
