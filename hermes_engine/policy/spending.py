"""Money spent on the model: a usage priced per model (`pricing.py`), and how a person reads it in `/status`
and `/usage`. Days and months are UTC, as the usage limits count them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from hermes_engine.policy.pricing import Prices, dollars
from hermes_engine.ports.conversation import Usage
from hermes_engine.ports.storage import ModelSpend, UsageLedger


@dataclass(frozen=True)
class Spend:
    """What one usage cost: the total, each model's share, and the models with no known price."""

    cost_micros: int = 0
    models: list[ModelSpend] = field(default_factory=list)
    unpriced: list[str] = field(default_factory=list)


def spend_of(prices: Prices, usage: Usage) -> Spend:
    """Each model's counts priced; tokens no response named a model for are counted by the caller only."""
    models, unpriced = [], []
    for name, part in usage.per_model().items():
        cost = prices.cost(name, part)
        if not cost.known:
            unpriced.append(name)
        models.append(ModelSpend(name, part.input_tokens, part.output_tokens, part.cache_read_tokens,
                                 part.cache_write_tokens, cost.micros))
    return Spend(sum(m.cost_micros for m in models), models, unpriced)


def month_of(day: date) -> tuple[date, date]:
    """The month of `day` so far: its first day and `day`."""
    return day.replace(day=1), day


async def cost_lines(ledger: UsageLedger, bot: str, person_id: int, day: date, *, admin: bool,
                     limit: float | None = None, total_limit: float | None = None) -> list[str]:
    """`/status`: the person's cost today and this month, and the bot's for admins."""
    first, _ = month_of(day)
    mine_today = await ledger.usage_of(bot, person_id, day)
    mine_month = await ledger.usage_between(bot, person_id, first, day)
    lines = [f"Cost: {dollars(mine_today.cost_micros)} today, {dollars(mine_month.cost_micros)} this month"
             + (f" (daily limit {dollars(round(limit * 1_000_000))})" if limit is not None else "") + "."]
    if admin:
        bot_today = await ledger.usage_between(bot, None, day, day)
        bot_month = await ledger.usage_between(bot, None, first, day)
        lines.append(f"Bot cost: {dollars(bot_today.cost_micros)} today, {dollars(bot_month.cost_micros)} this "
                     "month" + (f" (daily limit {dollars(round(total_limit * 1_000_000))})"
                                if total_limit is not None else "") + ".")
    return lines


async def usage_report(ledger: UsageLedger, prices: Prices, bot: str, person_id: int | None, day: date) -> str:
    """`/usage`: each model's tokens and cost today and this month, for one person (None: the whole bot).
    A model with no known price shows its tokens, and the report says so once."""
    first, _ = month_of(day)
    sections, unpriced = [], set()
    for title, spent in (("Today", await ledger.spend_between(bot, person_id, day, day)),
                         ("This month", await ledger.spend_between(bot, person_id, first, day))):
        lines = [f"{title} (UTC): {dollars(sum(s.cost_micros for s in spent))}"]
        for s in spent:
            known = prices.known(s.model)
            if not known:
                unpriced.add(s.model)
            cost = dollars(s.cost_micros) if known else "no known price"
            lines.append(f"- {s.model}: {cost} ({_tokens(s)})")
        if not spent:
            lines.append("- no model calls")
        sections.append("\n".join(lines))
    if unpriced:
        sections.append(f"No known price for {', '.join(sorted(unpriced))}: its tokens are counted, not its cost "
                        "(a profile can set one under `prices:`).")
    return "\n\n".join(sections)


def _tokens(s: ModelSpend) -> str:
    return (f"{s.input_tokens} in, {s.cache_read_tokens} cached in, {s.cache_write_tokens} cache write, "
            f"{s.output_tokens} out")
