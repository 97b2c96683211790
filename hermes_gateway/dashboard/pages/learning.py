"""Learning: per skill family, what a task that used its skills cost in tool calls and tokens, day by day,
against the skill-less baseline `skills stats` estimates savings from."""

from __future__ import annotations

import weakref

from aiohttp import web
from markupsafe import Markup

from hermes_gateway.dashboard import views_learning
from hermes_gateway.dashboard.guard import PREFIX
from hermes_gateway.dashboard.pages import Page
from hermes_gateway.dashboard.rendering import SOURCES, TEMPLATES, render

# A family's section drawn once per reading of the usage (its charts and table are hundreds of elements;
# a family object lives as long as the figures it holds are current).
_drawn: weakref.WeakKeyDictionary[views_learning.Family, Markup] = weakref.WeakKeyDictionary()


def _draw(request: web.Request, family: views_learning.Family) -> Markup:
    found = _drawn.get(family)
    if found is None:
        template = request.app[TEMPLATES].get_template("learning_family.html")
        found = _drawn[family] = Markup(template.render(fam=family, prefix=PREFIX))
    return found


async def learning(request: web.Request) -> web.Response:
    sources = request.app[SOURCES]
    families = await views_learning.families(sources)
    return render(request, "learning.html", page="learning", families=[_draw(request, f) for f in families],
                  lines=await views_learning.learning_lines(sources))


def routes(router: web.UrlDispatcher) -> None:
    router.add_get("/learning", learning)


PAGE = Page("learning", routes, "Learning", "/learning")
