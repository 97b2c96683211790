"""The Slack Web API as the adapter calls it: slack-sdk's `AsyncWebClient`, one connection pool for every
client, the proxy chosen here, and every refusal turned into a `PlatformError`.

- slack-sdk would open a session, and a TLS connection, per call; `open()` gives all clients one pool.
- slack-sdk reads `HTTP(S)_PROXY` but ignores `NO_PROXY`, so `proxy_for` resolves the proxy itself with
  `NO_PROXY` honoured for the API host (Socket Mode's websocket uses the same answer). Each client gets it
  after construction, because the constructor re-reads the proxy variables.
- A 429 becomes `SlackCallError(retry_after=<Retry-After>)`: the shared outbound layer then pauses that
  channel's lane instead of retrying at once.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.proxy_env_variable_loader import load_http_proxy_from_env
from slack_sdk.web.async_client import AsyncWebClient

from adapters.outbound import default_is_transient
from hermes_engine.errors import PlatformError

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://slack.com/api/"
TRANSIENT_ERRORS = {"internal_error", "fatal_error", "service_unavailable", "request_timeout"}
REFUSED_TOKEN = {"invalid_auth", "not_authed", "account_inactive", "token_revoked"}


class SlackCallError(PlatformError):
    """A Web API call Slack refused; `error` is Slack's error code, `status` the HTTP status."""

    def __init__(self, message: str, *, error: str = "", status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message, retry_after=retry_after)
        self.error = error
        self.status = status


def proxy_for(url: str) -> str | None:
    """The proxy slack-sdk should use for `url`: the `HTTP(S)_PROXY` it would read, unless `NO_PROXY`
    covers the host."""
    proxy: str | None = load_http_proxy_from_env(log)
    if not proxy:
        return None
    host = urlsplit(url).hostname or ""
    if urllib.request.proxy_bypass_environment(host):  # type: ignore[attr-defined]
        return None
    return proxy


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    for key, value in headers.items():
        if key.lower() == name.lower():
            return str(value[0] if isinstance(value, (list, tuple)) else value)
    return None


def translate(exc: SlackApiError, method: str) -> SlackCallError:
    """Slack's error code survives as `error`, so callers can tell a missing scope from a lost message."""
    response = exc.response
    status = getattr(response, "status_code", None)
    data = getattr(response, "data", None)
    error = data.get("error", "") if isinstance(data, dict) else ""
    retry_after: float | None = None
    if status == 429 or error == "ratelimited":
        raw = _header(getattr(response, "headers", None), "Retry-After")
        try:
            retry_after = float(int(raw)) if raw is not None else 1.0
        except ValueError:
            retry_after = 1.0
    return SlackCallError(f"Slack {method} failed: {error or status}", error=error, status=status,
                          retry_after=retry_after)


def is_transient(exc: BaseException) -> bool:
    """Slack's own "try again" codes and 5xx are worth a retry; a refusal such as `not_in_channel` is not."""
    if isinstance(exc, SlackCallError):
        return exc.error in TRANSIENT_ERRORS or (exc.status is not None and exc.status >= 500)
    return isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ServerTimeoutError)) or \
        default_is_transient(exc)


@dataclass
class BotIdentity:
    """Who the token belongs to, learnt from auth.test; until then every field but `name` is None."""

    team_id: str | None = None
    user_id: str | None = None
    bot_id: str | None = None
    name: str = "hermes"

    def of_this_workspace(self, event: dict[str, Any]) -> bool:
        """Whether the sender belongs to the workspace the token names. In a channel shared with another
        organisation (Slack Connect) its people write too, with their own team on the event (`user_team`,
        else `team`); the workspace is a membership boundary for its own people only."""
        team = event.get("user_team") or event.get("team")
        return not team or not self.team_id or team == self.team_id

    def wrote(self, message: dict[str, Any]) -> bool:
        """Slack echoes the bot's own posts back as events; answering them would loop."""
        return bool((self.bot_id and message.get("bot_id") == self.bot_id)
                    or (self.user_id and message.get("user") == self.user_id))


class SlackWebApi:
    def __init__(self, bot_token: str, api_url: str | None = None) -> None:
        self.bot_token = bot_token
        self.api_url = api_url or DEFAULT_API_URL
        self.proxy = proxy_for(self.api_url)
        self._session: aiohttp.ClientSession | None = None
        self._clients: list[AsyncWebClient] = []
        self.client = self.new_client(bot_token)
        self.me = BotIdentity()
        self._identity_lock = asyncio.Lock()

    def new_client(self, token: str | None) -> AsyncWebClient:
        """A client on this API's URL, proxy and (once open) connection pool."""
        client = AsyncWebClient(token=token, base_url=self.api_url)
        client.proxy = self.proxy
        client.session = self._session
        self._clients.append(client)
        return client

    async def open(self) -> None:
        # trust_env stays off: the proxy is chosen by `proxy_for`.
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        for client in self._clients:
            client.session = self._session

    async def close(self) -> None:
        if self._session is None:
            return
        for client in self._clients:
            client.session = None
        await self._session.close()
        self._session = None

    async def call(self, method: str, **kwargs: Any) -> dict[str, Any]:
        """`method` as Slack names it ("chat.postMessage"); its response data, or `SlackCallError`."""
        fn = getattr(self.client, method.replace(".", "_"))
        try:
            response = await fn(**kwargs)
        except SlackApiError as exc:
            raise translate(exc, method) from None
        return response.data if isinstance(response.data, dict) else {}

    async def identify(self) -> BotIdentity:
        """auth.test once, however many events ask at the same time; retried on the next call if it failed."""
        if self.me.user_id is not None:
            return self.me
        async with self._identity_lock:
            if self.me.user_id is None:
                data = await self.call("auth.test")
                self.me.team_id = data.get("team_id")
                self.me.bot_id = data.get("bot_id")
                self.me.name = data.get("user") or self.me.name
                self.me.user_id = data.get("user_id")
        return self.me
