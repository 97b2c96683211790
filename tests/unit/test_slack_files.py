"""Which addresses a Slack file is fetched from: the bot token goes to Slack alone, and only when the turn
fetches the file; what the inbox records of it carries none."""

from __future__ import annotations

from pathlib import Path

from adapters.downloads import Downloads
from adapters.slack.files import NOT_FETCHED, SlackFiles
from adapters.slack.web_api import SlackWebApi
from hermes_engine.ports.inbound import Attachment


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


def test_an_event_s_files_are_recorded_pending_without_the_token_and_without_a_request():
    files = SlackFiles(SlackWebApi("xoxb-secret", "https://slack.com/api/"), Downloads(Path("/nonexistent")))
    url = "https://files.slack.com/files-pri/T1-F1/download/shot.png"
    event = {"files": [
        {"id": "F1", "name": "shot.png", "mimetype": "image/png", "size": 9, "url_private_download": url},
        {"id": "F2", "name": "clip.m4a", "mimetype": "audio/mp4", "file_access": "check_file_info",
         "subtype": "slack_audio"},
        {"id": "F3", "name": "gone.txt", "mode": "tombstone"},
        {"id": "F4", "name": "elsewhere.png", "url_private_download": "https://evil.example/x.png"},
    ]}
    assert files.offered(event) == (Attachment("", "shot.png", "image/png", 9, source=url),
                                    Attachment("voice", "clip.m4a", "audio/mp4", 0, source="F2"))
    assert "xoxb" not in repr(files.offered(event))


async def test_a_stored_url_that_is_not_slack_s_is_refused_without_the_token_going_anywhere():
    files = SlackFiles(SlackWebApi("xoxb-secret", "https://slack.com/api/"), Downloads(Path("/nonexistent")))
    stored = Attachment("", "x.png", "image/png", 0, source="https://evil.example/x.png")
    [fetched] = await files.fetch_pending((stored,), "s", "m")
    assert fetched.attachment.refused_reason == NOT_FETCHED and fetched.attachment.path is None
