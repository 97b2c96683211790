"""People: everyone with an account, and one person's accounts and memory (edited through the agent's own
memory rules)."""

from __future__ import annotations

from aiohttp import web

from hermes_engine.memory.book import LABELS, Change
from hermes_engine.memory.documents import MemoryOwner
from hermes_gateway.dashboard import views
from hermes_gateway.dashboard.guard import PREFIX, visitor
from hermes_gateway.dashboard.pages import Page
from hermes_gateway.dashboard.rendering import SOURCES, number, render


async def people(request: web.Request) -> web.Response:
    listing = await views.people(request.app[SOURCES], number(request.query.get("page")))
    forgotten = request.query.get("forgotten", "")
    said = f"Person {forgotten} was forgotten." if forgotten.isdigit() else None
    return render(request, "people.html", page="people", listing=listing, said=said)


async def person(request: web.Request, *, status: int = 200, said: str | None = None, ok: bool = True,
                 draft: dict[str, str] | None = None) -> web.Response:
    found = await views.person(request.app[SOURCES], int(request.match_info["person"]))
    if found is None:
        raise web.HTTPNotFound(text="No such person.\n")
    said = said if said is not None else ("Saved." if "saved" in request.query else None)
    return render(request, "person.html", status=status, page="people", found=found, said=said, ok=ok,
                  forget_offered=request.app[SOURCES].forget is not None,
                  draft=draft or {})


async def memory_add(request: web.Request) -> web.StreamResponse:
    """An entry added through the same `MemoryBook` the agent's memory tool writes with: the same scan,
    limits and duplicate rules, under the same lock, with the store's versioned writes."""
    form = await request.post()
    content = str(form.get("content", "")).strip()
    return await _change(request, [Change.of("add", content)], "memory.add", content)


async def memory_remove(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    expected = str(form.get("entry", ""))
    target, person_id = request.match_info["target"], int(request.match_info["person"])
    sources, who = request.app[SOURCES], visitor(request)
    try:
        index = int(str(form.get("index", "")))
    except ValueError:
        raise web.HTTPBadRequest(text="Which entry?\n") from None
    result = await sources.memory.remove_at(MemoryOwner.person(person_id), target, index, expected)
    if not result.ok:
        return await person(request, status=409, said=result.message, ok=False)
    await sources.store.record_dashboard_change(who.admin, "memory.remove", _subject(person_id, target), expected)
    raise web.HTTPSeeOther(f"{PREFIX}/people/{person_id}?saved")


async def _change(request: web.Request, changes: list[Change], action: str, detail: str) -> web.StreamResponse:
    target, person_id = request.match_info["target"], int(request.match_info["person"])
    sources, who = request.app[SOURCES], visitor(request)
    if await sources.store.get_person(person_id) is None:
        raise web.HTTPNotFound(text="No such person.\n")
    result = await sources.memory.apply(MemoryOwner.person(person_id), target, changes)
    if not result.ok:
        return await person(request, status=422, said=result.message, ok=False, draft={target: detail})
    await sources.store.record_dashboard_change(who.admin, action, _subject(person_id, target), detail)
    raise web.HTTPSeeOther(f"{PREFIX}/people/{person_id}?saved")


async def forget(request: web.Request) -> web.StreamResponse:
    """Everything kept about the person deleted, as their own `/forget` deletes it (the same engine code,
    loaded conversations included), once the admin ticked that they mean it."""
    sources, who, person_id = request.app[SOURCES], visitor(request), int(request.match_info["person"])
    if sources.forget is None:
        raise web.HTTPNotFound(text="Forgetting is not offered here.\n")
    form = await request.post()
    if form.get("confirm") != "yes":
        return await person(request, status=422, said="Tick the box to confirm; nothing was deleted.", ok=False)
    outcome = await sources.forget(person_id)
    if outcome is None:
        raise web.HTTPNotFound(text="No such person.\n")
    await sources.store.record_dashboard_change(who.admin, "person.forget", f"person {person_id}", outcome.summary())
    raise web.HTTPSeeOther(f"{PREFIX}/people?forgotten={person_id}")


def _subject(person_id: int, target: str) -> str:
    return f"person {person_id} {LABELS[target]}"


def routes(router: web.UrlDispatcher) -> None:
    router.add_get("/people", people)
    router.add_get("/people/{person:\\d+}", person)
    router.add_post("/people/{person:\\d+}/memory/{target:memory|user}/add", memory_add)
    router.add_post("/people/{person:\\d+}/memory/{target:memory|user}/remove", memory_remove)
    router.add_post("/people/{person:\\d+}/forget", forget)


PAGE = Page("people", routes, "People", "/people")
