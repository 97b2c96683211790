"""What a Discord channel shows for a message's `content`: its Markdown as Discord displays it.

`read(content)` follows Discord's Markdown (``support.discord.com`` "Markdown Text 101" and the rules of
the simple-markdown parser its client uses): code blocks (a first line that is one word names the
language and is not shown) and inline code are shown as written; outside code a backslash before any
character that is not a letter, digit or space is removed and that character shown as it is; ``#``,
``##``, ``###`` and ``-#`` at a line's start make a heading, ``>`` and ``>>>`` a quote, ``-``/``*``
a bullet (shown as ``•``); ``**bold**``, ``__underline__``, ``*italic*``, ``_italic_`` (at word edges),
``~~strike~~`` and ``||spoiler||`` drop their marks; ``[label](url)`` shows the label, ``<url>`` the
address; ``<@id>``, ``<@!id>``, ``<@&id>``, ``<#id>`` are mentions (shown as ``@id``, ``#id``),
``<:name:id>`` a custom emoji (``:name:``) and ``<t:seconds>`` a time (``<time>``).
"""

from __future__ import annotations

import re

__all__ = ["read"]

_FENCE = re.compile(r"```(?:([A-Za-z0-9_+.#-]+)\n)?(.*?)```", re.DOTALL)
_CODE = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_ESCAPE = re.compile(r"\\([^0-9A-Za-z\s])")
_LINE = re.compile(r"^(?:#{1,3} |-# |>>> |> )", re.MULTILINE)
_BULLET = re.compile(r"^(\s*)[-*] ", re.MULTILINE)
_INLINE = [
    re.compile(r"\*\*(.+?)\*\*(?!\*)", re.DOTALL),
    re.compile(r"__(.+?)__(?!_)", re.DOTALL),
    re.compile(r"\*(?=\S)(.+?)(?<=\S)\*(?!\*)", re.DOTALL),
    re.compile(r"(?<!\w)_(.+?)_(?!\w)", re.DOTALL),
    re.compile(r"~~(.+?)~~", re.DOTALL),
    re.compile(r"\|\|(.+?)\|\|", re.DOTALL),
    re.compile(r"\[([^\]\n]+)\]\(<?(?:https?://)[^)\s]+>?\)"),
]
_ANGLE = re.compile(r"<(?:(https?://[^\s>]+)|(@!?|@&|#)(\d+)|a?:(\w+):\d+|t:-?\d+(?::[tTdDfFR])?)>")


def read(content: str) -> str:
    """The text a person reads in Discord for a message with `content`."""
    kept: list[str] = []

    def keep(shown: str) -> str:
        kept.append(shown)
        return f"\x00{len(kept) - 1}\x00"

    text = _FENCE.sub(lambda m: keep(m.group(2).strip("\n")), content)
    text = _CODE.sub(lambda m: keep(m.group(2).strip(" ") if m.group(1) == "``" else m.group(2)), text)
    text = _ESCAPE.sub(lambda m: keep(m.group(1)), text)
    text = _ANGLE.sub(lambda m: keep(_angle(m)), text)
    text = _BULLET.sub(r"\1• ", _LINE.sub("", text))
    for pattern in _INLINE:
        while True:
            text, count = pattern.subn(r"\1", text)
            if not count:
                break
    while "\x00" in text:
        text = re.sub(r"\x00(\d+)\x00", lambda m: kept[int(m.group(1))], text)
    return text


def _angle(match: re.Match[str]) -> str:
    url, sigil, number, emoji = match.group(1), match.group(2), match.group(3), match.group(4)
    if url:
        return url
    if sigil:
        return ("#" if sigil == "#" else "@") + number
    return f":{emoji}:" if emoji else "<time>"
