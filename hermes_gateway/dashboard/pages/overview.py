"""Overview: what this gateway is doing now, at a glance."""

from __future__ import annotations

from aiohttp import web

from hermes_gateway.dashboard import views
from hermes_gateway.dashboard.pages import Page
from hermes_gateway.dashboard.rendering import SOURCES, render
from hermes_gateway.dashboard.views_learning import learning_lines


async def overview(request: web.Request) -> web.Response:
    sources = request.app[SOURCES]
    return render(request, "overview.html", page="overview", overview=await views.overview(sources),
                  learning=await learning_lines(sources))


def routes(router: web.UrlDispatcher) -> None:
    router.add_get("/", overview)


PAGE = Page("overview", routes, "Overview", "/")
