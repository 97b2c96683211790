"""What the Learning page shows: per skill family (a library's category), the tool calls and tokens of a task
that used one of its skills, day by day, from the turns the usage log recorded; and against it the baseline
`skills stats` estimates savings from (the tool calls of the skill-less work a skill was learned from).

`learning_lines` sums it up in a line per bot for the Overview page.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from hermes_engine.skills.feature import SkillsFeature
from hermes_engine.skills.usage import DayUse, SkillUsage, ranked
from hermes_gateway.dashboard.chart import Chart, line_chart
from hermes_gateway.dashboard.views import Sources

WEEK_DAYS = 7


@dataclass(frozen=True)
class Family:
    bot: str
    category: str
    skills: tuple[str, ...]
    days: tuple[tuple[str, DayUse], ...]  # oldest first: the family's turns of that day, summed
    baseline: float | None  # tool calls of a task without the skills (weighted by use), when known
    calls_chart: Chart
    tokens_chart: Chart

    @property
    def total(self) -> DayUse:
        return sum((use for _, use in self.days), DayUse())


@dataclass(frozen=True)
class BotFigures:
    bot: str
    skills: int
    uses_this_week: int
    calls_saved_this_week: float | None  # None while no used skill has a baseline


async def _usages(feature: SkillsFeature, bot: str) -> tuple[dict[str, str], list[tuple[str, SkillUsage]]]:
    """(category by skill, the skills' usage as `skills stats` ranks them)."""
    skills = await feature.raw_library(bot).list_skills()
    usages = await asyncio.to_thread(feature.usage_for(bot).all)
    categories = {s.name: s.category for s in skills}
    return categories, ranked(usages, categories)


def _family(bot: str, category: str, rows: list[tuple[str, SkillUsage]]) -> Family:
    days: dict[str, DayUse] = defaultdict(DayUse)
    weighted, weight = 0.0, 0
    for _, usage in rows:
        for day, use in usage.per_day():
            days[day] = days[day] + use
        if usage.baseline_calls is not None and usage.counted:
            weighted += usage.baseline_calls * usage.counted
            weight += usage.counted
    series = tuple(sorted(days.items()))
    baseline = weighted / weight if weight else None
    calls = line_chart([(day, use.calls_per_use) for day, use in series], baseline=baseline,
                       title=f"Tool calls per task, {category}")
    tokens = line_chart([(day, use.tokens_per_use) for day, use in series], title=f"Tokens per task, {category}")
    return Family(bot, category, tuple(n for n, _ in rows), series, baseline, calls, tokens)


async def families(sources: Sources) -> tuple[Family, ...]:
    found: list[Family] = []
    for bot, feature in sorted(sources.skills.items()):
        categories, rows = await _usages(feature, bot)
        grouped: dict[str, list[tuple[str, SkillUsage]]] = defaultdict(list)
        for name, usage in rows:
            grouped[categories[name]].append((name, usage))
        found += [_family(bot, category, members) for category, members in sorted(grouped.items())]
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
    _, rows = await _usages(feature, bot)
    uses, saving, known = 0, 0.0, False
    for _, usage in rows:
        week = sum((use for day, use in usage.per_day() if day >= since), DayUse())
        uses += week.counted
        found = saved(usage, week)
        if found is not None:
            saving, known = saving + found, True
    return BotFigures(bot, len(rows), uses, saving if known else None)


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
