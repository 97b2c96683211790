"""What `/goal pause` and `/goal clear` do to a goal, in one place: the command does it to the open goal of
its conversation, the dashboard to the goal an admin picked. Only a running goal pauses (its next turn is
then turned away, `GoalFeature.accept_turn`); only an open one, running or paused, is cleared."""

from __future__ import annotations

from hermes_engine.ports.storage import GoalRecord, GoalStore

OPEN_STATUSES = ("active", "paused")


def may_pause(goal: GoalRecord | None) -> bool:
    return goal is not None and goal.status == "active"


def may_clear(goal: GoalRecord | None) -> bool:
    return goal is not None and goal.status in OPEN_STATUSES


async def pause_goal(store: GoalStore, goal: GoalRecord | None) -> GoalRecord | None:
    """The goal paused, or None when it was not running (nothing changed)."""
    if goal is None or not may_pause(goal):
        return None
    return await store.update_goal(goal.id, status="paused")


async def clear_goal(store: GoalStore, goal: GoalRecord | None) -> GoalRecord | None:
    """The goal cleared, or None when it was not open (nothing changed)."""
    if goal is None or not may_clear(goal):
        return None
    return await store.update_goal(goal.id, status="cleared")
