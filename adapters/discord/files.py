"""Files attached to a Discord message, fetched for the engine from their `url` (Discord's CDN).

discord.py's own `Attachment.read` holds the whole file in memory, so the bytes stream through the shared
download instead (`adapters.downloads`: capped, to disk). Attachment URLs are signed by Discord and need
no token; only Discord's CDN hosts, or the host of the configured REST base (a proxy, a test server),
are fetched, so a message cannot point the bot at another address. A voice message (the message's
IS_VOICE_MESSAGE flag, an attachment with a duration and a waveform) is a voice note, ``audio/ogg``.

The attachments are handed to the engine pending (`offered`), so the message is recorded before anything is
fetched: Discord does not send a gateway event again, and a crash in the middle of a download must not lose
it. The turn asks for them here (`fetch_pending`, the engine's `AttachmentFetcher`); the signed URLs last
about a day, which a restart is well within.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import discord

from adapters.downloads import Downloads, Offered, kind_of, pending
from hermes_engine.ports.fetching import FetchedAttachment
from hermes_engine.ports.inbound import Attachment

log = logging.getLogger(__name__)

CDN_HOSTS = frozenset({"cdn.discordapp.com", "media.discordapp.net"})
VOICE_TYPE = "audio/ogg"
NOT_FETCHED = "could not be downloaded"


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

    @property
    def platform(self) -> str:
        return "discord"

    def offered(self, message: discord.Message) -> tuple[Attachment, ...]:
        """The message's attachments as the engine records them before they are fetched."""
        voice = message.flags.voice
        out = []
        for attachment in message.attachments:
            if not self.may_fetch(attachment.url):
                log.warning("a Discord attachment of message %s is offered from %s, not Discord's CDN: not "
                            "fetched", message.id, urlsplit(attachment.url).hostname)
                continue
            is_voice = voice or attachment.is_voice_message()
            out.append(pending(Offered(
                kind="voice" if is_voice else "", name=attachment.filename, url=attachment.url,
                mime_type=attachment.content_type or (VOICE_TYPE if is_voice else ""),
                size=attachment.size if attachment.size > 0 else None)))
        return tuple(out)

    async def fetch_pending(self, attachments: tuple[Attachment, ...], session_key: str,
                            message_id: str) -> list[FetchedAttachment]:
        """Each pending attachment streamed into the conversation's folder (or found there)."""
        offers = [Offered(kind=a.kind, name=a.file_name, url=a.source or "", mime_type=a.mime_type,
                          size=a.size or None) for a in attachments]
        fetchable = [o for o in offers if self.may_fetch(o.url)]  # checked again: the URLs come from the store
        fetched = iter(await self.downloads.fetch_all(fetchable, session_key, message_id, found_on_disk=True))
        out = []
        for attachment, offer in zip(attachments, offers, strict=True):
            if not self.may_fetch(offer.url):
                out.append(FetchedAttachment(replace(attachment, kind=attachment.kind or kind_of(attachment.mime_type),
                                                     refused_reason=NOT_FETCHED)))
            else:
                done = next(fetched)
                out.append(FetchedAttachment(done.attachment, done.notice))
        return out
