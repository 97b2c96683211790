"""Files shared in a Slack message (`files` on message and app_mention events), fetched for the engine.

Slack serves `url_private_download` only with the bot token (``Authorization: Bearer``) and the
`files:read` scope. The token goes only to Slack's own hosts (``*.slack.com``) or to the host of the
configured Web API URL and its subdomains (GovSlack's ``files.slack-gov.com``, a proxy, a test server): a
file an event names elsewhere is not fetched at all, so neither the token nor a request goes where Slack
did not send it. Files Slack withholds from the event itself (``file_access: check_file_info``, as it does
in channels shared with another organisation) are looked up with files.info first. Deleted files
(``mode: tombstone``) and links to files outside Slack (``mode: external``) have no bytes to fetch and are
left out. Slack's audio clips are voice notes.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from adapters.downloads import Downloads, Fetched, Offered
from adapters.slack.web_api import SlackCallError, SlackWebApi, proxy_for

log = logging.getLogger(__name__)

SLACK_HOST = "slack.com"
NO_BYTES = {"tombstone", "external"}


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

    async def fetch(self, event: dict[str, Any], session_key: str) -> list[Fetched]:
        """The event's files, downloaded into the conversation's folder."""
        offered = [o for o in [await self._offered(f) for f in event.get("files") or ()
                               if isinstance(f, dict)] if o is not None]
        return await self.downloads.fetch_all(offered, session_key, str(event.get("ts") or ""))

    async def _offered(self, file: dict[str, Any]) -> Offered | None:
        if file.get("file_access") == "check_file_info" and file.get("id"):
            try:
                file = (await self.api.call("files.info", file=file["id"])).get("file") or file
            except (SlackCallError, aiohttp.ClientError, TimeoutError) as exc:
                log.warning("files.info %s failed: %s", file.get("id"), exc)
        if file.get("mode") in NO_BYTES:
            return None
        url = file.get("url_private_download") or file.get("url_private") or ""
        if not url:
            return None
        if not self.may_carry_token(url):
            log.warning("a Slack file (%s) is offered from %s, not Slack: not fetched", file.get("id"),
                        urlsplit(url).hostname)
            return None
        size = file.get("size")
        return Offered(kind="voice" if file.get("subtype") == "slack_audio" else "",
                       name=str(file.get("name") or file.get("title") or ""), url=url,
                       mime_type=str(file.get("mimetype") or ""),
                       size=size if isinstance(size, int) and size > 0 else None,
                       headers={"Authorization": f"Bearer {self.api.bot_token}"})
