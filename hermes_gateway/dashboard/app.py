"""The `/admin` application: its routes, mounted on the gateway's aiohttp server by `mount`.

Pages are rendered on the server with Jinja2 (autoescaped: what people wrote is shown as text), styled and
enhanced by the package's own static files; nothing is fetched from elsewhere. Every change an admin makes
is recorded in the store's audit (`DashboardStore.record_dashboard_change`).
"""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from hermes_engine.memory.book import LABELS, Change
from hermes_engine.memory.documents import MemoryOwner
from hermes_engine.ports.dashboard import DashboardStore
from hermes_gateway.dashboard import views
from hermes_gateway.dashboard.config import Dashboard
from hermes_gateway.dashboard.guard import LOGIN, PREFIX, VISITOR, middlewares, visitor
from hermes_gateway.dashboard.tokens import COOKIE, hashed, new_token

HERE = Path(__file__).parent
SOURCES = web.AppKey("sources", views.Sources)
DASHBOARD = web.AppKey("dashboard", Dashboard)
TEMPLATES = web.AppKey("templates", jinja2.Environment)
_BIDI = {"\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e",
         "\u200f", "\u061c"}


def visible(text: object) -> str:
    """Control characters and bidirectional overrides written as their code points, so a name cannot
    reorder or hide the text around it (escaping for HTML is autoescape's job, after this)."""
    out = []
    for ch in str(text):
        if ch in _BIDI or (unicodedata.category(ch) in ("Cc", "Cf") and ch not in "\n\t"):
            out.append(f"<U+{ord(ch):04X}>")
        else:
            out.append(ch)
    return "".join(out)


def templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, enable_async=False)
    env.filters["visible"] = visible
    env.filters["when"] = lambda at: at.strftime("%Y-%m-%d %H:%M UTC") if at else ""
    return env


def render(request: web.Request, name: str, status: int = 200, **context: Any) -> web.Response:
    found = request.get(VISITOR)
    page = request.app[TEMPLATES].get_template(name).render(visitor=found, prefix=PREFIX, **context)
    return web.Response(text=page, status=status, content_type="text/html", charset="utf-8")


def dashboard_app(sources: views.Sources, dashboard: Dashboard) -> web.Application:
    """The application to mount at `/admin` (see `mount`)."""
    store: DashboardStore = sources.store
    app = web.Application(middlewares=middlewares(store, dashboard))
    app[SOURCES], app[DASHBOARD], app[TEMPLATES] = sources, dashboard, templates()
    app.router.add_get("/login", login_page)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)
    app.router.add_get("/", overview)
    app.router.add_get("/people", people)
    app.router.add_get("/people/{person:\\d+}", person)
    app.router.add_post("/people/{person:\\d+}/memory/{target:memory|user}/add", memory_add)
    app.router.add_post("/people/{person:\\d+}/memory/{target:memory|user}/remove", memory_remove)
    app.router.add_get("/audit", audit)
    app.router.add_static("/static/", HERE / "static", show_index=False, follow_symlinks=False)
    return app


def mount(http: web.Application, sources: views.Sources, dashboard: Dashboard) -> web.Application:
    """Serve the dashboard under `/admin` on the gateway's HTTP server; returns the sub-application."""
    app = dashboard_app(sources, dashboard)
    http.add_subapp(PREFIX, app)
    return app


# -- signing in and out --

async def login_page(request: web.Request) -> web.Response:
    """A link from the bot shows a button; only pressing it uses the link (a platform's link preview, which
    fetches the page, does not sign anyone in)."""
    token = request.query.get("token", "")
    if token:
        return render(request, "login.html", token=token, problem=None)
    problem = "You are signed out." if "out" in request.query else None
    return render(request, "login.html", status=401, token="", problem=problem)


async def login(request: web.Request) -> web.StreamResponse:
    sources, dashboard = request.app[SOURCES], request.app[DASHBOARD]
    form = await request.post()
    token = form.get("token")
    admin = await sources.store.take_dashboard_link(hashed(token)) if isinstance(token, str) and token else None
    if admin is None:
        return render(request, "login.html", status=401, token="",
                      problem="This link was used already or has expired. Send /dashboard to the bot for a new one.")
    session = new_token()
    expires = datetime.now(UTC) + timedelta(seconds=dashboard.session_seconds)
    await sources.store.open_dashboard_session(hashed(session), admin, expires)
    await sources.store.record_dashboard_change(admin, "sign-in", "dashboard")
    response = web.HTTPSeeOther(f"{PREFIX}/")
    response.set_cookie(COOKIE, session, path=PREFIX, httponly=True, secure=dashboard.secure, samesite="Strict",
                        max_age=int(dashboard.session_seconds))
    raise response


async def logout(request: web.Request) -> web.StreamResponse:
    sources, dashboard, who = request.app[SOURCES], request.app[DASHBOARD], visitor(request)
    await sources.store.close_dashboard_session(who.session_hash)
    await sources.store.record_dashboard_change(who.admin, "sign-out", "dashboard")
    response = web.HTTPSeeOther(f"{LOGIN}?out")
    response.del_cookie(COOKIE, path=PREFIX, secure=dashboard.secure, samesite="Strict")
    raise response


# -- pages --

async def overview(request: web.Request) -> web.Response:
    return render(request, "overview.html", page="overview", overview=await views.overview(request.app[SOURCES]))


async def people(request: web.Request) -> web.Response:
    number = request.query.get("page", "1")
    listing = await views.people(request.app[SOURCES], int(number) if number.isdigit() else 1)
    return render(request, "people.html", page="people", listing=listing)


async def person(request: web.Request, *, status: int = 200, said: str | None = None, ok: bool = True,
                 draft: dict[str, str] | None = None) -> web.Response:
    found = await views.person(request.app[SOURCES], int(request.match_info["person"]))
    if found is None:
        raise web.HTTPNotFound(text="No such person.\n")
    said = said if said is not None else ("Saved." if "saved" in request.query else None)
    return render(request, "person.html", status=status, page="people", found=found, said=said, ok=ok,
                  draft=draft or {})


async def audit(request: web.Request) -> web.Response:
    changes = await request.app[SOURCES].store.dashboard_changes(limit=200)
    return render(request, "audit.html", page="audit", changes=changes)


# -- changes --

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


def _subject(person_id: int, target: str) -> str:
    return f"person {person_id} {LABELS[target]}"
