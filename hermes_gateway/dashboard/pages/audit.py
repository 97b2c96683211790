"""Changes: the audit of what admins did through the dashboard, newest first."""

from __future__ import annotations

from aiohttp import web

from hermes_gateway.dashboard.pages import Page
from hermes_gateway.dashboard.rendering import SOURCES, render


async def audit(request: web.Request) -> web.Response:
    changes = await request.app[SOURCES].store.dashboard_changes(limit=200)
    return render(request, "audit.html", page="audit", changes=changes)


def routes(router: web.UrlDispatcher) -> None:
    router.add_get("/audit", audit)


PAGE = Page("audit", routes, "Changes", "/audit")
