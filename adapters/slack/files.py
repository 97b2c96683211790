"""Files shared in a Slack message (`files` on message and app_mention events), fetched for the engine.

Slack serves `url_private_download` only with the bot token (``Authorization: Bearer``) and the
`files:read` scope. The token goes only to Slack's own hosts (``*.slack.com``) or to the host of the
configured Web API URL and its subdomains (GovSlack's ``files.slack-gov.com``, a proxy, a test server): a
file an event names elsewhere is not fetched at all, so neither the token nor a request goes where Slack
did not send it. Files Slack withholds from the event itself (``file_access: check_file_info``, as it does
in channels shared with another organisation) are looked up with files.info first. Deleted files
(``mode: tombstone``) and links to files outside Slack (``mode: external``) have no bytes to fetch and are
left out. Slack's audio clips are voice notes.

The files are handed to the engine pending (`offered`: the URL, or the file id of one withheld, without the
token), so the message is recorded before anything is fetched: Bolt has acknowledged the event already, and
Slack would not send it again after a crash. The turn asks for them here (`fetch_pending`, the engine's
`AttachmentFetcher`), which adds the token and looks withheld files up.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from adapters.downloads import Downloads, Offered, kind_of, pending, safe_file_name
from adapters.slack.web_api import SlackCallError, SlackWebApi, proxy_for
from hermes_engine.ports.fetching import FetchedAttachment
from hermes_engine.ports.inbound import Attachment

log = logging.getLogger(__name__)

SLACK_HOST = "slack.com"
NO_BYTES = {"tombstone", "external"}
NOT_FETCHED = "could not be downloaded"


class SlackFiles:
    def __init__(self, api: SlackWebApi, downloads: Downloads) -> None:
        self.api = api
        self.downloads = downloads
        self._api_host = (urlsplit(api.api_url).hostname or "").lower()

    @classmethod
    def under(cls, api: SlackWebApi, home: Path, *, limit_mb: float) -> SlackFiles:
        return cls(api, Downloads(home, limit_mb=limit_mb, proxy_for=proxy_for))

    def may_carry_token(self, url: str) -> bool:
        """Whether `url` is Slack's (or the configured API's host), so the bot token may go with it."""
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if parts.scheme not in ("http", "https") or not host:
            return False
        if host == self._api_host:
            return True
        return parts.scheme == "https" and any(host == domain or host.endswith("." + domain)
                                               for domain in (SLACK_HOST, self._api_host) if domain)

    @property
    def platform(self) -> str:
        return "slack"

    def offered(self, event: dict[str, Any]) -> tuple[Attachment, ...]:
        """The event's files as the engine records them before they are fetched (no token, no request)."""
        out = []
        for file in event.get("files") or ():
            if not isinstance(file, dict) or file.get("mode") in NO_BYTES:
                continue
            if file.get("file_access") == "check_file_info" and file.get("id"):
                name = safe_file_name(str(file.get("name") or file.get("title") or ""), fallback="file")
                out.append(Attachment(_kind(file), name, str(file.get("mimetype") or ""), _size(file) or 0,
                                      source=str(file["id"])))
                continue
            offer = self._offer(file)
            if offer is not None:
                out.append(pending(offer))
        return tuple(out)

    async def fetch_pending(self, attachments: tuple[Attachment, ...], session_key: str,
                            message_id: str) -> list[FetchedAttachment]:
        """Each pending file downloaded into the conversation's folder with the bot token (or found there);
        one Slack will not serve (deleted since, elsewhere) comes back refused."""
        offers = [await self._offer_of(a) for a in attachments]
        fetched = iter(await self.downloads.fetch_all([o for o in offers if o is not None], session_key,
                                                      message_id, found_on_disk=True))
        out = []
        for attachment, offer in zip(attachments, offers, strict=True):
            if offer is None:
                out.append(FetchedAttachment(replace(attachment, kind=attachment.kind or kind_of(attachment.mime_type),
                                                     refused_reason=NOT_FETCHED)))
            else:
                done = next(fetched)
                out.append(FetchedAttachment(done.attachment, done.notice))
        return out

    async def _offer_of(self, attachment: Attachment) -> Offered | None:
        source = attachment.source or ""
        if "://" in source:  # a URL the event gave: checked again, it is about to carry the token
            return self._offer({"url_private_download": source, "name": attachment.file_name,
                                "mimetype": attachment.mime_type, "size": attachment.size,
                                "subtype": "slack_audio" if attachment.kind == "voice" else None})
        try:
            file = (await self.api.call("files.info", file=source)).get("file") or {}
        except (SlackCallError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("files.info %s failed: %s", source, exc)
            return None
        return None if file.get("mode") in NO_BYTES else self._offer(file)

    def _offer(self, file: dict[str, Any]) -> Offered | None:
        url = file.get("url_private_download") or file.get("url_private") or ""
        if not url:
            return None
        if not self.may_carry_token(url):
            log.warning("a Slack file (%s) is offered from %s, not Slack: not fetched", file.get("id"),
                        urlsplit(url).hostname)
            return None
        return Offered(kind=_kind(file), name=str(file.get("name") or file.get("title") or ""), url=url,
                       mime_type=str(file.get("mimetype") or ""), size=_size(file),
                       headers={"Authorization": f"Bearer {self.api.bot_token}"})


def _kind(file: dict[str, Any]) -> str:
    return "voice" if file.get("subtype") == "slack_audio" else ""


def _size(file: dict[str, Any]) -> int | None:
    size = file.get("size")
    return size if isinstance(size, int) and size > 0 else None
