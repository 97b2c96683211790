"""The fake Telegram reads formatting as Telegram does (`fakes.telegram_reading`): what it cannot parse is a
400 "can't parse entities", never silently dropped."""

from __future__ import annotations

import pytest
from fakes import telegram_reading


def test_the_telegram_reader_refuses_html_it_cannot_parse_as_telegram_does() -> None:
    with pytest.raises(telegram_reading.CantParse, match='Unsupported start tag "branch-name" at byte offset 17'):
        telegram_reading.read("Run git checkout <branch-name> to switch", "HTML", [])
    with pytest.raises(telegram_reading.CantParse, match='Unsupported start tag "" at byte offset 2'):
        telegram_reading.read("a < b", "HTML", [])
    with pytest.raises(telegram_reading.CantParse, match='Tag "span" must have class "tg-spoiler"'):
        telegram_reading.read("<span>x</span>", "HTML", [])
    with pytest.raises(telegram_reading.CantParse, match="Unmatched end tag"):
        telegram_reading.read("<b>x</i>", "HTML", [])


def test_the_telegram_reader_decodes_only_the_references_telegram_decodes() -> None:
    shown, entities = telegram_reading.read('<b>&lt;&amp;&gt;&quot;&#60;&#x3c;</b> &copy; & &amp', "HTML", [])
    assert shown == '<&>"<< &copy; & &'
    assert entities == [{"type": "bold", "offset": 0, "length": 6}]


def test_the_telegram_reader_joins_pre_and_its_code_language_into_one_entity() -> None:
    shown, entities = telegram_reading.read('<pre><code class="language-py">x = 1</code></pre>', "HTML", [])
    assert (shown, entities) == ("x = 1", [{"type": "pre", "offset": 0, "length": 5, "language": "py"}])
