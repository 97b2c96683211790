"""Daily usage limits: turns, tokens and dollars per person and for the whole bot, per UTC day.

The counts live in the store (`UsageLedger`), so every replica and every restart counts against the same
limit. A turn is counted when it is let through, its tokens when it ends; a person whose limit is reached
is told when it resets and no model is called. Admins are never refused (their use is still counted).
Whatever runs on a person's behalf counts against them too: each turn of their goal is a turn (they asked
for it; `refusal` lets the goal pause instead), and the model calls made for them outside their turns (a
goal's judge, a background review, a sub-agent, a kanban worker, a compression summary) are tokens and
their cost (`charge`).
Limits are checked before a turn, so the turn that crosses a token or dollar limit finishes; the next one
is refused. A person's limits are checked and the turn counted in one statement (replicas cannot both let
the last turn through); the bot's totals are read first, so turns starting at the same moment may pass them
by a few. What the model calls cost (`spending.py`, priced by `pricing.py`) is kept whether limits are set
or not: `/status` and `/usage` tell a person what they spent.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from hermes_engine.config import UsageLimitSettings
from hermes_engine.policy.pricing import MICROS, Prices, dollars
from hermes_engine.policy.spending import cost_lines, spend_of, usage_report
from hermes_engine.ports.commands import CommandContext, CommandRegistry
from hermes_engine.ports.conversation import Usage
from hermes_engine.ports.feature import Feature, TurnOutcome
from hermes_engine.ports.host import Host
from hermes_engine.ports.inbound import InboundMessage
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.session import SessionScope
from hermes_engine.ports.usage import UsageLedger

Clock = Callable[[], datetime]
SERVICE: ServiceKey[UsageLimits] = ServiceKey("usage_limits")


async def charge(host: Host, person_id: int | None, spent: int | Usage) -> None:
    """Put what was spent for a person outside their own turns on their (and so the bot's) daily count, as a
    turn's is: a `Usage` with its models priced, or a bare token count (its cost unknown)."""
    if person_id is not None:
        await record(host, person_id, datetime.now(UTC).date(), spent)


async def record(host: Host, person_id: int, day: date, spent: int | Usage) -> None:
    """Add tokens and their cost to the ledger, and the cost to the metrics, per model."""
    usage = spent if isinstance(spent, Usage) else Usage(input_tokens=spent)
    if not usage.total:
        return
    spend = spend_of(Prices(host.profile.prices), usage)
    for part in spend.models:
        if part.cost_micros:
            host.metrics.cost_spent(host.bot, part.model, part.cost_micros / MICROS)
    await host.store.add_usage(host.bot, person_id, day, tokens=usage.total, cost_micros=spend.cost_micros,
                               models=spend.models)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class UsageLimits(Feature):
    name = "usage-limits"

    def __init__(self, settings: UsageLimitSettings, *, clock: Clock = _utcnow) -> None:
        self.settings = settings
        self.clock = clock
        self.host: Host | None = None

    def services(self) -> dict[ServiceKey[Any], object]:
        return {SERVICE: self}

    def register_commands(self, registry: CommandRegistry) -> None:
        registry.command("usage", "what the model cost you, by model: today and this month")(self.usage)

    async def start(self, host: Host) -> None:
        self.host = host

    async def accept_turn(self, message: InboundMessage, purpose: str) -> bool:
        """A person's turn under every limit is counted and goes on; over one, they hear when it resets.
        A goal's turn is left to the goal, which asks `refusal` and pauses with the answer."""
        if purpose != "turn" or message.synthetic or self.host is None:
            return True
        refused = await self.refusal(message)
        if refused is None:
            return True
        await self.host.notify(message.reply_target(), refused, idempotency_key=f"{message.event_id}:limit")
        return False

    async def refusal(self, message: InboundMessage) -> str | None:
        """Count the turn `message` asks for and return None, or return the sentence saying which limit
        refuses it and when that resets (nothing is counted then)."""
        if not self.settings.enabled or self.host is None:
            return None
        host = self.host
        person = await host.person_of(message.platform, message.account, message.user_id, message.user_name)
        return await self.refusal_for(person, admin=host.is_admin(message))

    async def refusal_for(self, person: int, *, admin: bool = False) -> str | None:
        """`refusal` for a turn run for `person` without a message of theirs (a scheduled task's run)."""
        if not self.settings.enabled or self.host is None:
            return None
        host, s, day = self.host, self.settings, self.clock().date()
        if admin:
            await host.store.add_usage(host.bot, person, day, turns=1)
            return None
        refused = await self._bot_limit(day)
        if refused is None and not await host.store.count_turn(host.bot, person, day, max_turns=s.turns_per_day,
                                                               max_tokens=s.tokens_per_day,
                                                               max_cost_micros=_micros(s.cost_per_day)):
            refused = await self._person_limit(person, day)
        if refused is None:
            return None
        limit, text = refused
        host.metrics.limit_reached(host.bot, limit)
        return f"{text} {self._resets()}"

    async def on_turn_end(self, outcome: TurnOutcome) -> None:
        if outcome.person_id is None or self.host is None:
            return
        if outcome.usage.total:  # off the session's lane: the next turn need not wait for this write
            self.host.spawn(record(self.host, outcome.person_id, self.clock().date(), outcome.usage), "usage-tokens")

    async def cost_lines(self, person_id: int, *, admin: bool) -> list[str]:
        """`/status`: what the person spent today and this month, and for an admin what the bot did."""
        if self.host is None:
            return []
        return await cost_lines(self.host.store, self.host.bot, person_id, self.clock().date(), admin=admin,
                                limit=self.settings.cost_per_day, total_limit=self.settings.total_cost_per_day)

    async def usage(self, ctx: CommandContext) -> str:
        """`/usage`: the person's spending by model; `/usage bot` the whole bot's, for admins."""
        assert self.host is not None
        whole_bot = ctx.args.strip().lower() == "bot"
        if whole_bot and not ctx.is_admin:
            return "Only an admin can see what the whole bot spent."
        report = await usage_report(self.host.store, Prices(self.host.profile.prices), self.host.bot,
                                    None if whole_bot else ctx.person_id, self.clock().date())
        return ("The whole bot's model use:\n\n" if whole_bot else "Your model use:\n\n") + report

    async def status_lines(self, scope: SessionScope, person_id: int | None) -> list[str]:
        if not self.settings.enabled or person_id is None or self.host is None:
            return []
        return [f"{await usage_today(self.host.store, self.settings, self.host.bot, person_id, self.clock().date())} "
                f"{self._resets()}"]

    async def _bot_limit(self, day: date) -> tuple[str, str] | None:
        """The bot's total limit reached, as (metric label, sentence), or None."""
        s, host = self.settings, self.host
        if (s.total_turns_per_day is None and s.total_tokens_per_day is None and s.total_cost_per_day is None
                or host is None):
            return None
        total = await host.store.usage_total(host.bot, day)
        if s.total_turns_per_day is not None and total.turns >= s.total_turns_per_day:
            return "bot_turns", "I have answered as many messages as I may today."
        if s.total_tokens_per_day is not None and total.tokens >= s.total_tokens_per_day:
            return "bot_tokens", "I have used all the tokens I may use today."
        if s.total_cost_per_day is not None and total.cost_micros >= round(s.total_cost_per_day * MICROS):
            return "bot_cost", "I have spent all the money I may spend on the model today."
        return None

    async def _person_limit(self, person: int, day: date) -> tuple[str, str]:
        """Which of the person's limits refused the turn, as (metric label, sentence)."""
        s, host = self.settings, self.host
        assert host is not None
        mine = await host.store.usage_of(host.bot, person, day)
        if s.turns_per_day is not None and mine.turns >= s.turns_per_day:
            return "person_turns", f"You have reached your daily limit of {_count(s.turns_per_day, 'turn')}."
        if s.tokens_per_day is not None and mine.tokens >= s.tokens_per_day:
            return "person_tokens", f"You have reached your daily limit of {_count(s.tokens_per_day, 'token')}."
        limit = _micros(s.cost_per_day) or 0
        return "person_cost", f"You have reached your daily limit of {dollars(limit)} of model use."

    def _resets(self) -> str:
        now = self.clock()
        midnight = datetime.combine(now.date() + timedelta(days=1), time(0), tzinfo=UTC)
        hours, rest = divmod(int((midnight - now).total_seconds()), 3600)
        return f"It resets at midnight UTC (in {hours} h {rest // 60} min)."


async def usage_today(ledger: UsageLedger, settings: UsageLimitSettings, bot: str, person_id: int, day: date) -> str:
    """A person's turns and tokens on `day` against their daily limits, as `/status` and the dashboard say it."""
    mine = await ledger.usage_of(bot, person_id, day)
    turns = _of(mine.turns, settings.turns_per_day, "turns")
    return f"Today: {turns}, {_of(mine.tokens, settings.tokens_per_day, 'tokens')}."


def _micros(usd: float | None) -> int | None:
    return None if usd is None else round(usd * MICROS)


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _of(used: int, limit: int | None, what: str) -> str:
    return f"{used} of {limit} {what}" if limit is not None else f"{used} {what} (no limit)"
