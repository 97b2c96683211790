"""The dashboard's pages, one module each: its handlers, and a `PAGE` saying where it sits in the header and
which routes it adds. `app.PAGES` lists them; a new page is a module here and a line there."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web


@dataclass(frozen=True)
class Page:
    """`name` marks the header's current link (`page=` in the template); `label` and `path` make that link
    (no link for a page without a label, e.g. signing in)."""

    name: str
    routes: Callable[[web.UrlDispatcher], None]
    label: str = ""
    path: str = ""
