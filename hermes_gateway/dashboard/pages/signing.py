"""Signing in with a one-time link, and out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from aiohttp import web

from hermes_gateway.dashboard.guard import LOGIN, PREFIX, visitor
from hermes_gateway.dashboard.pages import Page
from hermes_gateway.dashboard.rendering import DASHBOARD, SOURCES, render
from hermes_gateway.dashboard.tokens import COOKIE, hashed, new_token


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


def routes(router: web.UrlDispatcher) -> None:
    router.add_get("/login", login_page)
    router.add_post("/login", login)
    router.add_post("/logout", logout)


PAGE = Page("login", routes)
