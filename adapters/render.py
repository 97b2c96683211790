"""Final-frame renderers: the model's Markdown turned into what each platform displays.

Interim (streaming) frames are sent as plain text; only the final is rendered, one split part at a time
(see `adapters.part_rendering.PartRenderer`, which splits the Markdown source with headroom first, renders each
part, and re-splits any part whose rendering came out over the limit).

A renderer returns a `Rendered`: the text to send and, when the platform needs more than a string,
`extras` that the adapter passes to its API call. `Rendered` unpacks as ``text, extras``.

Every renderer shows the model's text as written and renders only the Markdown it meant
(`adapters.literal`: ``<branch-name>``, ``&amp;``, ``$x$``, ``||x||`` and backslashes are text).

Telegram — `render_telegram` uses telegramify-markdown 1.x `convert()`, which returns **plain text plus
MessageEntity objects** (offsets in UTF-16 units). Its parser drops what it reads as HTML and decodes
character references, so the text is escaped for it first (`escape_for_commonmark`), and its LaTeX
conversion is off: ``\\alpha`` stays as written. Entities are the most robust choice for final frames:
nothing is escaped, so there is no "can't parse entities" failure mode from stray ``_*[]()~>#+-=|{}.!``
in model output (the classic MarkdownV2 failure), and the length Telegram checks (text after entity
parsing, ≤ 4,096 UTF-16 units) is exactly ``measure(rendered.text, "utf16")``. The Telegram adapter sends
it with **no parse_mode**::

    text, extras = render_telegram(markdown)
    entities = MessageEntity.de_list(list(extras.get("entities", ())), bot) or None
    await bot.send_message(chat_id, text, entities=entities, parse_mode=None, ...)
    await bot.edit_message_text(text, chat_id=chat_id, message_id=mid, entities=entities, parse_mode=None)

Set ``parse_mode=None`` explicitly if the application has a default parse mode (`Defaults`). A Bad
Request about entities (for example an invalid URL in a ``text_link``) should be classified by the
adapter's `is_markup_error`, and `adapters.delivery.Outbound` then resends the part as plain text.

Slack — `render_slack` escapes ``& < >`` (so model output can never produce ``<!channel>`` or a fake
link) and converts with markdown_to_mrkdwn; send it as ``text`` (mrkdwn is on by default). The converter
works line by line with regular expressions that know neither code nor escapes (it would make
``a * b * c`` italic and the ``**`` inside `` `**kwargs` `` bold), so it is handed the text's, the code's and
the link addresses' Markdown characters as private stand-ins, put back after (`adapters.literal.protect`). Slack's
mrkdwn has no escape: a text pair like ``\\*x\\*`` may still read as bold there.

Discord — Markdown is native: `render_discord` escapes the text's Discord Markdown characters
(`escape_for_discord`) and closes an unclosed fence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from adapters.literal import escape_for_commonmark, escape_for_discord, protect
from adapters.splitting import find_fences

__all__ = ["Rendered", "render_discord", "render_plain", "render_slack", "render_telegram", "escape_slack"]

_NO_EXTRAS: Mapping[str, Any] = MappingProxyType({})


class Rendered(NamedTuple):
    """A rendered part. `text` is what counts against the platform limit."""

    text: str
    extras: Mapping[str, Any] = _NO_EXTRAS

    @classmethod
    def of(cls, value: str | Rendered) -> Rendered:
        return value if isinstance(value, Rendered) else cls(str(value))


# --- Telegram ----------------------------------------------------------------------------------------

_telegram_config = None


def _telegram_render_config() -> Any:
    """An isolated telegramify config, so nothing else in the process that mutates the library's
    global config changes our output."""
    global _telegram_config
    if _telegram_config is None:
        from telegramify_markdown.config import RenderConfig

        _telegram_config = RenderConfig.isolated()
    return _telegram_config


def render_telegram(markdown: str) -> Rendered:
    """Markdown → (plain text, ``{"entities": (Bot API entity dicts, ...)}``).

    `extras` is empty when there is no formatting. Entity dicts are Bot API JSON shape
    (``{"type": "bold", "offset": 0, "length": 4}``, ``"language"`` on ``pre``, ``"url"`` on
    ``text_link``); python-telegram-bot turns them into objects with ``MessageEntity.de_list``.
    """
    from telegramify_markdown import convert

    text, entities = convert(escape_for_commonmark(markdown), latex_escape=False, config=_telegram_render_config())
    dicts = tuple(entity.to_dict() for entity in entities)
    return Rendered(text, MappingProxyType({"entities": dicts}) if dicts else _NO_EXTRAS)


# --- Slack -------------------------------------------------------------------------------------------

_QUOTE_MARKERS = re.compile(r"^([ \t]*(?:&gt;[ \t]?)+)")


def escape_slack(text: str) -> str:
    """Escape Slack's control characters (``&``, ``<``, ``>``) everywhere, but keep ``>`` that starts a
    Markdown blockquote outside code, so quotes still render."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    code_lines = _code_line_numbers(text)
    lines = escaped.split("\n")
    for i, line in enumerate(lines):
        if i in code_lines:
            continue
        m = _QUOTE_MARKERS.match(line)
        if m:
            lines[i] = m.group(1).replace("&gt;", ">") + line[m.end():]
    return "\n".join(lines)


def _code_line_numbers(text: str) -> set[int]:
    numbers: set[int] = set()
    for fence in find_fences(text):
        first = text.count("\n", 0, fence.open_start)
        last = text.count("\n", 0, fence.close_start)
        numbers.update(range(first, last + 1))
    return numbers


def render_slack(markdown: str) -> str:
    """Markdown → Slack mrkdwn (bold ``*x*``, links ``<url|text>``, lists ``•``, code kept)."""
    from markdown_to_mrkdwn import SlackMarkdownConverter

    protected, put_back = protect(markdown, _MRKDWN_MARKS)
    # The converter keeps per-call state, so one per call (it is cheap).
    return put_back(str(SlackMarkdownConverter().convert(escape_slack(protected))))


_MRKDWN_MARKS = "*_~`[]()!#|-"


# --- Discord -----------------------------------------------------------------------------------------

def render_discord(markdown: str) -> str:
    """Discord renders Markdown itself: the text is escaped so it shows as written, every fence closed."""
    return _close_open_fence(escape_for_discord(markdown.rstrip()))


def render_plain(markdown: str) -> str:
    """For platforms without formatting (console): the Markdown as written, fences balanced."""
    return _close_open_fence(markdown.rstrip())


def _close_open_fence(text: str) -> str:
    fences = find_fences(text)
    if fences and not fences[-1].closed:
        return text + "\n" + fences[-1].closer
    return text
