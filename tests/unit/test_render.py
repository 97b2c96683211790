"""Final renderers (real telegramify-markdown, markdown_to_mrkdwn, python-telegram-bot types) and the
adapter's split-then-render step that keeps every rendered part within the limit."""

from __future__ import annotations

import dataclasses
import random

import pytest

from adapters.base import PlatformAdapter
from adapters.parts import DISCORD, SLACK, TELEGRAM, Capabilities
from adapters.render import Rendered, escape_slack, render_discord, render_slack, render_telegram
from adapters.splitting import find_fences, measure


def document(rng: random.Random, size: int) -> str:
    """A model-like Markdown reply: headings, prose with formatting and emoji, lists, code blocks."""
    words = ["the", "agent", "reads", "**files**", "and", "`runs`", "tools,", "then", "[links](https://example.com)", "😀", "_notes_"]
    blocks: list[str] = []
    while sum(map(len, blocks)) < size:
        kind = rng.random()
        if kind < 0.45:
            blocks.append(" ".join(rng.choice(words) for _ in range(rng.randint(10, 120))) + ".")
        elif kind < 0.7:
            lines = [f"    result_{i} = call({i!r})  # {rng.choice(words)}" for i in range(rng.randint(3, 80))]
            blocks.append("```python\n" + "\n".join(lines) + "\n```")
        elif kind < 0.9:
            blocks.append("\n".join(f"- {rng.choice(words)} {rng.choice(words)}" for _ in range(rng.randint(2, 9))))
        else:
            blocks.append(f"## {rng.choice(words)} {rng.choice(words)}")
    return "\n\n".join(blocks)


class RenderOnlyAdapter(PlatformAdapter):
    """Just enough adapter to exercise `render_parts`; it never talks to a platform."""

    platform = "render-only"
    capabilities = TELEGRAM

    def __init__(self, caps: Capabilities, renderer) -> None:
        self.capabilities = caps  # type: ignore[misc]
        self._renderer = renderer
        super().__init__()

    def render(self, markdown: str) -> str | Rendered:
        return self._renderer(markdown)

    async def start(self) -> None: ...
    async def stop(self) -> None: ...


# --- Telegram --------------------------------------------------------------------------------------

def test_telegram_renders_to_plain_text_with_entities() -> None:
    text, extras = render_telegram("Say **hi** to `code` and [docs](https://example.com)\n\n"
                                   "```python\nprint(1)\n```")
    assert text == "Say hi to code and docs\n\nprint(1)"
    types = {e["type"]: e for e in extras["entities"]}
    assert types["bold"] == {"type": "bold", "offset": 4, "length": 2}
    assert types["code"]["offset"] == 10
    assert types["text_link"]["url"] == "https://example.com"
    assert types["pre"]["language"] == "python"


def test_telegram_needs_no_escaping_of_markdownv2_special_characters() -> None:
    source = "Version 1.2.3 (beta) - costs $5! a_b_c #tag {x} = [y] | z > w ~ v + u"
    text, extras = render_telegram(source)
    assert text == source
    assert dict(extras) == {}


def test_telegram_entity_offsets_count_utf16_units() -> None:
    text, extras = render_telegram("😀 **bold**")
    (bold,) = extras["entities"]
    assert bold["offset"] == 3  # the emoji is 2 units, then a space
    assert text[2:] == "bold"


def test_telegram_entities_load_into_python_telegram_bot_objects() -> None:
    from telegram import MessageEntity

    _, extras = render_telegram("**bold** _it_ `c`\n\n```js\nx\n```")
    entities = MessageEntity.de_list(list(extras["entities"]), None)
    assert [e.type for e in entities] == ["bold", "italic", "code", "pre"]
    assert entities[-1].language == "js"


# --- Slack ----------------------------------------------------------------------------------------

def test_slack_renders_mrkdwn() -> None:
    out = render_slack("# Title\n\n**bold** and *it* and [link](https://example.com)\n\n- one\n- two")
    assert out == "*Title*\n\n*bold* and _it_ and <https://example.com|link>\n\n• one\n• two"


def test_slack_escapes_control_characters_so_output_cannot_ping_or_fake_links() -> None:
    out = render_slack("Hey <!channel> & <@U123> see <https://evil|bank>")
    assert "<!channel>" not in out and "<@U123>" not in out and "<https://evil|bank>" not in out
    assert "&lt;!channel&gt;" in out and "&amp;" in out


