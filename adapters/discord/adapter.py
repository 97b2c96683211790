"""The Discord adapter's lifecycle: discord.py 2.x on the gateway, answers streamed by editing one message.

The engine is reached only through its port (`EnginePort`): the adapter reports who wrote where, asks
whether to answer, and hands messages over; who may talk to the bot, who administers it and what a
stranger is told are the engine's decisions.

Endpoints come from the environment and are applied where discord.py reads them, class attributes
(``discord.http.Route.BASE`` and ``DiscordWebSocket.DEFAULT_GATEWAY``), before login and only when set, so
a proxy or a test server needs no patched SDK. The client is sharded only when the options give
``shard_count`` (discord.py's `AutoShardedClient`, with this replica's ``shard_ids``), so it never asks
``GET /gateway/bot``.

Each new gateway session reads back over REST what was posted while the bot had none (Discord replays
events only to a resumed session; `adapters.discord.catch_up`). An event that cannot be read is rejected
alone (`adapters.discord.parsing`): logged, kept in the inbox for `hermes-gateway inbox rejected`, and the
connection goes on.

Across replicas on one database, one elected replica holds the gateway connection (lease
``discord:<bot user id>``, `adapters.election`); the others are logged in over REST and stand by, and one
connects when the holder stops renewing. With ``shard_ids`` configured there is no election: each replica
runs its shards.

Failing to start (a rejected token, refused intents) leaves this adapter off with one clear log line
rather than stopping the process, so the bot's other platforms keep serving. Discord being unreachable is
retried in the background: the outage may be Discord's, not a configuration mistake.

Rate limits: every call goes through the shared per-channel scheduler (a thread is a channel of its own);
discord.py itself reads the ``X-RateLimit-*`` headers, waits for an exhausted bucket and sleeps on a 429.
A 429 longer than `max_ratelimit_timeout` comes back as `PlatformError(retry_after=...)`, so the
scheduler pauses that channel instead of the whole adapter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any, ClassVar

import discord
import yarl
from discord import app_commands
from discord.state import ConnectionState

from adapters.base import PlatformAdapter
from adapters.discord.approvals import DiscordApprovals
from adapters.discord.catch_up import CatchUp
from adapters.discord.commands import SlashCommands
from adapters.discord.files import DiscordFiles
from adapters.discord.inbound import MessageReceiver
from adapters.discord.options import GUILDS_ENV, TOKEN_ENV, DiscordConnection, DiscordOptions
from adapters.discord.outbound import UNREACHABLE, DiscordLanes, DiscordOutbound, DiscordTransport, is_transient
from adapters.discord.parsing import RejectedEvent, TolerantShardedState, TolerantState
from adapters.discord.presence import chat_presence
from adapters.election import Election
from adapters.parts import DISCORD, Capabilities
from adapters.render import render_discord
from hermes_engine.ports.engine import AccessDecision, EnginePort
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import ChatAccess, ChatPresence

log = logging.getLogger(__name__)

BAD_TOKEN_HINT = (
    f"Discord rejected {TOKEN_ENV} (401 Unauthorized): copy the bot token again from the developer portal "
    "(Applications → your app → Bot → Reset Token). The Discord adapter is off.")
PRIVILEGED_INTENT_HINT = (
    "Discord refused the connection (close code 4014, disallowed intents): enable 'Message Content Intent' "
    "in the Discord developer portal (Applications → your app → Bot → Privileged Gateway Intents) and "
    "restart. The Discord adapter is off until then.")
MAX_LOGIN_DELAY = 60.0


class _Client(discord.Client):
    """The discord.py client; every event is handed to the adapter's halves."""

    state_class: ClassVar[type[ConnectionState[Any]]] = TolerantState

    def __init__(self, adapter: DiscordAdapter, **kwargs: Any) -> None:
        self.adapter = adapter  # first: the connection state built by the library's constructor reports to it
        super().__init__(**kwargs)
        self.tree: app_commands.CommandTree[Any] = app_commands.CommandTree(self)

    def _get_state(self, **options: Any) -> Any:
        """discord.py's connection state, reading each event on its own (`adapters.discord.parsing`)."""
        return self.state_class(dispatch=self.dispatch, handlers=self._handlers, hooks=self._hooks,
                                http=self.http, on_rejected=self.adapter.reject, **options)

    async def setup_hook(self) -> None:
        await self.adapter.commands.setup(self.tree)

    async def on_ready(self) -> None:
        self.adapter._on_ready()
        self.adapter.catch_up.start()

    async def on_resumed(self) -> None:
        log.info("Discord gateway session resumed")

    async def on_message(self, message: discord.Message) -> None:
        try:
            await self.adapter.receiver.on_message(message)
        except Exception:
            log.exception("Discord message %s could not be handled", message.id)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """Button presses on approval requests; slash commands are the command tree's."""
        if self.adapter.approvals.owns(interaction):
            await self.adapter.approvals.on_press(interaction)


