"""Learning: per skill family, what a task that used its skills cost in tool calls and tokens, day by day,
against the skill-less baseline `skills stats` estimates savings from."""

from __future__ import annotations

from aiohttp import web

from hermes_gateway.dashboard import views_learning
from hermes_gateway.dashboard.pages import Page
from hermes_gateway.dashboard.rendering import SOURCES, render


async def learning(request: web.Request) -> web.Response:
    sources = request.app[SOURCES]
    return render(request, "learning.html", page="learning", families=await views_learning.families(sources),
                  lines=await views_learning.learning_lines(sources))


def routes(router: web.UrlDispatcher) -> None:
    router.add_get("/learning", learning)


PAGE = Page("learning", routes, "Learning", "/learning")
