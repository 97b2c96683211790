"""A fetched body as text the model can read: HTML as Markdown, text and JSON as they are; a body whose
bytes are binary (`sniff.binary_type`) is refused whatever its `Content-Type` says.

Markdown keeps what matters to a reader (headings, links, lists, tables, code) at a fraction of the
tokens of HTML. Scripts, styles and other markup that is never read are dropped before conversion.
`markdownify` (with BeautifulSoup) is imported on the first HTML page, not when the process starts; the
conversion is CPU work, so the tool runs it in a worker thread, off the event loop every chat shares.
"""

from __future__ import annotations

import codecs
import json
import re

from hermes_engine.web.fetch import Fetched
from hermes_engine.web.sniff import binary_type, served_as

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
UNREAD_TAGS = ("script", "style", "noscript", "template", "svg", "iframe", "object", "embed", "head", "title")
MAX_HTML_CHARS = 400_000  # of markup converted (after scripts and styles are cut): a few seconds of work
_BLANK_LINES = re.compile(r"\n{3,}")
_UNREAD_OPEN = re.compile(r"<(script|style|noscript|template|svg)\b", re.IGNORECASE)


class NotReadable(Exception):
    """A body web_fetch does not turn into text; the message is what the model reads."""


def is_text(media: str) -> bool:
    return (media.startswith("text/") or media in ("application/json", "application/xml", "application/javascript")
            or media.endswith(("+json", "+xml")))


def _decode(fetched: Fetched) -> str:
    charset = fetched.charset or "utf-8"
    try:
        codecs.lookup(charset)
    except LookupError:
        charset = "utf-8"
    return fetched.body.decode(charset, errors="replace")


def _drop_unread(html: str) -> str:
    """The markup without scripts, styles and the like, in one pass (an element never closed runs to the end,
    as a browser reads it). Most of a modern page's bytes go here, before the costly parse."""
    lower = html.lower()
    kept: list[str] = []
    at = 0
    while (found := _UNREAD_OPEN.search(html, at)) is not None:
        kept.append(html[at:found.start()])
        close = lower.find(f"</{found.group(1).lower()}", found.end())
        end = lower.find(">", close) if close >= 0 else -1
        at = len(html) if end < 0 else end + 1
    kept.append(html[at:])
    return "".join(kept)


def html_to_markdown(html: str) -> str:
    """Readable Markdown of an HTML page, its title first. Parsing and converting cost about a second per
    100 KB of markup, so only the first `MAX_HTML_CHARS` of it are converted, and the result says so."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    html = _drop_unread(html)
    cut = len(html) > MAX_HTML_CHARS
    soup = BeautifulSoup(html[:MAX_HTML_CHARS], "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(UNREAD_TAGS):
        tag.decompose()
    text = MarkdownConverter(heading_style="ATX", bullets="-", strip=["img"]).convert_soup(soup)
    text = _BLANK_LINES.sub("\n\n", "\n".join(line.rstrip() for line in text.splitlines())).strip()
    if cut:
        text += f"\n\n[the page's markup is longer than {MAX_HTML_CHARS:,} characters; only its start was read]"
    return f"# {title}\n\n{text}" if title and not text.startswith("#") else text


def readable(fetched: Fetched) -> str:
    """The body as text for the model; `NotReadable` for images, PDFs, archives and other binaries."""
    real = binary_type(fetched)
    if real is not None:
        what = "binary data of a type web_fetch does not know" if real == "application/octet-stream" else real
        raise NotReadable(_refusal(fetched.url, what + served_as(fetched, real)))
    media = fetched.content_type
    if media in HTML_TYPES:
        return html_to_markdown(_decode(fetched))
    if media == "application/json" or media.endswith("+json"):
        text = _decode(fetched)
        if fetched.truncated:
            return text
        try:
            return json.dumps(json.loads(text), ensure_ascii=False, indent=1)
        except ValueError:
            return text
    if is_text(media) or not media:
        return _decode(fetched)
    raise NotReadable(_refusal(fetched.url, media))


def _refusal(url: str, what: str) -> str:
    return f"Error: refused: {url} is {what}, not a web page; web_fetch reads HTML, text and JSON only."


__all__ = ["NotReadable", "html_to_markdown", "is_text", "readable"]
