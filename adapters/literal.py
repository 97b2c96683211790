"""Which characters of the model's Markdown are text, so each renderer can show them as written.

The model writes CommonMark (with GitHub's tables and strikethrough), but it means only the Markdown that
chat platforms can show: emphasis, code, links, lists, quotes, headings, tables. Everything else it writes
is text, even where a Markdown parser would read markup: ``<branch-name>`` is not an HTML tag, ``&amp;``
is not a character reference, ``$x$`` is not math, ``||x||`` is not a spoiler, and a backslash is a
backslash (``\\*`` shows both characters). A renderer that hands such text to a parser, or to a platform
that reads its own markup, must escape it first, or characters vanish (telegramify-markdown drops what its
parser reads as HTML: "Run git checkout <branch-name> to switch" would read "Run git checkout  to switch").

`scan` asks a CommonMark parser (pyromark, which telegramify-markdown parses with) where each character
stands. `TEXT` is what the reader reads (text, raw HTML, math, an unused link definition), `VERBATIM` is
what no escape may touch (the inside of code, a link's address), `MARKUP` is the rest: the delimiters of
what renders, and the backslashes CommonMark would take as escapes or line breaks.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from enum import IntEnum
from typing import Any

__all__ = ["Kind", "escape_for_commonmark", "escape_for_discord", "protect", "scan"]


class Kind(IntEnum):
    """Where a character stands in the model's Markdown (see the module's docstring)."""

    MARKUP = 0
    TEXT = 1
    VERBATIM = 2


_LEAVES = ("Text", "InlineHtml", "Html", "InlineMath", "DisplayMath")
_AUTOLINKS = ("Autolink", "Email")
_DEFINITION = re.compile(r"^ {0,3}\[((?:[^\]\\]|\\.)+)\]:", re.MULTILINE)
_ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _options() -> Any:
    import pyromark

    flags = pyromark.Options
    return flags.ENABLE_TABLES | flags.ENABLE_STRIKETHROUGH | flags.ENABLE_TASKLISTS | flags.ENABLE_MATH


def scan(markdown: str) -> list[Kind]:
    """The `Kind` of every character of `markdown`, as a CommonMark reading of it has them."""
    import pyromark

    kinds = [Kind.MARKUP] * len(markdown)
    char_at = _char_index(markdown)
    in_code = in_autolink = 0
    in_table = False
    used_labels: set[str] = set()
    for payload, where in pyromark.events_with_range(markdown, options=_options()):
        start, end = char_at(where["start"]), char_at(where["end"])
        if not isinstance(payload, dict):
            continue
        opened, closed = payload.get("Start"), payload.get("End")
        if opened is not None or closed is not None:
            tag = opened if opened is not None else closed
            step = 1 if opened is not None else -1
            if isinstance(tag, dict) and "CodeBlock" in tag or tag == "CodeBlock":
                in_code += step
            elif isinstance(tag, dict) and "Link" in tag and tag["Link"]["link_type"] in _AUTOLINKS:
                in_autolink += step
            elif tag == "Link" and in_autolink:
                in_autolink -= 1
            elif isinstance(tag, dict) and "Table" in tag or tag == "Table":
                in_table = step > 0
            link = tag.get("Link", tag.get("Image")) if isinstance(tag, dict) else None
            if link is not None and opened is not None:
                if link.get("id"):
                    used_labels.add(_label(link["id"]))
                if link["link_type"] == "Inline" and (opening := markdown.rfind("](", start, end)) >= 0:
                    kinds[opening + 2:end - 1] = [Kind.VERBATIM] * max(0, end - opening - 3)  # (address)
            continue
        if "Code" in payload:
            ticks = len(markdown[start:end]) - len(markdown[start:end].lstrip("`"))
            kinds[start + ticks:end - ticks] = [Kind.VERBATIM] * max(0, end - start - 2 * ticks)
        elif any(leaf in payload for leaf in _LEAVES):
            leaf = Kind.VERBATIM if in_code or in_autolink else Kind.TEXT
            kinds[start:end] = [leaf] * (end - start)
        if in_table and "Text" in payload and start > 0 and markdown[start - 1] == "\\" and markdown[start] == "|":
            kinds[start - 1:start + 1] = [Kind.VERBATIM] * 2  # an escaped pipe: how a table cell holds one
    for line in _DEFINITION.finditer(markdown):
        if kinds[line.start()] == Kind.MARKUP and _label(line.group(1)) not in used_labels:
            stop = markdown.find("\n", line.start())
            stop = len(markdown) if stop < 0 else stop
            kinds[line.start():stop] = [Kind.TEXT] * (stop - line.start())  # unused, so it would vanish
    return kinds


def escape_for_commonmark(markdown: str) -> str:
    """`markdown` with its text backslash-escaped, so a CommonMark reading shows it as written and renders
    only the Markdown the model meant (Telegram's renderer reads it so)."""

    def escape(char: str, kind: Kind) -> str:
        if kind == Kind.TEXT and char in _ASCII_PUNCTUATION or kind == Kind.MARKUP and char == "\\":
            return "\\" + char
        return char

    return "".join(escape(char, kind) for char, kind in zip(markdown, scan(markdown), strict=True))


_DISCORD_MARKS = frozenset("\\*_~`")  # and `|` beside another, and what starts a line: `-+>#`


def escape_for_discord(markdown: str) -> str:
    """`markdown` as Discord shows it as written: its text's Discord Markdown characters escaped (Discord
    removes a backslash before any character that is not a letter, digit or space), markup left to
    render. Discord's own ``<@id>``, ``<#id>`` and ``<t:…>`` are its platform's syntax, left as they are."""
    kinds = scan(markdown)
    out: list[str] = []
    line_start = True
    for i, (char, kind) in enumerate(zip(markdown, kinds, strict=True)):
        if kind == Kind.MARKUP and char == "\\" or kind == Kind.TEXT and (
                char in _DISCORD_MARKS or line_start and char in "-+>#"
                or char == "|" and "||" in markdown[max(0, i - 1):i + 2]):
            out.append("\\")
        out.append(char)
        line_start = char == "\n" or line_start and char in " \t"
    return "".join(out)


def protect(markdown: str, marks: str) -> tuple[str, Callable[[str], str]]:
    """Swap each character of `marks` that is text, code or a link's address for a private stand-in, so a
    converter that reads Markdown with regular expressions cannot take it for markup; the function returned
    puts them back. Without a free stand-in the text is returned as it is."""
    stand_ins = {mark: chr(0xF0000 + i) for i, mark in enumerate(marks)}
    if any(stand_in in markdown for stand_in in stand_ins.values()):
        return markdown, lambda converted: converted
    kinds = scan(markdown)
    swapped = "".join(stand_ins[char] if kind != Kind.MARKUP and char in stand_ins else char
                      for char, kind in zip(markdown, kinds, strict=True))
    back = str.maketrans({stand_in: mark for mark, stand_in in stand_ins.items()})
    return swapped, lambda converted: converted.translate(back)


def _label(label: str) -> str:
    return " ".join(label.split()).casefold()


def _char_index(text: str) -> Callable[[int], int]:
    """UTF-8 byte offset (as the parser reports them) → index in `text`."""
    if text.isascii():
        return lambda offset: offset
    starts: list[int] = []
    offset = 0
    for char in text:
        starts.append(offset)
        offset += len(char.encode("utf-8"))
    return lambda byte: bisect_right(starts, byte) - 1 if byte < offset else len(text)
