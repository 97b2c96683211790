"""The Slack adapter: its `Transport` over the Web API (`adapters.slack.outbound`), and the lifecycle that connects
Slack's events to the engine (Events API on the gateway's HTTP server, or Socket Mode when an app-level
token is given; slack-sdk's Socket Mode client reconnects by itself).

The adapter translates and the engine decides: whom to answer, which session a message belongs to and
which thread holds a channel's goal are asked of `EnginePort`; what stays here is Slack's side (which
events are meant for the bot, threads, display names, markup).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from adapters.base import PlatformAdapter
from adapters.parts import SLACK
from adapters.render import render_slack
from adapters.slack.approvals import SlackApprovals
from adapters.slack.commands import SlashCommands
from adapters.slack.events import EventsEndpoint, bolt_app
from adapters.slack.files import SlackFiles
from adapters.slack.inbound import MessageReader, UserNames
from adapters.slack.options import SlackOptions
from adapters.slack.outbound import NativeStreams, SlackMessages, SlackTransport
from adapters.slack.presence import chat_presence
from adapters.slack.threads import ThreadBook
from adapters.slack.uploads import SlackUploads
from adapters.slack.web_api import REFUSED_TOKEN, SlackCallError, SlackWebApi, is_transient
from hermes_engine.errors import ConfigError
from hermes_engine.ports.engine import EnginePort
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import ChatAccess, ChatPresence

log = logging.getLogger(__name__)


class SlackAdapter(PlatformAdapter):
    platform = "slack"
    capabilities = SLACK

    def __init__(self, engine: EnginePort, *, bot_token: str, signing_secret: str | None = None,
                 app_token: str | None = None, api_url: str | None = None,
                 options: SlackOptions | None = None, home: Path | None = None) -> None:
        """`home`: HERMES_HOME, under which files people share are kept (none: files are not fetched)."""
        self.options = opts = options or SlackOptions()
        self.capabilities = replace(SLACK,  # per bot, from its options
                                    edit_interval_seconds=opts.edit_interval_seconds,
                                    native_streaming=opts.native_streaming,
                                    max_message_length=opts.max_message_length)
        self.engine = engine
        self.app_token = app_token
        self.signing_secret = signing_secret or ""
        self.api = SlackWebApi(bot_token, api_url)
        self.threads = ThreadBook(self.api, negative_ttl=opts.thread_check_ttl_seconds)
        self.names = UserNames(self.api, ttl=opts.user_cache_seconds)
        self.messages = SlackMessages(self.api)
        self.streams = NativeStreams(self.api, self.capabilities.max_message_length)
        self.transport = SlackTransport(self.messages, self.streams, self.threads)
        super().__init__(self.transport, files=SlackUploads(self.api))
        self.files = SlackFiles.under(self.api, home, limit_mb=opts.max_file_mb) if home is not None else None
        self.reader = MessageReader(engine, self.api, self.threads, self.names, tell=self.send, files=self.files)
        self.commands = SlashCommands(engine, self.api, self.threads, self.names,
                                      hermes_command=opts.hermes_command, post_anchor=self._post_anchor,
                                      spawn=self._spawn)
        self.app = bolt_app(self.api, name=f"hermes-{engine.bot}", signing_secret=self.signing_secret,
                            on_message=self._on_message,
                            commands={opts.goal_command: self.commands.on_goal,
                                      opts.hermes_command: self.commands.on_hermes,
                                      opts.kanban_command: self.commands.on_kanban})
        self.approvals = SlackApprovals(self.api, self.call)
        self.approvals.listen(self.app)
        self.endpoint = EventsEndpoint(self.app, self.signing_secret)
        self._socket: Any = None
        self._socket_connect: asyncio.Task[Any] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- lifecycle --------------------------------------------------------------------------------------
    async def start(self) -> None:
        await self.api.open()
        try:
            await self.api.identify()
            self.connected = True
        except SlackCallError as exc:
            if exc.error in REFUSED_TOKEN:
                raise ConfigError(f"Slack refused {self.options.bot_token_env} ({exc.error}).") from None
            log.warning("Slack auth.test failed (%s); retrying on the first event", exc)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.warning("Slack is not reachable yet (%s); retrying on the first event", exc)
        if self.app_token:
            from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler

            self._socket = AsyncSocketModeHandler(self.app, self.app_token, web_client=self.api.client,
                                                  proxy=self.api.proxy,
                                                  ping_interval=self.options.socket_ping_interval)
            self._socket.client.proxy = self.api.proxy
            self._socket_connect = asyncio.get_running_loop().create_task(
                self._socket.connect_async(), name="slack-socket-connect")
            log.info("Slack adapter for %s: Socket Mode", self.engine.bot)
        else:
            log.info("Slack adapter for %s: Events API at %s", self.engine.bot, self.options.events_path)

    async def stop_receiving(self) -> None:
        """Socket Mode: close the connection, so Slack stops sending here. The Events API route belongs to
        the gateway's server, which stops taking requests itself."""
        if self._socket is None:
            return
        socket, self._socket = self._socket, None
        if self._socket_connect is not None and not self._socket_connect.done():
            self._socket_connect.cancel()
        try:
            await socket.close_async()
        except Exception:  # noqa: BLE001 - closing a broken connection
            log.debug("closing the Socket Mode connection failed", exc_info=True)

    async def stop(self) -> None:
        self.connected = False
        await self.stop_receiving()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await super().stop()
        await self.api.close()

    async def handle_http(self, request: web.Request) -> web.Response:
        """POST `events_path`: Events API and slash commands (see `adapters.slack.events`)."""
        return await self.endpoint.handle(request)

    def _spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task[None]:
        """Slack has been acknowledged already; the work runs on, and the adapter's stop cancels it."""
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

    async def _on_message(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        self._spawn(self.reader.read(body, event), f"event {event.get('type')}")

    async def _post_anchor(self, target: ReplyTarget, text: str) -> str:
        return str(await self.call(target, lambda: self.transport.send(target, text, rendered=True, extras={})))

    # -- outbound (see adapters.slack.outbound) --------------------------------------------------------------
    def chat_access(self, target: ReplyTarget, *, direct: bool) -> ChatAccess:
        """The workspace is the membership boundary in every chat of it, as on the inbound path."""
        return ChatAccess(membership_boundary=True)

    def attachment_fetcher(self) -> SlackFiles | None:
        return self.files

    async def chat_presence(self, target: ReplyTarget, *, writer: str | None = None) -> ChatPresence:
        """Through the Web API: `conversations.info`'s `is_member`, a `#name` found first (`presence.py`). The
        writer is not asked: the workspace is the membership boundary (`chat_access`)."""
        return await chat_presence(self.api, target.chat_id)

    async def replies_to(self, posted: ReplyTarget, idempotency_key: str) -> tuple[ReplyTarget, ...]:
        """A reply to a channel's top-level post is written in its thread, and a thread is a conversation of its
        own (`inbound.py`): one per message the key posted. In a thread or a DM replies stay where they are."""
        if posted.thread_id or posted.chat_id.startswith("D"):
            return ()
        delivery = await self.ledger.get(idempotency_key)
        return tuple(ReplyTarget(posted.platform, posted.account, posted.chat_id, ts)
                     for ts in (delivery.message_ids if delivery else ()))

    def approval_asker(self) -> SlackApprovals:
        return self.approvals

    def is_transient_error(self, exc: BaseException) -> bool:
        return is_transient(exc)

    def render(self, markdown: str) -> str:
        return render_slack(markdown)
