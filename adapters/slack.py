"""Slack: a slack-bolt `AsyncApp` mounted in the gateway's aiohttp server (or on a Socket Mode connection),
answering through slack-sdk's `AsyncWebClient`.

Inbound
- HTTP mode (default): POST `/slack/events` (option `events_path`) on the gateway's own server carries the
  Events API and slash commands; Bolt verifies `X-Slack-Signature` and rejects timestamps older than five
  minutes (401, no work). Bolt's own `app.start()` is never called (it would bind 0.0.0.0).
  Socket Mode when `SLACK_APP_TOKEN` is set (slack-sdk's aiohttp client reconnects by itself).
- Events are acknowledged at once (Bolt acks before the listener runs, `process_before_response=False`);
  the work runs in a task. A retry (`X-Slack-Retry-Num`) of an event this process already took is answered
  200 with `X-Slack-No-Retry: 1` without touching Bolt; a retry of an event never seen is processed (the
  first delivery may have been lost). Either way `InboundMessage.message_id` is the message `ts`, so the
  engine's durable inbox answers a message once — across retries, across the `app_mention` + `message`
  pair Slack sends for one mention, and across restarts.
- What is answered: DMs (`message.im`); a mention anywhere (`app_mention`), which opens a thread under the
  mentioning message; and any reply in a thread the bot is part of, no mention needed. The bot knows its
  threads from an in-memory set (threads it was mentioned in or posted to) and, for a thread it has not
  seen in this process (e.g. after a restart), from `conversations.replies` (the first 200 messages; the
  answer is cached, a negative one for `thread_check_ttl_seconds`).
- Ignored: every message of the bot itself (Slack echoes its posts with `bot_id`), other bots unless the
  profile's `access.allow_bots`, edits/deletes/joins and other message subtypes, and people not in
  `access.allowed_users` when that list is not empty (a Slack workspace is already a membership boundary,
  so an empty list lets every member in; pairing does not apply to Slack).
- Sessions: one per thread (`ChatKind.THREAD`, `thread_id` = the thread's root `ts`); one per DM. The
  Slack user id is the platform user id, the workspace (`team_id`) the account; display names come from
  `users.info` (cached) and the engine labels the speakers.

Slash commands (acknowledged within milliseconds, the work runs after the ack)
- `/goal <text>` posts an anchor message "🎯 Goal: <text>" in the channel and runs `/goal <text>` in the
  anchor's thread: the goal's turns and progress posts land there.
- `/goal status|pause|resume|clear`: a slash command carries no thread, so it goes to the channel's most
  recent goal thread (kept per channel in memory, found in the goal store after a restart). Inside a
  thread, "@bot /goal status" (or any text starting with "/goal" in a thread the bot is in) reaches that
  very thread's session.
- `/hermes new|stop|status|help|…` runs the engine command of that name: in a DM on the DM's session; in a
  channel on the thread where this person last talked to the bot, else the channel's latest goal thread,
  else a channel-level session.

Outbound (the shared `PlatformAdapter` machinery does pacing, splitting, rendering and idempotency)
- In threads, native streaming (`chat.startStream` / `appendStream` / `stopStream`, Markdown that Slack
  renders itself, `<!…>` special mentions defused) when the profile allows it (`native_streaming`) and the
  person streamed to is known (Slack wants `recipient_user_id` outside DMs: the last person who spoke in
  the thread in this process). A reply that outgrows one message falls back to post-then-edit and is
  split; a Slack that refuses streams (`missing_scope`, `unknown_method`, …) switches them off for the
  process. Elsewhere post-then-`chat.update`, paced per channel (`edit_interval_seconds`, default 1.2 s:
  `chat.update` is Tier 3, ~50 a minute).
- A 429 becomes `PlatformError(retry_after=<Retry-After>)`, which pauses the channel's lane.
- Finals are rendered to mrkdwn (`adapters.render.render_slack`) and split at 40,000 characters (only
  `text` is sent, no blocks, so the 3,000-character section limit never applies); nothing is cut.
  Interim frames are plain text with `& < >` escaped, so model output can never ping `<!channel>`.
  Link unfurling is off for the bot's posts.
- slack-sdk reads `HTTP(S)_PROXY` but ignores `NO_PROXY`: the adapter resolves the proxy itself with
  `NO_PROXY` honoured for the API host (and uses the same answer for the Socket Mode websocket).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import time
import urllib.request
from collections import OrderedDict
from dataclasses import replace
from typing import Any, Awaitable, Callable, Hashable, Mapping
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web
from pydantic import BaseModel, ConfigDict, ValidationError
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.proxy_env_variable_loader import load_http_proxy_from_env
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.base import SLACK, PlatformAdapter
from adapters.outbound import default_is_transient
from adapters.render import render_slack
from hermes_engine.errors import ConfigError, PlatformError
from hermes_engine.ports.inbound import ChatKind, InboundMessage, ReplyTarget

__all__ = ["SlackAdapter", "SlackCallError", "SlackOptions", "build", "proxy_for"]

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://slack.com/api/"
NATIVE_CHUNK = 12_000  # markdown_text per chat.startStream/appendStream/stopStream call
THREAD_SCAN_LIMIT = 200
GOAL_SUBCOMMANDS = ("status", "pause", "resume", "clear")
NATIVE_UNAVAILABLE = {"unknown_method", "missing_scope", "not_allowed_token_type", "method_deprecated",
                      "feature_not_enabled", "not_supported", "team_not_allowed"}
TRANSIENT_ERRORS = {"internal_error", "fatal_error", "service_unavailable", "request_timeout"}
HANDLED_SUBTYPES = {None, "thread_broadcast", "file_share", "bot_message"}
GOAL_USAGE = ("Usage: `/goal <what you want done>` — I work on it in a thread until it is done.\n"
              "Also `/goal status`, `/goal pause`, `/goal resume`, `/goal clear` (they act on this channel's "
              "latest goal).")


class SlackOptions(BaseModel):
    """`platforms.slack` in a bot profile."""

    model_config = ConfigDict(extra="forbid")

    events_path: str = "/slack/events"
    goal_command: str = "/goal"
    hermes_command: str = "/hermes"
    native_streaming: bool = True
    edit_interval_seconds: float = 1.2
    max_message_length: int = 40_000
    socket_ping_interval: float = 10.0
    thread_check_ttl_seconds: float = 300.0
    user_cache_seconds: float = 3600.0
    bot_token_env: str = "SLACK_BOT_TOKEN"
    signing_secret_env: str = "SLACK_SIGNING_SECRET"
    app_token_env: str = "SLACK_APP_TOKEN"


class SlackCallError(PlatformError):
    """A Web API call Slack refused; `error` is Slack's error code, `status` the HTTP status."""

    def __init__(self, message: str, *, error: str = "", status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message, retry_after=retry_after)
        self.error = error
        self.status = status


