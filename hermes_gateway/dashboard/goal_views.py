"""What the Goals page shows, read through the `ConversationBrowser` port: each goal of the bots with its
state, conversation, owner, turns against its bot's budget and the judge's last verdict, and whether the
`/goal` command's own rules (`hermes_engine.loops.goal_actions`) let it be paused or cleared."""

from __future__ import annotations

from dataclasses import dataclass

from hermes_engine.loops.goal_actions import may_clear, may_pause
from hermes_engine.ports.storage import GoalRecord
from hermes_gateway.dashboard.views import Sources

GOALS_PER_PAGE = 50


@dataclass(frozen=True)
class ShownGoal:
    goal: GoalRecord
    owner: str  # who set it, as their platform named them: "Alice (telegram:4242)"
    budget: int | None  # the bot's turns a goal
    verdict: str  # the judge's last: "done" | "continue" | "blocked", or "" before the first
    reason: str
    may_pause: bool
    may_clear: bool


@dataclass(frozen=True)
class GoalList:
    rows: tuple[ShownGoal, ...]
    page: int
    pages: int
    total: int


def owner(goal: GoalRecord) -> str:
    """Who set the goal, from the message that set it (kept with the goal for its continuations)."""
    message = (goal.target or {}).get("message")
    if not isinstance(message, dict) or not message.get("user_id"):
        return ""
    name, where = str(message.get("user_name") or ""), f"{message.get('platform', '?')}:{message['user_id']}"
    return f"{name} ({where})" if name else where


def shown(goal: GoalRecord, sources: Sources) -> ShownGoal:
    last = goal.verdicts[-1] if goal.verdicts and isinstance(goal.verdicts[-1], dict) else {}
    return ShownGoal(goal, owner(goal), sources.goal_turns.get(goal.bot), str(last.get("verdict", "")),
                     str(last.get("reason", "")), may_pause(goal), may_clear(goal))


async def goals(sources: Sources, page: int = 1) -> GoalList:
    """The bots' goals, open ones first, a page at a time (past the end: the last page)."""
    store, bots = sources.store, list(sources.bots)
    page = max(page, 1)
    rows, total = await store.browse_goals(bots=bots, offset=(page - 1) * GOALS_PER_PAGE, limit=GOALS_PER_PAGE)
    pages = max(1, -(-total // GOALS_PER_PAGE))
    if page > pages:
        page = pages
        rows, total = await store.browse_goals(bots=bots, offset=(page - 1) * GOALS_PER_PAGE, limit=GOALS_PER_PAGE)
    return GoalList(tuple(shown(goal, sources) for goal in rows), page, pages, total)
