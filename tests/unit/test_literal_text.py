"""Every character the model wrote reaches the person: each line of the corpus (`data/literal_text.yaml`)
through each platform's renderer, read as that platform shows it (the readers in `tests/fakes/`)."""

from __future__ import annotations

import pytest
from fakes import discord_reading, slack_reading, telegram_reading
from literal_kit import CORPUS, HELP, Line

from adapters.render import render_discord, render_plain, render_slack, render_telegram
from adapters.slack.outbound import escape as escape_slack_text


def reads_on_telegram(markdown: str) -> str:
    text, extras = render_telegram(markdown)
    shown, _ = telegram_reading.read(text, None, [dict(e) for e in extras.get("entities", ())])
    return shown


READERS = {
    "telegram": reads_on_telegram,
    "slack": lambda markdown: slack_reading.read(render_slack(markdown)),
    "discord": lambda markdown: discord_reading.read(render_discord(markdown)),
    "console": render_plain,
}


def each_line_on(platforms: list[str], lines: list[Line]) -> list[object]:
    """(line, platform) pairs; a platform's known gap in a line is expected to fail, strictly."""
    return [pytest.param(line, platform, id=f"{line}-{platform}",
                         marks=[pytest.mark.xfail(strict=True, reason=line.gaps[platform])] if platform in line.gaps
                         else []) for line in lines for platform in platforms]


@pytest.mark.parametrize(("line", "platform"), each_line_on(list(READERS), CORPUS))
def test_each_line_reads_as_the_model_meant_it_in_the_final(line: Line, platform: str) -> None:
    assert READERS[platform](line.text).rstrip() == line.reading(platform)


@pytest.mark.parametrize("platform", list(READERS))
def test_the_bots_own_help_reads_as_it_is_written(platform: str) -> None:
    assert READERS[platform](HELP).rstrip() == HELP


# Interim frames are sent as plain text: Telegram without entities, Slack escaped with mrkdwn off, Discord
# as the renderer escapes it (Discord reads Markdown in every message).
FRAME_READERS = {
    "telegram": lambda frame: telegram_reading.read(frame, None, [])[0],
    "slack": lambda frame: slack_reading.read(escape_slack_text(frame), mrkdwn=False),
    "discord": lambda frame: discord_reading.read(render_discord(frame)),
}


@pytest.mark.parametrize(("line", "platform"), each_line_on(
    list(FRAME_READERS), [line for line in CORPUS if line.reads is None and not line.per_platform and not line.gaps]))
def test_each_streamed_frame_of_a_literal_line_reads_as_far_as_it_goes(line: Line, platform: str) -> None:
    cuts = [i for i, char in enumerate(line.text) if char == " "] + [len(line.text)]
    for cut in cuts:
        frame = line.text[:cut]
        assert FRAME_READERS[platform](frame).rstrip() == frame.rstrip(), frame
