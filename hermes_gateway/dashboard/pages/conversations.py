"""Conversations: the bots' sessions by last activity, a search over them, and one conversation as stored."""

from __future__ import annotations

from aiohttp import web

from hermes_gateway.dashboard import conversation_views
from hermes_gateway.dashboard.pages import Page
from hermes_gateway.dashboard.rendering import SOURCES, number, render

MAX_QUERY_CHARS = 500


async def conversations(request: web.Request) -> web.Response:
    """The list, or with `q` the search: an empty query is the list, a query of no words finds nothing."""
    sources, page = request.app[SOURCES], number(request.query.get("page"))
    query = request.query.get("q", "").strip()[:MAX_QUERY_CHARS]
    if query:
        found = await conversation_views.search(sources, query, page, any_word=request.query.get("any") == "1")
        return render(request, "conversations.html", page="conversations", query=query, search=found, listing=None,
                      per_page=conversation_views.HITS_PER_PAGE)
    listing = await conversation_views.sessions(sources, page)
    return render(request, "conversations.html", page="conversations", query="", search=None, listing=listing)


async def conversation(request: web.Request) -> web.Response:
    found = await conversation_views.conversation(request.app[SOURCES], int(request.match_info["session"]),
                                                  number(request.query.get("page")))
    if found is None:
        raise web.HTTPNotFound(text="No such conversation.\n")
    return render(request, "conversation.html", page="conversations", found=found)


def routes(router: web.UrlDispatcher) -> None:
    router.add_get("/conversations", conversations)
    router.add_get("/conversations/{session:\\d+}", conversation)


PAGE = Page("conversations", routes, "Conversations", "/conversations")
