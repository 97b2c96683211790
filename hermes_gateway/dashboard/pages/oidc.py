"""Signing in through the OpenID Connect provider: `/oidc/start` sends the browser there, `/oidc/callback`
takes it back and opens a session for an admin.

The session cookie is `SameSite=Strict`, and the callback is a navigation from the provider's site, after
which a browser would not send that cookie on a redirect: the callback answers with a page of its own that
moves on to the Overview (a same-site step), so the first page already finds the session.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from aiohttp import web

from hermes_gateway.dashboard.guard import LOGIN, PREFIX
from hermes_gateway.dashboard.oidc import binding
from hermes_gateway.dashboard.oidc.admins import admin_of, who
from hermes_gateway.dashboard.oidc.flow import Provider, Refused, Unreachable
from hermes_gateway.dashboard.pages import Page
from hermes_gateway.dashboard.rendering import DASHBOARD, SOURCES, render
from hermes_gateway.dashboard.tokens import COOKIE, hashed, new_token

log = logging.getLogger(__name__)

PROVIDER = web.AppKey("oidc_provider", Provider)
START = f"{PREFIX}/oidc/start"
CALLBACK = f"{PREFIX}/oidc/callback"
BUSY = "Too many sign-ins are under way at once. Try again in a few minutes, or ask the bot for a link with /dashboard."
EXPIRED = "This sign-in has expired or was already used. Start again from the sign-in page."


async def start(request: web.Request) -> web.StreamResponse:
    provider = request.app.get(PROVIDER)
    if provider is None:  # single sign-on is not configured
        raise web.HTTPSeeOther(LOGIN)
    state, secret = new_token(), new_token()
    expires = datetime.now(UTC) + timedelta(seconds=binding.STATE_SECONDS)
    if not await request.app[SOURCES].store.put_dashboard_oidc_state(hashed(state), hashed(secret), expires,
                                                                     at_most=binding.STATES_AT_MOST):
        log.warning("dashboard single sign-on: %s sign-ins are under way, the most kept at once; refusing more "
                    "until some finish or expire", binding.STATES_AT_MOST)
        busy = refused(request, BUSY, status=503)
        busy.headers["Retry-After"] = "60"
        return busy
    try:
        url = await provider.authorization_url(state, binding.nonce(secret), binding.code_verifier(secret))
    except Unreachable as exc:
        log.warning("dashboard single sign-on: %s", exc)
        return refused(request, "The sign-in provider could not be reached. Try again in a moment.", status=502)
    response = web.HTTPSeeOther(url)
    # Lax, not Strict: it must come back with the provider's navigation to the callback.
    response.set_cookie(binding.COOKIE, secret, path=binding.COOKIE_PATH, httponly=True,
                        secure=request.app[DASHBOARD].secure, samesite="Lax", max_age=int(binding.STATE_SECONDS))
    raise response


async def callback(request: web.Request) -> web.StreamResponse:
    provider, dashboard = request.app.get(PROVIDER), request.app[DASHBOARD]
    if provider is None or dashboard.oidc is None:
        raise web.HTTPSeeOther(LOGIN)
    store = request.app[SOURCES].store
    state, secret = request.query.get("state", ""), request.cookies.get(binding.COOKIE, "")
    kept = await store.take_dashboard_oidc_state(hashed(state)) if state else None  # used up, whatever follows
    if kept is None or not secret or kept != hashed(secret):
        return refused(request, EXPIRED)
    if "error" in request.query:
        return refused(request, f"The sign-in provider did not sign you in: {request.query['error']}.")
    code = request.query.get("code", "")
    if not code:
        return refused(request, EXPIRED)
    try:
        claims = await provider.claims(code, binding.code_verifier(secret), binding.nonce(secret))
    except Unreachable as exc:
        log.warning("dashboard single sign-on: %s", exc)
        return refused(request, "The sign-in provider could not be reached. Try again in a moment.", status=502)
    except Refused as exc:
        log.warning("dashboard single sign-on refused: %s", exc)
        return refused(request, "The sign-in provider's answer could not be verified. Start again.")
    admin = admin_of(claims, dashboard.oidc, request.app[SOURCES].slack_admins)
    if admin is None:
        log.warning("dashboard single sign-on: %s is not an admin of the bot", who(claims))
        return refused(request, f"{who(claims)} is not an admin of this bot, or the provider has not verified "
                                "that address.")
    session = new_token()
    await store.open_dashboard_session(hashed(session), admin, datetime.now(UTC) + timedelta(
        seconds=dashboard.session_seconds))
    await store.record_dashboard_change(admin, "sign-in", "dashboard (single sign-on)", dashboard.oidc.issuer)
    response = render(request, "signed_in.html", target=f"{PREFIX}/")
    response.set_cookie(COOKIE, session, path=PREFIX, httponly=True, secure=dashboard.secure, samesite="Strict",
                        max_age=int(dashboard.session_seconds))
    forget_binding(response, dashboard.secure)
    return response


def refused(request: web.Request, problem: str, status: int = 403) -> web.Response:
    response = render(request, "refused.html", status=status, problem=problem)
    forget_binding(response, request.app[DASHBOARD].secure)
    return response


def forget_binding(response: web.StreamResponse, secure: bool) -> None:
    response.del_cookie(binding.COOKIE, path=binding.COOKIE_PATH, secure=secure, samesite="Lax")


def routes(router: web.UrlDispatcher) -> None:
    router.add_get("/oidc/start", start)
    router.add_get("/oidc/callback", callback)


PAGE = Page("oidc", routes)
