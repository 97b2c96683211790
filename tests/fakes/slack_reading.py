"""What a Slack channel shows for a message's `text`: mrkdwn as Slack displays it.

`read(text, mrkdwn=True)` follows Slack's documented formatting (``api.slack.com/reference/surfaces/
formatting``): ``<…>`` are control sequences (``<url|label>`` shows the label, ``<url>`` the address,
``<@U123>`` a mention, shown here as ``@U123``, ``<#C123>`` a channel, ``<!here>`` a special mention);
``*bold*``, ``_italic_``, ``~strike~``, `` `code` `` and fenced blocks drop their marks; ``>`` (or ``&gt;``)
at a line's start quotes it; finally ``&lt; &gt; &amp;``, the only escapes Slack has, are decoded. A mark
pairs only at word edges (Slack does not format inside a word: ``snake_case`` stays), and a pair holds no
line break. With ``mrkdwn=False`` the marks stay and only control sequences and escapes are read.
"""

from __future__ import annotations

import re

__all__ = ["read"]

_CONTROL = re.compile(r"<([^<>\n|]+)(?:\|([^<>\n]*))?>")
_FENCE = re.compile(r"```(.*?)```", re.DOTALL)
_CODE = re.compile(r"`([^`\n]+)`")
_QUOTE = re.compile(r"^(?:>|&gt;) ?", re.MULTILINE)
_ESCAPE = re.compile(r"&(lt|gt|amp);")
_SPECIAL = {"here": "@here", "channel": "@channel", "everyone": "@everyone"}


def _pair(mark: str) -> re.Pattern[str]:
    m = re.escape(mark)
    return re.compile(rf"(?<![\w{m}]){m}(?=[^\s{m}])([^\n{m}]*?[^\s{m}]){m}(?![\w{m}])")


_PAIRS = [_pair("*"), _pair("_"), _pair("~")]


def read(text: str, mrkdwn: bool = True) -> str:
    """The text a person reads in Slack for a message sent with `text`."""
    kept: list[str] = []

    def keep(shown: str) -> str:
        kept.append(shown)
        return f"\x00{len(kept) - 1}\x00"

    if mrkdwn:
        text = _FENCE.sub(lambda m: keep(m.group(1).strip("\n")), text)
        text = _CODE.sub(lambda m: keep(m.group(1)), text)
    text = _CONTROL.sub(lambda m: keep(_control(m.group(1), m.group(2))), text)
    if mrkdwn:
        text = _QUOTE.sub("", text)
        for pattern in _PAIRS:
            while True:
                text, count = pattern.subn(r"\1", text)
                if not count:
                    break
    text = re.sub(r"\x00(\d+)\x00", lambda m: kept[int(m.group(1))], text)
    return _ESCAPE.sub(lambda m: {"lt": "<", "gt": ">", "amp": "&"}[m.group(1)], text)


def _control(target: str, label: str | None) -> str:
    if target.startswith(("@", "#")):
        return label or target  # a person's or a channel's name, as the label or id
    if target.startswith("!"):
        name = target[1:].split("^", 1)[0]
        return label or _SPECIAL.get(name, "@" + target[1:])
    return label if label else target