class _ShardedClient(_Client, discord.AutoShardedClient):
    """The same client on discord.py's sharding: the shards given run on this connection's replica. Each
    shard's new session reads back what that shard missed."""

    state_class = TolerantShardedState

    async def on_ready(self) -> None:
        self.adapter._on_ready()

    async def on_shard_ready(self, shard_id: int) -> None:
        self.adapter.catch_up.start(shard_id)


def intents() -> discord.Intents:
    """Only what the adapter reads; message content is privileged and must be enabled in the portal."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.dm_messages = True
    wanted.message_content = True
    return wanted


class DiscordAdapter(PlatformAdapter):
    platform: ClassVar[str] = "discord"
    capabilities: Capabilities = DISCORD
    stream_cursor: ClassVar[str] = " ▌"

    def __init__(self, engine: EnginePort, options: DiscordOptions, connection: DiscordConnection,
                 home: Path | None = None, **kwargs: Any) -> None:
        """`home`: HERMES_HOME, under which attachments people send are kept (none: they are not fetched)."""
        self.outbound = DiscordOutbound(lambda: self.client)
        transport = DiscordTransport(self.outbound, self.capabilities.max_message_length)
        super().__init__(transport, lanes=DiscordLanes(options.edit_interval_seconds), files=transport, **kwargs)
        self.engine = engine
        self.options = options
        self.connection = connection
        self.client: _Client | None = None
        self.account = ""  # the bot's user id once logged in
        # False from `stop` on. Until then messages are handed over, also while the gateway winds down: Discord
        # does not send them again, and the gateway keeps what comes while it stops for its next start.
        self.receiving = True
        self.files = (DiscordFiles.under(home, limit_mb=options.max_file_mb, api_base_url=connection.api_base_url)
                      if home is not None else None)
        self.receiver = MessageReceiver(self)
        self.catch_up = CatchUp(self, self.receiver.on_message)
        self.commands = SlashCommands(self)
        self.approvals = DiscordApprovals(lambda: self.client, self.call)
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._election: Election | None = None  # of the gateway connection, unless sharded by configuration
        self._recording: set[asyncio.Task[None]] = set()  # rejected events being written to `rejects`
        self._unlisted: set[int] = set()  # servers not listed, each named once in the log

    # -- lifecycle ----------------------------------------------------------------------------------
    def _configure_endpoints(self) -> None:
        if self.connection.api_base_url:
            discord.http.Route.BASE = self.connection.api_base_url
        if self.connection.gateway_url:
            discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.connection.gateway_url)

    async def start(self) -> None:
        """Log in and connect; returns once READY or after `ready_timeout` (still connecting then)."""
        self._configure_endpoints()
        self.client = self._make_client()
        try:
            logged_in = await self._login()
        except discord.LoginFailure:
            log.error(BAD_TOKEN_HINT)
            await self.client.close()
            return
        except UNREACHABLE as exc:
            log.warning("Discord is not reachable at start (%r); retrying in the background", exc)
            logged_in = False
        except discord.HTTPException as exc:
            log.error("Discord refused the login (%s); the Discord adapter is off", exc)
            await self.client.close()
            return
        self._task = asyncio.create_task(self._run(logged_in), name="discord-gateway")
        ready = asyncio.create_task(self._settled())
        done, _ = await asyncio.wait({ready, self._task}, timeout=self.options.ready_timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if not done:
            log.warning("Discord gateway not ready after %.0fs; still trying in the background",
                        self.options.ready_timeout)

    def _make_client(self) -> _Client:
        kwargs: dict[str, Any] = {"intents": intents(), "guild_ready_timeout": self.options.guild_ready_timeout,
                                  "max_ratelimit_timeout": self.options.max_ratelimit_timeout,
                                  "allowed_mentions": discord.AllowedMentions.none()}
        if self.options.shard_count is None:
            return _Client(self, **kwargs)
        shard_ids = list(self.options.shard_ids) if self.options.shard_ids is not None else None
        return _ShardedClient(self, shard_count=self.options.shard_count, shard_ids=shard_ids, **kwargs)

    async def _settled(self) -> None:
        """READY, or standing by while another replica holds the connection."""
        while not self._ready.is_set():
            if self._election is not None and self._election.role == "stand-by":
                return
            await asyncio.sleep(0.05)

    async def _login(self) -> bool:
        assert self.client is not None
        await self.client.login(self.connection.token)  # GET users/@me, the application, then setup_hook
        self.account = str(self.client.user.id) if self.client.user else ""
        return True

    async def _run(self, logged_in: bool) -> None:
        """Log in (retrying while Discord is unreachable), then hold the gateway connection; discord.py
        reconnects and resumes by itself."""
        assert self.client is not None
        delay = 1.0
        try:
            while not logged_in:
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_LOGIN_DELAY)
                try:
                    logged_in = await self._login()
                except UNREACHABLE as exc:
                    log.warning("Discord still not reachable (%r); next try in %.0fs", exc, delay)
            if not self.options.sharded_here:
                self._election = self.election(f"discord:{self.account or self.engine.bot}", self.options.lease_seconds)
            if self._election is None:
                await self.client.connect(reconnect=True)
            else:
                self.connected = True  # a stand-by is ready: it sends replies over REST
                await self._election.run(self._connect_elected)
        except discord.LoginFailure:
            log.error(BAD_TOKEN_HINT)
        except discord.PrivilegedIntentsRequired:
            log.error(PRIVILEGED_INTENT_HINT)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Discord gateway connection ended")

    async def _connect_elected(self) -> None:
        """Hold the gateway connection while this replica holds the lease; on losing it, close the
        websocket at once (the REST client stays, so replies in flight still go out)."""
        assert self.client is not None
        try:
            await self.client.connect(reconnect=True)
        finally:
            self._ready.clear()
            ws = self.client.ws
            if ws is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(ws.close(code=1000))
            await self.catch_up.stop()  # the replica taking the connection over reads back for itself

    def _on_ready(self) -> None:
        if self.client is not None and self.client.user is not None:
            self.account = str(self.client.user.id)
            log.info("Discord connected as %s (%s) in %d guild(s)", self.client.user, self.account,
                     len(self.client.guilds))
            for guild in self.client.guilds:
                self.serves(guild.id, guild.name)
        self.connected = True
        self._ready.set()

    async def stop(self) -> None:
        self.receiving = False
        self.connected = False
        await self.catch_up.stop()
        await super().stop()
        if self.client is not None:
            await self.client.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await asyncio.gather(*self._recording, return_exceptions=True)

    # -- events too malformed to read (see adapters.discord.parsing) --------------------------------------
    def reject(self, event: RejectedEvent) -> None:
        """Logged with what it held and recorded in `rejects` in the background: the gateway's receive loop
        cannot wait for the store, and the connection goes on either way."""
        log.warning("rejected a malformed Discord %s event (%s): %s", event.event, event.reason, event.raw)
        if self.rejects is not None:
            task = asyncio.create_task(self._record(event))
            self._recording.add(task)
            task.add_done_callback(self._recording.discard)

    async def _record(self, event: RejectedEvent) -> None:
        assert self.rejects is not None
        payload: dict[str, Any] = {"event": event.event, "reason": event.reason, "raw": event.raw}
        if event.sender is not None:  # shaped as a message's sender, so /forget finds it
            payload["message"] = {"account": self.account, "user_id": event.sender}
        try:
            await self.rejects.record_rejected(self.platform, event.event_id(self.account), payload)
        except Exception:  # noqa: BLE001 - the warning above still holds what it was
            log.exception("could not record the rejected Discord %s event %s", event.event, event.digest)

    # -- what both inbound halves need -------------------------------------------------------------------
    def me(self) -> discord.ClientUser:
        assert self.client is not None and self.client.user is not None
        return self.client.user

    def serves(self, guild_id: int, name: str = "") -> bool:
        """Whether what is written in `guild` is the bot's to read: only in servers the operator listed, since
        anyone can invite the bot to a server of his own and make its roles there. Any other server is named
        once in the log, with the id to list, and its traffic is dropped like another bot's."""
        if self.options.guild_allowed(guild_id):
            return True
        if guild_id not in self._unlisted:
            self._unlisted.add(guild_id)
            log.warning("ignoring Discord server %s (%s): not listed in %s or platforms.discord.allowed_guilds",
                        guild_id, name, GUILDS_ENV)
        return False

    async def admit(self, user: discord.User | discord.Member, channel_id: int | None, *,
                    direct: bool) -> AccessDecision:
        """Ask the engine whether to answer `user`. A guild is a membership boundary: only its members
        can write there, and which guilds to serve was settled before this (`allowed_guilds`)."""
        return await self.engine.admit(
            self.platform, str(user.id), user_name=getattr(user, "display_name", "") or str(user),
            chat_id=str(channel_id), direct=direct, is_bot=user.bot, also_allowed=self.options.allowed_users,
            membership_boundary=not direct)

    def chat_access(self, target: ReplyTarget, *, direct: bool) -> ChatAccess:
        """As `admit` decides: a server's channels are a membership boundary, direct messages are not."""
        return ChatAccess(frozenset(self.options.allowed_users), membership_boundary=not direct)

    def attachment_fetcher(self) -> DiscordFiles | None:
        return self.files

    async def chat_presence(self, target: ReplyTarget, *, writer: str | None = None) -> ChatPresence:
        """Through discord.py: the channel fetched, the bot's and the writer's `send_messages` (`presence.py`)."""
        return await chat_presence(self.client, target.chat_id, self.serves, writer)

    def approval_asker(self) -> DiscordApprovals:
        return self.approvals

    # -- outbound (see adapters.discord.outbound) ----------------------------------------------------------
    def render(self, markdown: str) -> str:
        return render_discord(markdown)

    def is_transient_error(self, exc: BaseException) -> bool:
        return is_transient(exc)
