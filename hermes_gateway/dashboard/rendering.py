"""How a page is drawn: the application's keys, the Jinja2 environment (autoescaped: what people wrote is
shown as text) and `render`, which every page's handler answers with."""

from __future__ import annotations

import functools
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from hermes_gateway.dashboard import views
from hermes_gateway.dashboard.config import Dashboard
from hermes_gateway.dashboard.guard import PREFIX, VISITOR

if TYPE_CHECKING:
    import jinja2

HERE = Path(__file__).parent
SOURCES = web.AppKey("sources", views.Sources)
DASHBOARD = web.AppKey("dashboard", Dashboard)
NAV = web.AppKey("nav", tuple)  # ((label, path, page name), ...) in the order the header shows them
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


class Templates:
    """The Jinja2 environment, made (and Jinja2 imported) at the first page drawn: a gateway whose dashboard
    nobody opens never loads it (about 9 MB)."""

    def get_template(self, name: str) -> jinja2.Template:
        return self._environment().get_template(name)

    @functools.cache  # noqa: B019 - one per application, which lives as long as the process
    def _environment(self) -> jinja2.Environment:
        import jinja2

        env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                                 autoescape=True, undefined=jinja2.StrictUndefined, enable_async=False)
        env.filters["visible"] = visible
        env.filters["when"] = lambda at: at.strftime("%Y-%m-%d %H:%M UTC") if at else ""
        return env


TEMPLATES = web.AppKey("templates", Templates)


def templates() -> Templates:
    return Templates()


def render(request: web.Request, name: str, status: int = 200, **context: Any) -> web.Response:
    found = request.get(VISITOR)
    page = request.app[TEMPLATES].get_template(name).render(visitor=found, prefix=PREFIX, nav=request.app[NAV],
                                                           single_sign_on=request.app[DASHBOARD].oidc is not None,
                                                           **context)
    return web.Response(text=page, status=status, content_type="text/html", charset="utf-8")


def number(text: str | None, default: int = 1) -> int:
    """A page number or id from a query string; anything else is the default."""
    return int(text) if text and text.isdigit() else default
