"""The usage ledger's role (re-exported by `ports.storage`): turns, tokens and cost per bot, person and day,
and each model's share of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Protocol


@dataclass(frozen=True)
class UsageCount:
    """Turns, tokens and cost (micro-dollars) counted for one day (UTC), or summed over days."""

    turns: int = 0
    tokens: int = 0
    cost_micros: int = 0


@dataclass(frozen=True)
class ModelSpend:
    """One model's tokens (disjoint counters, as `Usage`) and their cost in micro-dollars."""

    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_micros: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens


class UsageLedger(Protocol):
    """Turns, tokens and cost per bot, person and day (and each model's share), kept in the database so every
    replica and every restart counts against the same limits."""

    async def add_usage(self, bot: str, person_id: int, day: date, *, turns: int = 0, tokens: int = 0,
                        cost_micros: int = 0, models: Sequence[ModelSpend] = ()) -> None:
        """Add to the day's counts, atomically (one upsert adding to what is there), and each model's share."""

    async def count_turn(self, bot: str, person_id: int, day: date, *, max_turns: int | None = None,
                         max_tokens: int | None = None, max_cost_micros: int | None = None) -> bool:
        """Count one turn unless the day's counts already reached `max_turns` turns, `max_tokens` tokens or
        `max_cost_micros`; True when counted. One statement, so replicas at the limit cannot both pass."""

    async def usage_of(self, bot: str, person_id: int, day: date) -> UsageCount:
        """One person's counts for the day (zeros when nothing was counted)."""

    async def usage_total(self, bot: str, day: date) -> UsageCount:
        """Everyone's counts for the day, summed."""

    async def usage_between(self, bot: str, person_id: int | None, first: date, last: date) -> UsageCount:
        """One person's (None: everyone's) counts from `first` to `last`, both days included, summed."""

    async def spend_between(self, bot: str, person_id: int | None, first: date, last: date) -> list[ModelSpend]:
        """Each model's tokens and cost for one person (None: everyone) from `first` to `last`, both included,
        the costliest first."""

    async def merge_usage(self, keep_person_id: int, merge_person_id: int) -> None:
        """Add every count of `merge_person_id` (each bot, each day, each model) to `keep_person_id`'s and drop
        its own: accounts joined into one person count against one limit. In one transaction."""