def proxy_for(url: str) -> str | None:
    """The proxy slack-sdk should use for `url`: the `HTTP(S)_PROXY` it would read, unless `NO_PROXY`
    covers the host (slack-sdk itself ignores `NO_PROXY`)."""
    proxy = load_http_proxy_from_env(log)
    if not proxy:
        return None
    host = urlsplit(url).hostname or ""
    if urllib.request.proxy_bypass_environment(host):
        return None
    return proxy


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    for key, value in headers.items():
        if key.lower() == name.lower():
            return value[0] if isinstance(value, (list, tuple)) else value
    return None


def translate(exc: SlackApiError, method: str) -> SlackCallError:
    """slack-sdk's `SlackApiError` → `PlatformError` (429 carries `retry_after` from `Retry-After`)."""
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


def escape(text: str) -> str:
    """Slack's three control characters, escaped as Slack requires in any `text`."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_USER_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|([^>]*))?>")
_CHANNEL_MENTION = re.compile(r"<#([CG][A-Z0-9]+)(?:\|([^>]*))?>")
_SPECIAL_MENTION = re.compile(r"<!(here|channel|everyone)(?:\|[^>]*)?>")
_LINK = re.compile(r"<((?:https?|mailto|tel):[^>|]+)(?:\|([^>]*))?>")


class SlackAdapter(PlatformAdapter):
    platform = "slack"
    capabilities = SLACK

    def __init__(self, gateway: Any, *, bot_token: str, signing_secret: str | None = None,
                 app_token: str | None = None, api_url: str | None = None,
                 options: SlackOptions | None = None) -> None:
        self.options = options or SlackOptions()
        opts = self.options
        self.capabilities = replace(SLACK, edit_interval_seconds=opts.edit_interval_seconds,
                                    native_streaming=opts.native_streaming,
                                    max_message_length=opts.max_message_length)
        super().__init__()
        self.gateway = gateway
        self.app_token = app_token
        self.signing_secret = signing_secret or ""
        self.api_url = api_url or DEFAULT_API_URL
        self.proxy = proxy_for(self.api_url)
        self.client = self._web_client(bot_token)
        # Bolt gets a client without a token: with a token it would call auth.test through a per-request
        # client that re-reads the proxy variables; `authorize` hands it our cached identity instead.
        # Bolt injects listener arguments by parameter name, so it gets plain functions, not bound methods.
        async def authorize(enterprise_id: str | None, team_id: str | None,
                            user_id: str | None) -> AuthorizeResult | None:
            return await self._authorize(enterprise_id, team_id, user_id)

        async def on_event(body: dict[str, Any], event: dict[str, Any]) -> None:
            await self._on_event(body, event)

        async def on_goal(ack: Callable[..., Awaitable[Any]], body: dict[str, Any]) -> None:
            await self._on_goal_command(ack, body)

        async def on_hermes(ack: Callable[..., Awaitable[Any]], body: dict[str, Any]) -> None:
            await self._on_hermes_command(ack, body)

        bolt_log = logging.getLogger(f"{__name__}.bolt")
        bolt_log.addFilter(_quiet_bolt)
        self.app = AsyncApp(name=f"hermes-{getattr(gateway, 'bot', 'bot')}", client=self._web_client(None),
                            signing_secret=self.signing_secret, authorize=authorize, logger=bolt_log,
                            process_before_response=False)
        self.app.event("app_mention")(on_event)
        self.app.event("message")(on_event)
        self.app.command(opts.goal_command)(on_goal)
        self.app.command(opts.hermes_command)(on_hermes)
        self._verifier = SignatureVerifier(self.signing_secret) if self.signing_secret else None
        self._socket: Any = None
        self._session: aiohttp.ClientSession | None = None
        self._native_off: str | None = None  # why native streaming was switched off, once Slack refused it
        self._socket_connect: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self._identity_lock = asyncio.Lock()
        self.team_id: str | None = None
        self.bot_user_id: str | None = None
        self.bot_id: str | None = None
        self.bot_name = "hermes"
        self._bot_token = bot_token
        # in-memory state (see the module docstring for what survives a restart)
        self._event_ids: OrderedDict[str, None] = OrderedDict()
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._threads: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._not_threads: dict[tuple[str, str], float] = {}
        self._thread_checks: dict[tuple[str, str], asyncio.Future] = {}
        self._recipients: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._goal_threads: dict[tuple[str, str], str] = {}
        self._latest_thread: OrderedDict[tuple[str, str, str], str] = OrderedDict()
        self._users: dict[str, tuple[str, float]] = {}
        self._streams: OrderedDict[str, int] = OrderedDict()  # open native stream → characters streamed

    # -- construction helpers ---------------------------------------------------------------------------
    def _web_client(self, token: str | None) -> AsyncWebClient:
        client = AsyncWebClient(token=token, base_url=self.api_url)
        client.proxy = self.proxy  # after construction: the constructor re-reads HTTP(S)_PROXY
        return client

    # -- lifecycle --------------------------------------------------------------------------------------
    async def start(self) -> None:
        # One connection pool for every Web API call (slack-sdk would open a session, and a TLS
        # connection, per call). trust_env stays off: the proxy is chosen by `proxy_for`.
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        self.client.session = self._session
        self.app.client.session = self._session
        try:
            await self._identity()
        except SlackCallError as exc:
            if exc.error in ("invalid_auth", "not_authed", "account_inactive", "token_revoked"):
                raise ConfigError(f"Slack refused SLACK_BOT_TOKEN ({exc.error}).") from None
            log.warning("Slack auth.test failed (%s); retrying on the first event", exc)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            log.warning("Slack is not reachable yet (%s); retrying on the first event", exc)
        if self.app_token:
            from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler

            self._socket = AsyncSocketModeHandler(self.app, self.app_token, web_client=self.client,
                                                  proxy=self.proxy,
                                                  ping_interval=self.options.socket_ping_interval)
            self._socket.client.proxy = self.proxy
            self._socket_connect = asyncio.get_running_loop().create_task(
                self._socket.connect_async(), name="slack-socket-connect")
            log.info("Slack adapter for %s: Socket Mode", self.gateway.bot)
        else:
            log.info("Slack adapter for %s: Events API at %s", self.gateway.bot, self.options.events_path)

    async def stop(self) -> None:
        if self._socket is not None:
            if self._socket_connect is not None and not self._socket_connect.done():
                self._socket_connect.cancel()
            try:
                await self._socket.close_async()
            except Exception:  # noqa: BLE001 - closing a broken connection
                log.debug("closing the Socket Mode connection failed", exc_info=True)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await super().stop()
        if self._session is not None:
            self.client.session = self.app.client.session = None
            await self._session.close()
            self._session = None

    def _spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(self._guard(coro, name), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @staticmethod
    async def _guard(coro: Awaitable[Any], name: str) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - one bad event must not take the adapter down
            log.exception("Slack %s failed", name)

    async def _identity(self) -> None:
        """auth.test once: the workspace, the bot's user id and bot id."""
        if self.bot_user_id is not None:
            return
        async with self._identity_lock:
            if self.bot_user_id is not None:
                return
            data = await self._api("auth.test", self.client.auth_test)
            self.team_id = data.get("team_id")
            self.bot_id = data.get("bot_id")
            self.bot_name = data.get("user") or self.bot_name
            self.bot_user_id = data.get("user_id")

    async def _authorize(self, enterprise_id: str | None, team_id: str | None,
                         user_id: str | None) -> AuthorizeResult | None:
        await self._identity()
        if team_id and self.team_id and team_id != self.team_id:
            log.warning("Slack request for workspace %s, but the token belongs to %s", team_id, self.team_id)
            return None
        return AuthorizeResult(enterprise_id=enterprise_id, team_id=self.team_id, bot_token=self._bot_token,
                               bot_id=self.bot_id, bot_user_id=self.bot_user_id, user_id=user_id)

    # -- HTTP endpoint ----------------------------------------------------------------------------------
    async def handle_http(self, request: web.Request) -> web.Response:
        """POST /slack/events: Events API and slash commands, verified and dispatched by Bolt."""
        body = await request.text()
        event_id = _event_id(body) if request.content_type == "application/json" else None
        if request.headers.get("X-Slack-Retry-Num") is not None and event_id in self._event_ids \
                and self._signed(body, request.headers):
            log.info("Slack retry %s of event %s acknowledged (already taken)",
                     request.headers.get("X-Slack-Retry-Num"), event_id)
            return web.Response(status=200, headers={"X-Slack-No-Retry": "1"})
        bolt_request = AsyncBoltRequest(body=body, query=request.query_string,
                                        headers=request.headers)  # type: ignore[arg-type]
        bolt_response = await self.app.async_dispatch(bolt_request)
        if bolt_response.status == 200 and event_id:
            _remember(self._event_ids, event_id)
        return await to_aiohttp_response(bolt_response)

    def _signed(self, body: str, headers: Mapping[str, str]) -> bool:
        if self._verifier is None:
            return False
        return self._verifier.is_valid(body, headers.get("X-Slack-Request-Timestamp", "0"),
                                       headers.get("X-Slack-Signature", ""))

    # -- events -----------------------------------------------------------------------------------------
    async def _on_event(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        """Bolt has already acknowledged the event; the work runs in a task of ours."""
        self._spawn(self._handle_event(body, event), f"event {event.get('type')}")

    def _is_self(self, event: dict[str, Any]) -> bool:
        return bool((self.bot_id and event.get("bot_id") == self.bot_id)
                    or (self.bot_user_id and event.get("user") == self.bot_user_id))

    async def _handle_event(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        await self._identity()
        subtype = event.get("subtype")
        if event.get("type") == "message" and subtype not in HANDLED_SUBTYPES:
            return
        if self._is_self(event):
            return
        user = event.get("user") or ""
        if event.get("bot_id") or subtype == "bot_message":
            if not self.gateway.profile.access.allow_bots:
                return
            user = user or event["bot_id"]
        channel, ts = event.get("channel"), event.get("ts")
        if not user or not channel or not ts:
            return
        allowed = self.gateway.profile.access.allowed_users
        if allowed and user not in allowed:
            log.info("Slack user %s is not in access.allowed_users; ignored", user)
            return
        team = body.get("team_id") or event.get("team") or self.team_id or ""
        text = event.get("text") or ""
        thread_ts = event.get("thread_ts")
        channel_type = event.get("channel_type") or ("im" if channel.startswith("D") else "channel")
        mentioned = event.get("type") == "app_mention" or bool(
            self.bot_user_id and f"<@{self.bot_user_id}>" in text)
        if channel_type == "im":
            kind, thread_id = ChatKind.DM, thread_ts
        elif mentioned:
            kind, thread_id = ChatKind.THREAD, thread_ts or ts
        elif thread_ts and await self._bot_in_thread(channel, thread_ts):
            kind, thread_id = ChatKind.THREAD, thread_ts
        else:
            return
        if (channel, ts) in self._seen:  # the app_mention + message pair of one message
            return
        _remember(self._seen, (channel, ts))
        if kind is ChatKind.THREAD:
            self._join_thread(channel, thread_id, user)
            _remember(self._latest_thread, (team, channel, user), thread_id)
        msg = InboundMessage(
            platform=self.platform, account=team, chat_kind=kind, chat_id=channel, user_id=user,
            user_name=await self._user_name(user), text=await self._clean_text(text), message_id=ts,
            thread_id=thread_id, mentioned=mentioned, raw=event)
        await self.gateway.handle(msg)

    def _join_thread(self, channel: str, thread_ts: str, recipient: str | None = None) -> None:
        _remember(self._threads, (channel, thread_ts))
        self._not_threads.pop((channel, thread_ts), None)
        if recipient:
            _remember(self._recipients, (channel, thread_ts), recipient)

    async def _bot_in_thread(self, channel: str, thread_ts: str) -> bool:
        key = (channel, thread_ts)
        if key in self._threads:
            return True
        until = self._not_threads.get(key)
        if until is not None and until > time.monotonic():
            return False
        check = self._thread_checks.get(key)
        if check is None:  # one conversations.replies call per thread, however many replies arrive at once
            check = asyncio.ensure_future(self._check_thread(channel, thread_ts))
            self._thread_checks[key] = check
            check.add_done_callback(lambda _: self._thread_checks.pop(key, None))
        return await asyncio.shield(check)

    async def _check_thread(self, channel: str, thread_ts: str) -> bool:
        key = (channel, thread_ts)
        try:
            data = await self._api("conversations.replies", self.client.conversations_replies,
                                   channel=channel, ts=thread_ts, limit=THREAD_SCAN_LIMIT)
            found = any(self._is_self(m) for m in data.get("messages") or [])
        except (SlackCallError, aiohttp.ClientError, asyncio.TimeoutError) as exc:
            log.warning("could not read Slack thread %s/%s: %s", channel, thread_ts, exc)
            found = False
        if found:
            self._join_thread(channel, thread_ts)
        else:
            if len(self._not_threads) > 10_000:
                self._not_threads.clear()
            self._not_threads[key] = time.monotonic() + self.options.thread_check_ttl_seconds
        return found

    async def _user_name(self, user_id: str) -> str:
        cached = self._users.get(user_id)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        try:
            data = await self._api("users.info", self.client.users_info, user=user_id)
        except (SlackCallError, aiohttp.ClientError, asyncio.TimeoutError) as exc:
            log.info("users.info %s failed: %s", user_id, exc)
            return cached[0] if cached else user_id
        info = data.get("user") or {}
        profile = info.get("profile") or {}
        name = (profile.get("display_name") or profile.get("real_name") or info.get("real_name")
                or info.get("name") or user_id)
        if len(self._users) > 10_000:
            self._users.clear()
        self._users[user_id] = (name, time.monotonic() + self.options.user_cache_seconds)
        return name

    async def _clean_text(self, text: str) -> str:
        """Slack markup → what a person meant: the leading @bot dropped, other mentions as @name, links as
        text (url), escapes undone."""
        if self.bot_user_id:
            text = re.sub(rf"^\s*<@{self.bot_user_id}(?:\|[^>]*)?>[\s,:]*", "", text)
        names: dict[str, str] = {}
        for user_id in list(dict.fromkeys(m.group(1) for m in _USER_MENTION.finditer(text)))[:10]:
            names[user_id] = self.bot_name if user_id == self.bot_user_id else await self._user_name(user_id)
        text = _USER_MENTION.sub(lambda m: "@" + (m.group(2) or names.get(m.group(1), m.group(1))), text)
        text = _CHANNEL_MENTION.sub(lambda m: "#" + (m.group(2) or m.group(1)), text)
        text = _SPECIAL_MENTION.sub(lambda m: "@" + m.group(1), text)
        text = _LINK.sub(lambda m: f"{m.group(2)} ({m.group(1)})" if m.group(2) else m.group(1), text)
        return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()

    # -- slash commands -----------------------------------------------------------------------------------
    async def _on_goal_command(self, ack: Callable[..., Awaitable[Any]], body: dict[str, Any]) -> None:
        text = (body.get("text") or "").strip()
        if not text:
            await ack(text=GOAL_USAGE)
            return
        team, channel = body.get("team_id") or self.team_id or "", body["channel_id"]
        if text.split(maxsplit=1)[0].lower() in GOAL_SUBCOMMANDS:
            thread = await self._goal_thread(team, channel)
            if thread is None:
                await ack(text="There is no goal in this channel yet. Start one with `/goal <what you want done>`.")
                return
            await ack(text="Answering in the goal's thread.")
            self._spawn(self._command_in(body, ChatKind.THREAD, thread, f"/goal {text}"), "/goal command")
            return
        await ack()
        self._spawn(self._start_goal(body, text), "/goal")

    async def _start_goal(self, body: dict[str, Any], text: str) -> None:
        team, channel, user = body.get("team_id") or self.team_id or "", body["channel_id"], body["user_id"]
        target = ReplyTarget(self.platform, team, channel)
        anchor_text = f"🎯 Goal: {escape(text)}\n_set by <@{user}>; I work on it in this thread._"
        try:
            anchor = await self.call(target, lambda: self._post(target, anchor_text, mrkdwn=True))
        except PlatformError as exc:
            log.warning("could not post the goal anchor in %s: %s", channel, exc)
            await self._respond(body, "I cannot post in this conversation. Invite me first (`/invite @"
                                      f"{self.bot_name}`), then run the command again.")
            return
        self._join_thread(channel, anchor, user)
        self._goal_threads[(team, channel)] = anchor
        _remember(self._latest_thread, (team, channel, user), anchor)
        await self.gateway.handle(InboundMessage(
            platform=self.platform, account=team, chat_kind=ChatKind.THREAD, chat_id=channel, user_id=user,
            user_name=await self._user_name(user), text=f"/goal {text}", message_id=anchor, thread_id=anchor,
            mentioned=True, raw=body))

    async def _goal_thread(self, team: str, channel: str) -> str | None:
        """The channel's most recent goal thread: remembered, or found among the stored goals."""
        thread = self._goal_threads.get((team, channel))
        if thread is not None:
            return thread
        prefix = f"{self.platform}:{team}:thread:{channel}:"
        goals = [g for g in await self.gateway.store.list_goals(bot=self.gateway.bot)
                 if g.session_key.startswith(prefix)]
        if not goals:
            return None
        thread = max(goals, key=lambda g: g.id).session_key[len(prefix):]
        self._goal_threads[(team, channel)] = thread
        return thread

    async def _on_hermes_command(self, ack: Callable[..., Awaitable[Any]], body: dict[str, Any]) -> None:
        text = (body.get("text") or "").strip() or "help"
        word = text.split(maxsplit=1)[0].lower().lstrip("/")
        if self.gateway.commands.get(word) is None:
            names = ", ".join(c.name for c in self.gateway.commands.listing())
            await ack(text=f"Usage: `{self.options.hermes_command} <command>` — one of: {names}.")
            return
        team, channel, user = body.get("team_id") or self.team_id or "", body["channel_id"], body["user_id"]
        command = "/" + text.lstrip("/")
        if channel.startswith("D"):
            await ack()
            self._spawn(self._command_in(body, ChatKind.DM, None, command), "/hermes")
            return
        thread = self._latest_thread.get((team, channel, user)) or await self._goal_thread(team, channel)
        if thread is not None:
            await ack(text="Answering in the thread of our latest conversation here.")
            self._spawn(self._command_in(body, ChatKind.THREAD, thread, command), "/hermes")
        else:
            await ack()
            self._spawn(self._command_in(body, ChatKind.CHANNEL, None, command), "/hermes")

    async def _command_in(self, body: dict[str, Any], kind: ChatKind, thread: str | None, text: str) -> None:
        team, channel, user = body.get("team_id") or self.team_id or "", body["channel_id"], body["user_id"]
        message_id = f"cmd-{body.get('trigger_id') or time.time_ns()}"
        await self.gateway.handle(InboundMessage(
            platform=self.platform, account=team, chat_kind=kind, chat_id=channel, user_id=user,
            user_name=await self._user_name(user), text=text, message_id=message_id, thread_id=thread,
            mentioned=True, raw=body))

    async def _respond(self, body: dict[str, Any], text: str) -> None:
        """An ephemeral answer through the command's response_url."""
        url = body.get("response_url")
        if not url:
            return
        client = AsyncWebhookClient(url, proxy=proxy_for(url))
        client.proxy = proxy_for(url)
        try:
            await client.send(text=text, response_type="ephemeral")
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            log.warning("could not answer through response_url: %s", exc)

    # -- Web API calls ------------------------------------------------------------------------------------
    async def _api(self, method: str, fn: Callable[..., Awaitable[Any]], **kwargs: Any) -> dict[str, Any]:
        try:
            response = await fn(**kwargs)
        except SlackApiError as exc:
            raise translate(exc, method) from None
        return response.data if isinstance(response.data, dict) else {}

    async def _post(self, target: ReplyTarget, text: str, *, mrkdwn: bool) -> str:
        data = await self._api("chat.postMessage", self.client.chat_postMessage, channel=target.chat_id,
                               text=text, thread_ts=target.thread_id, mrkdwn=mrkdwn, unfurl_links=False,
                               unfurl_media=False)
        if target.thread_id:
            self._join_thread(target.chat_id, target.thread_id)
        return str(data["ts"])

    def is_transient_error(self, exc: BaseException) -> bool:
        if isinstance(exc, SlackCallError):
            return exc.error in TRANSIENT_ERRORS or (exc.status is not None and exc.status >= 500)
        return isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ServerTimeoutError)) or \
            default_is_transient(exc)

    def scheduler_key(self, target: ReplyTarget) -> Hashable:
        return (target.account, target.chat_id)

    def render(self, markdown: str) -> str:
        return render_slack(markdown)

    async def _send_raw(self, target: ReplyTarget, text: str, *, rendered: bool,
                        extras: Mapping[str, Any]) -> str:
        return await self._post(target, text if rendered else escape(text), mrkdwn=rendered)

    async def _edit_raw(self, target: ReplyTarget, message_id: str, text: str, *, rendered: bool,
                        extras: Mapping[str, Any]) -> None:
        await self._api("chat.update", self.client.chat_update, channel=target.chat_id, ts=message_id,
                        text=text if rendered else escape(text), mrkdwn=rendered)

    async def _delete_raw(self, target: ReplyTarget, message_id: str) -> None:
        try:
            await self._api("chat.delete", self.client.chat_delete, channel=target.chat_id, ts=message_id)
        except SlackCallError as exc:
            if exc.error != "message_not_found":
                raise

    async def _typing_raw(self, target: ReplyTarget) -> None:
        return None  # bots have no typing indicator in Slack (capabilities.typing_indicator is False)

    # -- native streaming -----------------------------------------------------------------------------------
    def uses_native_stream(self, target: ReplyTarget) -> bool:
        """Slack's streams need a thread and, outside DMs, the person streamed to (known once they spoke)."""
        if self._native_off is not None or not super().uses_native_stream(target):
            return False
        return target.chat_id.startswith("D") or (target.chat_id, target.thread_id or "") in self._recipients

    async def _native_stream_start(self, target: ReplyTarget, markdown: str) -> str:
        self._check_stream_size(0, markdown)
        markdown = _defuse(markdown)
        first, rest = markdown[:NATIVE_CHUNK], markdown[NATIVE_CHUNK:]
        kwargs: dict[str, Any] = {"channel": target.chat_id, "thread_ts": target.thread_id, "markdown_text": first}
        recipient = self._recipients.get((target.chat_id, target.thread_id or ""))
        if recipient:
            kwargs.update(recipient_user_id=recipient, recipient_team_id=target.account)
        try:
            data = await self._api("chat.startStream", self.client.chat_startStream, **kwargs)
        except SlackCallError as exc:
            if exc.error in NATIVE_UNAVAILABLE or exc.status == 404:
                self._native_off = exc.error or str(exc.status)
                log.warning("Slack refused chat.startStream (%s): streaming by chat.update from now on",
                            self._native_off)
            raise
        stream_id = str(data["ts"])
        _remember(self._streams, stream_id, len(first), limit=1000)
        if target.thread_id:
            self._join_thread(target.chat_id, target.thread_id)
        if rest:
            try:
                await self._native_stream_append(target, stream_id, rest)
            except BaseException:
                # The caller never learns this stream's id: take the half-filled message away again.
                with contextlib.suppress(Exception):
                    await self._api("chat.delete", self.client.chat_delete, channel=target.chat_id, ts=stream_id)
                raise
        return stream_id

    async def _native_stream_append(self, target: ReplyTarget, stream_id: str, markdown: str) -> None:
        self._check_stream_size(self._streams.get(stream_id, 0), markdown)
        markdown = _defuse(markdown)
        for start in range(0, len(markdown), NATIVE_CHUNK):
            piece = markdown[start:start + NATIVE_CHUNK]
            await self._api("chat.appendStream", self.client.chat_appendStream, channel=target.chat_id,
                            ts=stream_id, markdown_text=piece)
            self._streams[stream_id] = self._streams.get(stream_id, 0) + len(piece)

    async def _native_stream_stop(self, target: ReplyTarget, stream_id: str, markdown: str) -> None:
        try:
            self._check_stream_size(self._streams.get(stream_id, 0), markdown)
        except SlackCallError:
            await self._native_stream_stop(target, stream_id, "")  # close it with what it shows
            raise
        markdown = _defuse(markdown)
        head, tail = markdown[:-NATIVE_CHUNK] if len(markdown) > NATIVE_CHUNK else "", markdown[-NATIVE_CHUNK:]
        if head:
            await self._native_stream_append(target, stream_id, head)
        await self._api("chat.stopStream", self.client.chat_stopStream, channel=target.chat_id, ts=stream_id,
                        markdown_text=tail or None)
        self._streams.pop(stream_id, None)

    def _check_stream_size(self, streamed: int, more: str) -> None:
        """A streamed message holds one message's worth: refuse before Slack does, so the shared layer
        falls back to post-then-edit and splits."""
        if streamed + len(more) > self.capabilities.max_message_length:
            raise SlackCallError("the streamed reply outgrew one Slack message", error="msg_too_long")


