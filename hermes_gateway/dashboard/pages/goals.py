"""Goals: every goal of the bots, and an admin's pause or clear, done by the `/goal` command's own code."""

from __future__ import annotations

import logging

from aiohttp import web

from hermes_engine.loops.goal_actions import clear_goal, pause_goal
from hermes_gateway.dashboard import goal_views
from hermes_gateway.dashboard.guard import PREFIX, visitor
from hermes_gateway.dashboard.pages import Page
from hermes_gateway.dashboard.rendering import SOURCES, number, render

log = logging.getLogger(__name__)

DONE = {"pause": "Goal paused.", "clear": "Goal cleared."}
REFUSED = {"pause": "This goal is not running, so it cannot be paused; nothing was changed.",
           "clear": "This goal is not open, so it cannot be cleared; nothing was changed."}


async def goals(request: web.Request, *, status: int = 200, said: str | None = None, ok: bool = True) -> web.Response:
    listing = await goal_views.goals(request.app[SOURCES], number(request.query.get("page")))
    said = said if said is not None else DONE.get(request.query.get("done", ""))
    return render(request, "goals.html", status=status, page="goals", listing=listing, said=said, ok=ok)


async def change(request: web.Request) -> web.StreamResponse:
    """Pause or clear as `/goal pause` and `/goal clear` do, on the goal picked here; recorded in the audit, and
    told in the goal's conversation."""
    sources, action = request.app[SOURCES], request.match_info["action"]
    goal = await sources.store.get_goal(int(request.match_info["goal"]))
    if goal is None or goal.bot not in sources.bots:
        raise web.HTTPNotFound(text="No such goal.\n")
    changed = await (pause_goal if action == "pause" else clear_goal)(sources.store, goal)
    if changed is None:
        return await goals(request, status=409, said=REFUSED[action], ok=False)
    await sources.store.record_dashboard_change(visitor(request).admin, f"goal.{action}", f"goal {goal.id}", goal.text)
    if (teller := sources.goals.get(goal.bot)) is not None:
        try:
            await teller.tell_changed_by_admin(changed)
        except Exception:  # the change is made and recorded; a platform that fails to take the notice is logged
            log.exception("telling goal %s's conversation of its %s failed", goal.id, action)
    raise web.HTTPSeeOther(f"{PREFIX}/goals?done={action}")


def routes(router: web.UrlDispatcher) -> None:
    router.add_get("/goals", goals)
    router.add_post("/goals/{goal:\\d+}/{action:pause|clear}", change)


PAGE = Page("goals", routes, "Goals", "/goals")
