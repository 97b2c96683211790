"""Which addresses a Discord attachment is fetched from: Discord's CDN (or the configured REST host) alone,
checked again when the turn fetches a URL the inbox kept."""

from __future__ import annotations

from pathlib import Path

from adapters.discord.files import NOT_FETCHED, DiscordFiles
from adapters.downloads import Downloads
from hermes_engine.ports.inbound import Attachment


def test_only_discord_s_cdn_or_the_configured_rest_host_is_fetched_from():
    files = DiscordFiles(Downloads(Path("/nonexistent")), "http://127.0.0.1:9000")
    assert files.may_fetch("https://cdn.discordapp.com/attachments/1/2/a.png?ex=1&hm=s")
    assert files.may_fetch("http://127.0.0.1:9000/attachments/1/2/a.png?hm=s")
    assert not files.may_fetch("http://cdn.discordapp.com/attachments/1/2/a.png")  # never in the clear
    assert not files.may_fetch("https://cdn.discordapp.com.example.net/a.png")


async def test_a_stored_url_off_discord_s_cdn_is_refused_without_a_request():
    files = DiscordFiles(Downloads(Path("/nonexistent")))
    stored = Attachment("", "x.png", "image/png", 0, source="https://evil.example/x.png")
    [fetched] = await files.fetch_pending((stored,), "s", "m")
    assert fetched.attachment.refused_reason == NOT_FETCHED and fetched.attachment.kind == "photo"
    assert fetched.attachment.path is None