def _defuse(markdown: str) -> str:
    """Streams carry Markdown that Slack renders itself; make sure model output cannot form a special
    mention (``<!channel>``, ``<!here>``, ``<!subteam^…>``) in it."""
    return markdown.replace("<!", "<\u200b!")


def _quiet_bolt(record: logging.LogRecord) -> bool:
    """Bolt reads SLACK_BOT_TOKEN itself and warns that it is unused next to our client: it is, on purpose."""
    return "will be unused" not in record.getMessage()


def _remember(cache: OrderedDict, key: Any, value: Any = None, limit: int = 10_000) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > limit:
        cache.popitem(last=False)


def _event_id(body: str) -> str | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data.get("event_id") if isinstance(data, dict) else None


def build(gateway: Any, settings: Any, options: Mapping[str, Any] | None,
          http_app: web.Application | None = None) -> SlackAdapter:
    """Called by `hermes_gateway.serve`: the adapter for `gateway`, its HTTP route mounted on `http_app`."""
    try:
        opts = SlackOptions.model_validate(dict(options or {}))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ConfigError(f"Setting 'platforms.slack.{where}' is invalid: {first['msg']}.") from None
    token = os.environ.get(opts.bot_token_env, "").strip()
    if not token:
        raise ConfigError(f"{opts.bot_token_env} is not set (the bot token, xoxb-…, from OAuth & Permissions).")
    app_token = os.environ.get(opts.app_token_env, "").strip() or None
    secret = os.environ.get(opts.signing_secret_env, "").strip() or None
    if app_token is None and secret is None:
        raise ConfigError(f"{opts.signing_secret_env} is not set (Basic Information → Signing Secret); "
                          f"it is needed unless {opts.app_token_env} selects Socket Mode.")
    api_url = os.environ.get("SLACK_API_URL", "").strip() or None
    adapter = SlackAdapter(gateway, bot_token=token, signing_secret=secret, app_token=app_token,
                           api_url=api_url, options=opts)
    if app_token is None:
        if http_app is None:
            raise ConfigError("The Slack Events API needs the gateway's HTTP server (HERMES_HTTP_HOST/PORT).")
        http_app.router.add_post(opts.events_path, adapter.handle_http)
    return adapter
