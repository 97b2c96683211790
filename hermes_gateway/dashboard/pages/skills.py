"""Skills: each bot's library with how its skills are used, a skill's text and the diffs of its writes, the
curator's reports, and the changes held for an admin, approved or rejected through the same
`SkillsFeature.approve` / `reject` that `/skills approve` and `/skills reject` use."""

from __future__ import annotations

from aiohttp import web

from hermes_engine.skills.model import SkillError
from hermes_gateway.dashboard import views_skills
from hermes_gateway.dashboard.guard import PREFIX, visitor
from hermes_gateway.dashboard.pages import Page
from hermes_gateway.dashboard.rendering import SOURCES, number, render

DONE = {"approved": "Approved {}.", "rejected": "Rejected {}."}


async def skills(request: web.Request, *, status: int = 200, said: str | None = None,
                 ok: bool = True) -> web.Response:
    if said is None:
        for key, sentence in DONE.items():
            if key in request.query:
                said = sentence.format(request.query[key])
    found = await views_skills.libraries(request.app[SOURCES], request.query.get("bot"),
                                         number(request.query.get("page")))
    return render(request, "skills.html", status=status, page="skills", libraries=found, said=said, ok=ok,
                  pending_text=views_skills.pending_text)


async def skill(request: web.Request) -> web.Response:
    found = await views_skills.skill(request.app[SOURCES], request.match_info["bot"], request.match_info["skill"])
    if found is None:
        raise web.HTTPNotFound(text="No such skill.\n")
    return render(request, "skill.html", page="skills", found=found, pending_text=views_skills.pending_text)


async def approve(request: web.Request) -> web.StreamResponse:
    return await _decide(request, "approve")


async def reject(request: web.Request) -> web.StreamResponse:
    return await _decide(request, "reject")


async def _decide(request: web.Request, verb: str) -> web.StreamResponse:
    """The admin's decision on a held change, taken by the engine's own approval code and recorded."""
    sources, who = request.app[SOURCES], visitor(request)
    bot, pending_id = request.match_info["bot"], request.match_info["pending"]
    feature = sources.skills.get(bot)
    if feature is None:
        raise web.HTTPNotFound(text="No such bot.\n")
    try:
        entry = feature.pending_for(bot).get(pending_id)
        if entry is None:
            raise SkillError(f"No pending change {pending_id!r}.")
        if verb == "approve":
            detail = (await feature.approve(bot, pending_id)).text()
        else:
            detail = feature.reject(bot, pending_id).change.summary()
    except (SkillError, ValueError, KeyError) as exc:
        return await skills(request, status=409, said=f"Could not {verb} {pending_id}: {exc}", ok=False)
    await sources.store.record_dashboard_change(who.admin, f"skills.{verb}", f"{bot} {pending_id}",
                                                f"{entry.change.summary()}: {detail}")
    raise web.HTTPSeeOther(f"{PREFIX}/skills?{verb}d={pending_id}#pending-{bot}")


def routes(router: web.UrlDispatcher) -> None:
    router.add_get("/skills", skills)
    router.add_get("/skills/{bot:[^/]+}/{skill:[a-z0-9][a-z0-9-]{0,63}}", skill)
    router.add_post("/skills/{bot:[^/]+}/pending/{pending:p-[0-9a-z]+}/approve", approve)
    router.add_post("/skills/{bot:[^/]+}/pending/{pending:p-[0-9a-z]+}/reject", reject)


PAGE = Page("skills", routes, "Skills", "/skills")
