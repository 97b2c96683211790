"""Which addresses a Slack file is fetched from: the bot token goes to Slack alone."""

from __future__ import annotations

from pathlib import Path

from adapters.downloads import Downloads
from adapters.slack.files import SlackFiles
from adapters.slack.web_api import SlackWebApi


def test_the_slack_bot_token_goes_only_to_slack_or_the_configured_api_host():
    def carries(api_url: str, url: str) -> bool:
        return SlackFiles(SlackWebApi("xoxb-t", api_url), Downloads(Path("/nonexistent"))).may_carry_token(url)

    assert carries("https://slack.com/api/", "https://files.slack.com/files-pri/T1-F1/download/a.png")
    assert carries("https://slack-gov.com/api/", "https://files.slack-gov.com/files-pri/T1-F1/download/a.png")
    assert carries("http://127.0.0.1:8080/api/", "http://127.0.0.1:8080/files-pri/T1-F1/download/a.png")
    assert not carries("https://slack.com/api/", "http://files.slack.com/x")  # never in the clear
    assert not carries("https://slack.com/api/", "https://files.slack.com.example.net/x")
    assert not carries("https://slack.com/api/", "https://evilslack.com/x")
    assert not carries("https://slack.com/api/", "file:///etc/passwd")