def test_slack_keeps_blockquotes_and_escapes_inside_code() -> None:
    out = render_slack("> quoted <b>\n\n```\n> if a < b && c:\n```")
    assert out.startswith("> quoted &lt;b&gt;")
    assert "&gt; if a &lt; b &amp;&amp; c:" in out


def test_slack_leaves_a_link_address_and_code_as_written() -> None:
    out = render_slack("See [init](https://e.com/__init__/*x*) and `f(**kwargs)` where 5 * 3 = 15")
    assert out == "See <https://e.com/__init__/*x*|init> and `f(**kwargs)` where 5 * 3 = 15"


def test_slack_escape_leaves_nested_quote_markers() -> None:
    assert escape_slack("> > deep & wide") == "> > deep &amp; wide"


# --- Discord --------------------------------------------------------------------------------------

def test_discord_passes_markdown_through() -> None:
    md = "**bold** __underline__ `code`\n\n```py\nx = 1\n```"
    assert render_discord(md) == md


def test_discord_closes_an_unclosed_fence() -> None:
    assert render_discord("See:\n```py\nx = 1\n") == "See:\n```py\nx = 1\n```"


# --- split, then render each part within the limit ---------------------------------------------------

def test_a_long_telegram_final_renders_to_parts_within_4096_utf16_units() -> None:
    adapter = RenderOnlyAdapter(TELEGRAM, render_telegram)
    parts = adapter.render_parts(document(random.Random(7), 20_000))
    assert len(parts) >= 5
    for part in parts:
        assert part.rendered is not None
        assert measure(part.rendered.text, "utf16") <= 4096
        assert measure(part.source, "utf16") <= 4096
        assert all(f.closed for f in find_fences(part.source))


def test_a_long_discord_final_renders_to_parts_within_2000_chars() -> None:
    adapter = RenderOnlyAdapter(DISCORD, render_discord)
    parts = adapter.render_parts(document(random.Random(8), 10_000))
    assert all(len(p.rendered.text) <= 2000 for p in parts if p.rendered)
    assert all(all(f.closed for f in find_fences(p.rendered.text)) for p in parts if p.rendered)


def test_a_rendered_part_over_the_limit_is_re_split_smaller() -> None:
    # Escaping every "&" five-folds its length: a part split with 10% headroom no longer fits.
    caps = dataclasses.replace(SLACK, max_message_length=500)
    adapter = RenderOnlyAdapter(caps, render_slack)
    source = " ".join(["R&D & Q&A"] * 150)
    parts = adapter.render_parts(source)
    assert len(parts) > 3
    assert all(p.rendered is not None and len(p.rendered.text) <= 500 for p in parts)
    assert " ".join(p.source for p in parts) == source


def test_a_part_that_cannot_render_within_the_limit_goes_out_as_plain_source() -> None:
    caps = Capabilities(100, "chars")
    adapter = RenderOnlyAdapter(caps, lambda md: md * 10)
    parts = adapter.render_parts("x" * 250)
    assert all(p.rendered is None and len(p.source) <= 100 for p in parts)
    assert "".join(p.source for p in parts) == "x" * 250


def test_a_renderer_that_raises_sends_that_part_as_plain_source() -> None:
    def broken(md: str) -> str:
        raise RuntimeError("renderer bug")

    adapter = RenderOnlyAdapter(Capabilities(100, "chars"), broken)
    parts = adapter.render_parts("hello")
    assert [(p.source, p.rendered) for p in parts] == [("hello", None)]


def test_a_part_that_renders_to_nothing_is_sent_as_its_source() -> None:
    adapter = RenderOnlyAdapter(Capabilities(100, "chars"), lambda md: "  ")
    assert [(p.source, p.rendered) for p in adapter.render_parts("![](x.png)")] == [("![](x.png)", None)]


@pytest.mark.parametrize("caps, renderer", [(TELEGRAM, render_telegram), (SLACK, render_slack),
                                            (DISCORD, render_discord)])
def test_short_finals_render_to_one_part(caps: Capabilities, renderer) -> None:
    parts = RenderOnlyAdapter(caps, renderer).render_parts("Hello **there**")
    assert len(parts) == 1 and parts[0].rendered is not None
    assert "there" in parts[0].rendered.text
