"""Files attached to a Discord message, fetched for the engine from their `url` (Discord's CDN).

discord.py's own `Attachment.read` holds the whole file in memory, so the bytes stream through the shared
download instead (`adapters.downloads`: capped, to disk). Attachment URLs are signed by Discord and need
no token; only Discord's CDN hosts, or the host of the configured REST base (a proxy, a test server),
are fetched, so a message cannot point the bot at another address. A voice message (the message's
IS_VOICE_MESSAGE flag, an attachment with a duration and a waveform) is a voice note, ``audio/ogg``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import urlsplit

import discord

from adapters.downloads import Downloads, Fetched, Offered

log = logging.getLogger(__name__)

CDN_HOSTS = frozenset({"cdn.discordapp.com", "media.discordapp.net"})
VOICE_TYPE = "audio/ogg"


class DiscordFiles:
    def __init__(self, downloads: Downloads, api_base_url: str | None = None) -> None:
        self.downloads = downloads
        self._api_host = (urlsplit(api_base_url).hostname or "").lower() if api_base_url else ""

    @classmethod
    def under(cls, home: Path, *, limit_mb: float, api_base_url: str | None) -> DiscordFiles:
        return cls(Downloads(home, limit_mb=limit_mb), api_base_url)

    def may_fetch(self, url: str) -> bool:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if parts.scheme not in ("http", "https") or not host:
            return False
        return host == self._api_host or (parts.scheme == "https" and host in CDN_HOSTS)

    async def fetch(self, message: discord.Message, session_key: str) -> list[Fetched]:
        """The message's attachments, downloaded into the conversation's folder."""
        voice = message.flags.voice
        offered = []
        for attachment in message.attachments:
            if not self.may_fetch(attachment.url):
                log.warning("a Discord attachment of message %s is offered from %s, not Discord's CDN: not "
                            "fetched", message.id, urlsplit(attachment.url).hostname)
                continue
            is_voice = voice or attachment.is_voice_message()
            offered.append(Offered(
                kind="voice" if is_voice else "", name=attachment.filename, url=attachment.url,
                mime_type=attachment.content_type or (VOICE_TYPE if is_voice else ""),
                size=attachment.size if attachment.size > 0 else None))
        return await self.downloads.fetch_all(offered, session_key, str(message.id))
