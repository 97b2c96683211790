"""What every dashboard request passes through, in order: the `Host` check, the security headers, and the
session (with the CSRF token and the Origin on every POST).

The session check is a middleware on the whole `/admin` application, not a decorator a handler may lack:
a route added later is guarded without anyone remembering to. Only `PUBLIC` paths (the sign-in page, the
two ends of single sign-on and the package's own CSS and JS) answer without a session, and they show no data.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Middleware

from hermes_engine.ports.dashboard import DashboardStore
from hermes_gateway.dashboard.config import Dashboard
from hermes_gateway.dashboard.tokens import COOKIE, csrf_matches, csrf_token, hashed

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

PREFIX = "/admin"
LOGIN = f"{PREFIX}/login"
STATIC = f"{PREFIX}/static/"
PUBLIC = (LOGIN, f"{PREFIX}/oidc/start", f"{PREFIX}/oidc/callback", STATIC)

# `same-origin`: a sign-in link's token never reaches another site in a Referer, and form POSTs keep their
# real `Origin` (under `no-referrer` browsers send `Origin: null`).
# No inline script or style anywhere: a name holding markup that escaping somehow missed still cannot run.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
           "X-Frame-Options": "DENY", "Cache-Control": "no-store"}


@dataclass(frozen=True)
class Visitor:
    """The signed-in admin of a request: who, the session cookie's hash and the CSRF token its forms carry."""

    admin: str
    session_hash: str
    csrf: str


VISITOR = web.RequestKey("visitor", Visitor)


def visitor(request: web.Request) -> Visitor:
    found = request.get(VISITOR)
    assert found is not None, "a guarded route was reached without a session"
    return found


def is_public(path: str) -> bool:
    return path in PUBLIC[:-1] or path.startswith(STATIC)


def middlewares(store: DashboardStore, dashboard: Dashboard) -> list[Middleware]:
    @web.middleware
    async def host_check(request: web.Request, handler: Handler) -> web.StreamResponse:
        """A page reached under another name (DNS rebinding: evil.example resolving to this server) is refused."""
        if dashboard.normal_host(request.host or "") != dashboard.host:
            return _with_headers(web.Response(status=421, text="This dashboard is served at its own address only.\n"))
        return await handler(request)

    @web.middleware
    async def headers(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            _with_headers(exc)
            raise
        return _with_headers(response)

    @web.middleware
    async def session(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "POST" and not same_origin(request, dashboard):
            return web.Response(status=403, text="Cross-site requests are refused.\n")
        if is_public(request.path):
            return await handler(request)
        token = request.cookies.get(COOKIE, "")
        found = await store.dashboard_session(hashed(token)) if token else None
        if found is None:
            if request.method in ("GET", "HEAD"):
                raise web.HTTPSeeOther(LOGIN)
            return web.Response(status=401, text="Sign in first: send /dashboard to the bot in a direct message.\n")
        if request.method == "POST":
            form = await request.post()
            offered = form.get("csrf")
            if not csrf_matches(token, offered if isinstance(offered, str) else None):
                return web.Response(status=403, text="This form has expired; reload the page and try again.\n")
        request[VISITOR] = Visitor(found.admin, hashed(token), csrf_token(token))
        return await handler(request)

    return [host_check, headers, session]


def same_origin(request: web.Request, dashboard: Dashboard) -> bool:
    """A POST's `Origin` (browsers send it on every form POST) is the dashboard's own, or absent (a client
    that is no browser, which has no cookie of an admin to abuse)."""
    origin = request.headers.get("Origin")
    if origin is None:
        return request.headers.get("Sec-Fetch-Site", "same-origin") in ("same-origin", "none")
    return origin.lower() == dashboard.origin


def _with_headers(response: web.StreamResponse) -> web.StreamResponse:
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    return response
