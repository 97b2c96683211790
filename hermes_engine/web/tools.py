"""The `web` toolset: `web_fetch` (a page as Markdown) and `web_search` (when a provider is configured).

What they return comes from outside, so it reaches the model marked by `policy.untrusted.mark`, and the
turn's memory and skill writes scan strictly (`ToolContext.untrusted`). A long page is returned in parts of
`max_chars`; the note at the end of each part names the `offset` of the next. An image (by its bytes, not
its `Content-Type`) is described and attached for the model to look at; other binaries are refused.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpcore2

from hermes_engine.policy.untrusted import mark
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.tools import ToolContext, ToolResult
from hermes_engine.tools.registry import tool
from hermes_engine.web.addresses import Refused
from hermes_engine.web.convert import NotReadable, readable
from hermes_engine.web.fetch import Fetcher
from hermes_engine.web.search import SearchFailed, SearchProvider
from hermes_engine.web.sniff import binary_type, image

TOOL_TIME_LIMIT = 120.0  # above any fetch's own limit, which ends a fetch with a clearer message
MAX_SEARCH_RESULTS = 10


@dataclass
class WebAccess:
    """What the web tools use, reached through `ToolContext.services` (`WEB`)."""

    fetcher: Fetcher
    search: SearchProvider | None = None
    max_chars: int = 20_000


WEB: ServiceKey[WebAccess] = ServiceKey("web")


def _access(ctx: ToolContext) -> WebAccess | None:
    return ctx.services.get(WEB)


def _part(text: str, offset: int, max_chars: int) -> tuple[str, str]:
    """The slice of `text` at `offset`, and the note saying what was left out."""
    end = min(len(text), offset + max_chars)
    if offset == 0 and end == len(text):
        return text, ""
    note = f"[characters {offset:,}–{end:,} of {len(text):,}"
    note += f"; call web_fetch with offset={end} for the rest]" if end < len(text) else "; the end of the page]"
    return text[offset:end], note


@tool(toolset="web", time_limit=TOOL_TIME_LIMIT)
async def web_fetch(url: str, ctx: ToolContext, offset: int = 0) -> ToolResult:
    """Read a web page (http/https) as Markdown; text and JSON come back as they are, an image as an image.

    Args:
        url: the full URL, e.g. https://example.com/page
        offset: character to start at, for the next part of a long page
    """
    access = _access(ctx)
    if access is None:
        return ToolResult("Error: web access is not available here.", is_error=True)
    if not isinstance(offset, int) or offset < 0:
        return ToolResult("Error: offset must be a whole number of characters, 0 or more.", is_error=True)
    limits = access.fetcher.limits
    try:
        fetched = await access.fetcher.fetch(url)
        if fetched.status >= 400:
            return ToolResult(f"Error: {fetched.url} answered HTTP {fetched.status}.", is_error=True)
        if (real := binary_type(fetched) or "").startswith("image/"):
            ctx.untrusted = True  # a picture can carry words meant for the model too
            seen = image(fetched, real)
            return ToolResult(mark(seen.description, fetched.url), images=seen.parts)
        text = await asyncio.to_thread(readable, fetched)  # parsing is CPU work: off the shared event loop
    except (Refused, NotReadable) as exc:
        return ToolResult(str(exc), is_error=True)
    except TimeoutError:
        return ToolResult(f"Error: {url} did not finish loading within {limits.time_limit:g} s; it was cut off.",
                          is_error=True)
    except (httpcore2.NetworkError, httpcore2.ProtocolError, httpcore2.TimeoutException, OSError) as exc:
        if "CERTIFICATE_VERIFY_FAILED" in str(exc):
            return ToolResult(f"Error: refused: {url} presented a certificate that could not be verified "
                              f"({_verify_detail(exc)}); the page was not read.", is_error=True)
        return ToolResult(f"Error: {url} could not be fetched ({type(exc).__name__}: {exc}).", is_error=True)
    if offset and offset >= len(text):
        return ToolResult(f"Error: offset {offset} is past the end of the page ({len(text):,} characters).",
                          is_error=True)
    part, note = _part(text, offset, access.max_chars)
    if fetched.truncated:
        note += (f"\n[the page is larger than {limits.max_bytes:,} bytes; only its first "
                 f"{limits.max_bytes:,} bytes were read]")
    ctx.untrusted = True  # the model reads it next: this turn's writes to memory and skills scan strictly
    return ToolResult(mark(f"{part}\n{note}".rstrip(), fetched.url))


def _verify_detail(exc: Exception) -> str:
    """OpenSSL's reason ("self-signed certificate", "Hostname mismatch, ...") without the code around it."""
    text = str(exc)
    return text.split("certificate verify failed:", 1)[-1].split("(_ssl.c", 1)[0].strip(" ()") or text


@tool(toolset="web", time_limit=TOOL_TIME_LIMIT)
async def web_search(query: str, ctx: ToolContext, limit: int = 5) -> ToolResult:
    """Search the web; returns titles, URLs and snippets (read a result with web_fetch).

    Args:
        query: what to search for
        limit: number of results, 1-10
    """
    access = _access(ctx)
    if access is None or access.search is None:
        return ToolResult("Error: web search is not configured here.", is_error=True)
    if not query.strip():
        return ToolResult("Error: give a search query.", is_error=True)
    limit = max(1, min(MAX_SEARCH_RESULTS, int(limit)))
    try:
        hits = await access.search.search(query.strip(), limit)
    except SearchFailed as exc:
        return ToolResult(str(exc), is_error=True)
    if not hits:
        return ToolResult(f"No results for {query!r}.")
    lines = [f"{i}. [{h.title}]({h.url})\n   {h.snippet}".rstrip() for i, h in enumerate(hits, 1)]
    ctx.untrusted = True
    return ToolResult(mark("\n".join(lines), f"web search: {query}"))


__all__ = ["WebAccess", "web_fetch", "web_search"]
