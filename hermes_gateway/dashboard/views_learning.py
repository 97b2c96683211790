"""What the Learning page shows: per skill family (a library's category), the tool calls and tokens of a task
that used one of its skills, day by day, from the turns the usage log recorded; and against it the baseline
`skills stats` estimates savings from (the tool calls of the skill-less work a skill was learned from).

`learning_lines` sums it up in a line per bot for the Overview page.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from hermes_engine.skills.feature import SkillsFeature
from hermes_engine.skills.usage import DayUse, SkillUsage, ranked
from hermes_gateway.dashboard import skill_reads
from hermes_gateway.dashboard.chart import Chart, line_chart
from hermes_gateway.dashboard.views import Sources

WEEK_DAYS = 7


@dataclass(frozen=True, eq=False)  # one per change of its figures: kept and compared as itself
class Family:
    bot: str
    category: str
    skills: tuple[str, ...]
    days: tuple[tuple[str, DayUse], ...]  # oldest first: the family's turns of that day, summed
    baseline: float | None  # tool calls of a task without the skills (weighted by use), when known
    calls_chart: Chart
    tokens_chart: Chart

    @property
    def anchor(self) -> str:
        """An HTML id that stays the family's own while the page changes around it."""
        return "f" + hashlib.sha1(f"{self.bot}\0{self.category}".encode()).hexdigest()[:12]

    @property
    def total(self) -> DayUse:
        return sum((use for _, use in self.days), DayUse())


@dataclass(frozen=True)
class BotFigures:
    bot: str
    skills: int
    uses_this_week: int
    calls_saved_this_week: float | None  # None while no used skill has a baseline


async def _usages(feature: SkillsFeature, bot: str) -> tuple[skill_reads.Read, list[tuple[str, SkillUsage]]]:
    """(what was read, the skills' usage as `skills stats` ranks them)."""
    found = await skill_reads.read(feature, bot)
    if "ranked" not in found.derived:
        found.derived["ranked"] = ranked(found.usages, found.skills)
    return found, found.derived["ranked"]


def _members(read: skill_reads.Read, rows: list[tuple[str, SkillUsage]]) -> dict[str, str]:
    """Each ranked skill's family. The same object while the families stay the same (most turns change
    figures only), so each day's sums, kept with the object they were summed for, stay valid."""
    if "members" not in read.derived:
        members = {name: read.skills[name].category for name, _ in rows}
        if read.lasting.get("members") != members:
            read.lasting["members"] = members
        read.derived["members"] = read.lasting["members"]
    found: dict[str, str] = read.derived["members"]
    return found


def _by_family(day: skill_reads.Day, members: dict[str, str]) -> dict[str, DayUse]:
    """The day's turns summed per family: sums of plain numbers first, one `DayUse` a family after."""
    kept = day.derived.get("families")
    if kept is not None and kept[0] is members:
        found: dict[str, DayUse] = kept[1]
        return found
    sums: dict[str, list[int]] = {}
    for name, use in day.uses.items():
        category = members.get(name)
        if category is None:
            continue
        acc = sums.setdefault(category, [0, 0, 0, 0])
        acc[0] += use.counted
        acc[1] += use.calls
        acc[2] += use.tokened
        acc[3] += use.tokens
    found = {category: DayUse(*acc) for category, acc in sums.items()}
    day.derived["families"] = (members, found)
    return found


def _family(bot: str, category: str, rows: list[tuple[str, SkillUsage]], series: tuple[tuple[str, DayUse], ...],
            before: Family | None) -> Family:
    weighted, weight = 0.0, 0
    for _, usage in rows:
        if usage.baseline_calls is not None and usage.counted:
            weighted += usage.baseline_calls * usage.counted
            weight += usage.counted
    baseline = weighted / weight if weight else None
    skills = tuple(n for n, _ in rows)
    if before is not None and (before.skills, before.days, before.baseline) == (skills, series, baseline):
        return before  # the same figures: the same family, drawn once
    calls = line_chart([(day, use.calls_per_use) for day, use in series], baseline=baseline,
                       title=f"Tool calls per task, {category}")
    tokens = line_chart([(day, use.tokens_per_use) for day, use in series], title=f"Tokens per task, {category}")
    return Family(bot, category, skills, series, baseline, calls, tokens)


async def families(sources: Sources) -> tuple[Family, ...]:
    found: list[Family] = []
    for bot, feature in sorted(sources.skills.items()):
        read, rows = await _usages(feature, bot)
        if "families" not in read.derived:
            members = _members(read, rows)
            per_day = [(day, _by_family(kept, members)) for day, kept in read.days.items()]
            grouped: dict[str, list[tuple[str, SkillUsage]]] = defaultdict(list)
            for name, usage in rows:
                grouped[members[name]].append((name, usage))
            before: dict[str, Family] = read.lasting.get("families", {})
            made = [_family(bot, category, members_of, tuple((day, sums[category]) for day, sums in per_day
                                                             if category in sums), before.get(category))
                    for category, members_of in sorted(grouped.items())]
            read.lasting["families"] = {family.category: family for family in made}
            read.derived["families"] = made
        found += read.derived["families"]
    return tuple(found)


def saved(usage: SkillUsage, use: DayUse) -> float | None:
    """Tool calls the skill saved over `use`'s turns: the baseline `skills stats` subtracts from, times the
    turns, less the calls they made."""
    if usage.baseline_calls is None or not use.counted:
        return None
    return usage.baseline_calls * use.counted - use.calls


async def bot_figures(feature: SkillsFeature, bot: str, today: date | None = None) -> BotFigures:
    today = today or datetime.now(UTC).date()
    since = (today - timedelta(days=WEEK_DAYS - 1)).isoformat()
    read, rows = await _usages(feature, bot)
    key = f"week:{since}"
    if key not in read.derived:
        read.derived[key] = _week(read, rows, since)
    uses, saving, known = read.derived[key]
    return BotFigures(bot, len(rows), uses, saving if known else None)


def _week(read: skill_reads.Read, rows: list[tuple[str, SkillUsage]], since: str) -> tuple[int, float, bool]:
    """(turns that used a ranked skill since `since`, the tool calls they saved, whether any saving is known):
    `saved` is linear in the turns, so it is summed day by day."""
    usages = dict(rows)
    uses, saving, known = 0, 0.0, False
    for day, kept in read.days.items():
        if day < since:
            continue
        for name, use in kept.uses.items():
            usage = usages.get(name)
            if usage is None:
                continue
            uses += use.counted
            found = saved(usage, use)
            if found is not None:
                saving, known = saving + found, True
    return uses, saving, known


def line_of(figures: BotFigures) -> str:
    saving = ("tool calls saved: not known yet" if figures.calls_saved_this_week is None
              else f"~{round(figures.calls_saved_this_week):,} tool calls saved")
    return (f"{figures.bot}: skills: {figures.skills:,}, used {figures.uses_this_week:,} "
            f"time{'' if figures.uses_this_week == 1 else 's'} this week, {saving}")


async def learning_lines(sources: Sources) -> list[str]:
    """The learning figures as one line per bot, e.g. "bot: skills: 42, used 310 times this week, ~1,200 tool
    calls saved" (the week: the last seven days, UTC, today included)."""
    return [line_of(await bot_figures(feature, bot)) for bot, feature in sorted(sources.skills.items())]


__all__ = ["BotFigures", "Family", "bot_figures", "families", "learning_lines", "line_of", "saved"]
