"""Discord adapter: discord.py 2.x on the gateway, answers streamed by editing one message.

Where the bot answers
- Guild channels: when mentioned (the user, or the bot's managed role) or replied to. With
  ``platforms.discord.threads: true`` (the default) it opens a public thread on that message and answers
  there; it then follows the thread without further mentions (threads it created, and threads it was
  mentioned in). One session per thread, several speakers (the engine labels them).
- DMs: one session per person (the DM channel). Who may DM: `access.allowed_users`,
  ``DISCORD_ALLOWED_USERS``, the bot's admins, and people approved by pairing (`hermes_engine.policy.pairing`:
  with ``access.pairing`` a stranger's DM is answered only with a code, which the admin approves with
  ``hermes-gateway pairing approve CODE``; the person is told once approved). Anyone else: no model call.
- Guilds: only those in ``DISCORD_ALLOWED_GUILDS`` / ``platforms.discord.allowed_guilds`` (none listed =
  every guild the bot is in). Messages from elsewhere are dropped before the engine sees them.
- Slash commands (/goal, /new, /stop, /status, /help; synced at start with a bulk overwrite) are deferred
  at once and answered by editing the deferred response, then follow-ups. After the 15-minute token
  lifetime (or if the token is refused) an answer goes to the channel as a plain message.

Admins: the engine's admin check is ``user_id in profile.access.admins``. A guild member holding the role
named ``platforms.discord.admin_role`` is added to that list at runtime when they write or run a command,
and removed again when a later message shows them without the role; ids configured in the profile are
never removed.

Configuration: ``DISCORD_BOT_TOKEN`` (required), ``DISCORD_API_BASE_URL`` (→ ``discord.http.Route.BASE``;
``/api/v10`` is appended when the URL has no ``/api/vN`` path) and ``DISCORD_GATEWAY_URL`` (→
``DiscordWebSocket.DEFAULT_GATEWAY``), both applied before login and only when set. The client is not
sharded, so it never asks ``GET /gateway/bot``.

Rate limits: every call goes through the shared per-channel scheduler (threads are channels of their own);
discord.py itself reads the ``X-RateLimit-*`` headers, waits for an exhausted bucket and sleeps on a 429.
A 429 longer than `max_ratelimit_timeout` comes back as `PlatformError(retry_after=...)` so the
scheduler pauses that channel instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from collections import OrderedDict
from pathlib import Path
from dataclasses import dataclass
from typing import Any, ClassVar, Hashable, Mapping

import aiohttp
import discord
import yarl
from discord import app_commands

from adapters.base import DISCORD, Capabilities, PlatformAdapter
from adapters.render import render_discord
from hermes_engine.config import Settings
from hermes_engine.errors import ConfigError, PlatformError
from hermes_engine.ports.inbound import ChatKind, InboundMessage, ReplyTarget
from hermes_engine.policy.pairing import Pairing, access_granted

log = logging.getLogger(__name__)

TOKEN_ENV = "DISCORD_BOT_TOKEN"
API_BASE_ENV = "DISCORD_API_BASE_URL"
GATEWAY_ENV = "DISCORD_GATEWAY_URL"
GUILDS_ENV = "DISCORD_ALLOWED_GUILDS"
USERS_ENV = "DISCORD_ALLOWED_USERS"

INTERACTION_TOKEN_SECONDS = 15 * 60  # Discord's follow-up window
INTERACTION_MARGIN_SECONDS = 30  # stop using a token a little before it expires
THREAD_NAME_LIMIT = 100
SLASH_COMMANDS = ("goal", "new", "stop", "status", "help")
_DEFAULT_SUMMARIES = {
    "goal": "work on a goal across turns",
    "new": "start a fresh conversation",
    "stop": "stop the answer in progress",
    "status": "model, session and token use",
    "help": "what I can do and the commands",
}
CONTENT_INTENT_HINT = (
    "Discord delivered a message without its text: the bot lacks the Message Content intent. Enable "
    "'Message Content Intent' in the Discord developer portal (Applications → your app → Bot → Privileged "
    "Gateway Intents) and restart; until then the bot only sees messages that mention it.")
BAD_TOKEN_HINT = (
    f"Discord rejected {TOKEN_ENV} (401 Unauthorized): copy the bot token again from the developer portal "
    "(Applications → your app → Bot → Reset Token). The Discord adapter is off.")
PRIVILEGED_INTENT_HINT = (
    "Discord refused the connection (close code 4014, disallowed intents): enable 'Message Content Intent' "
    "in the Discord developer portal (Applications → your app → Bot → Privileged Gateway Intents) and "
    "restart. The Discord adapter is off until then.")

_KNOWN_OPTIONS = {"threads", "admin_role", "allowed_guilds", "allowed_users", "edit_interval_seconds",
                  "guild_ready_timeout", "sync_commands", "thread_auto_archive_minutes", "max_ratelimit_timeout",
                  "ready_timeout", "approval_check_seconds"}


def _id_list(value: Any, setting: str) -> frozenset[str]:
    if value is None or value == "":
        return frozenset()
    items = value.split(",") if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else None
    if items is None:
        raise ConfigError(f"Setting {setting} must be a list of Discord ids (or a comma-separated string).")
    ids = {str(item).strip() for item in items if str(item).strip()}
    bad = sorted(i for i in ids if not i.isdigit())
    if bad:
        raise ConfigError(f"Setting {setting} holds '{bad[0]}', which is not a Discord id (a number).")
    return frozenset(ids)


def api_base_url(value: str) -> str:
    """``http://host:port`` or ``.../api`` → ``.../api/v10``; a URL that names a version is kept."""
    base = value.strip().rstrip("/")
    if re.search(r"/api/v\d+$", base):
        return base
    if base.endswith("/api"):
        return base + "/v10"
    return base + "/api/v10"


@dataclass(frozen=True)
class DiscordOptions:
    """``platforms.discord`` in a bot profile, merged with the environment."""

    token: str
    api_base_url: str | None = None
    gateway_url: str | None = None
    threads: bool = True
    admin_role: str | None = None
    allowed_guilds: frozenset[str] = frozenset()
    allowed_users: frozenset[str] = frozenset()
    edit_interval_seconds: float = DISCORD.edit_interval_seconds
    guild_ready_timeout: float = 2.0
    ready_timeout: float = 30.0
    sync_commands: bool = True
    thread_auto_archive_minutes: int = 1440
    max_ratelimit_timeout: float = 30.0
    approval_check_seconds: float = 5.0

    @classmethod
    def load(cls, options: Mapping[str, Any], env: Mapping[str, str] | None = None) -> "DiscordOptions":
        env = os.environ if env is None else env
        token = (env.get(TOKEN_ENV) or "").strip()
        if not token:
            raise ConfigError(f"Environment variable {TOKEN_ENV} is not set (the bot token from the Discord "
                              "developer portal).")
        unknown = sorted(set(options) - _KNOWN_OPTIONS)
        if unknown:
            raise ConfigError(f"Setting 'platforms.discord.{unknown[0]}' is unknown (known: "
                              f"{', '.join(sorted(_KNOWN_OPTIONS))}).")
        api = (env.get(API_BASE_ENV) or "").strip()
        gateway = (env.get(GATEWAY_ENV) or "").strip()
        try:
            values = dict(
                threads=bool(options.get("threads", True)),
                admin_role=(str(options["admin_role"]).strip() or None) if options.get("admin_role") else None,
                edit_interval_seconds=float(options.get("edit_interval_seconds", DISCORD.edit_interval_seconds)),
                guild_ready_timeout=float(options.get("guild_ready_timeout", 2.0)),
                ready_timeout=float(options.get("ready_timeout", 30.0)),
                sync_commands=bool(options.get("sync_commands", True)),
                thread_auto_archive_minutes=int(options.get("thread_auto_archive_minutes", 1440)),
                max_ratelimit_timeout=float(options.get("max_ratelimit_timeout", 30.0)),
                approval_check_seconds=float(options.get("approval_check_seconds", 5.0)),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"A setting under 'platforms.discord' has the wrong type: {exc}.") from None
        if values["thread_auto_archive_minutes"] not in (60, 1440, 4320, 10080):
            raise ConfigError("Setting 'platforms.discord.thread_auto_archive_minutes' must be 60, 1440, 4320 "
                              "or 10080.")
        if values["max_ratelimit_timeout"] < 30:
            raise ConfigError("Setting 'platforms.discord.max_ratelimit_timeout' must be at least 30 seconds.")
        return cls(
            token=token,
            api_base_url=api_base_url(api) if api else None,
            gateway_url=gateway or None,
            allowed_guilds=_id_list(options.get("allowed_guilds"), "platforms.discord.allowed_guilds")
            | _id_list(env.get(GUILDS_ENV), GUILDS_ENV),
            allowed_users=_id_list(options.get("allowed_users"), "platforms.discord.allowed_users")
            | _id_list(env.get(USERS_ENV), USERS_ENV),
            **values,
        )


@dataclass
class _PendingInteraction:
    interaction: discord.Interaction
    created: float
    original_used: bool = False

    def usable(self, now: float) -> bool:
        return now - self.created < INTERACTION_TOKEN_SECONDS - INTERACTION_MARGIN_SECONDS


class _Bounded(OrderedDict):
    """An insertion-ordered dict that forgets its oldest entries beyond `limit`."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


class _Client(discord.Client):
    """The discord.py client; every event is handed to the adapter."""

    def __init__(self, adapter: "DiscordAdapter", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.adapter = adapter
        self.tree = app_commands.CommandTree(self)

    async def setup_hook(self) -> None:
        await self.adapter._setup_commands(self.tree)

    async def on_ready(self) -> None:
        self.adapter._on_ready()

    async def on_resumed(self) -> None:
        log.info("Discord gateway session resumed")

    async def on_message(self, message: discord.Message) -> None:
        try:
            await self.adapter._on_message(message)
        except Exception:
            log.exception("Discord message %s could not be handled", message.id)


class DiscordAdapter(PlatformAdapter):
    platform: ClassVar[str] = "discord"
    capabilities: ClassVar[Capabilities] = DISCORD
    stream_cursor: ClassVar[str] = " ▌"

    def __init__(self, gateway: Any, options: DiscordOptions, *, home: Path | str,
                 pairing: Pairing | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gateway = gateway
        self.options = options
        self.pairing = pairing or Pairing.for_home(home)
        self.client: _Client | None = None
        self.account = ""  # the bot's user id once logged in
        self._ready = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._threads: _Bounded = _Bounded(10_000)  # thread ids this bot follows (beyond its own threads)
        self._interactions: _Bounded = _Bounded(2_000)  # inbound message id -> pending interaction
        self._interaction_messages: _Bounded = _Bounded(2_000)  # message id -> pending interaction
        self._referenced: _Bounded = _Bounded(2_000)  # reply_to ids already quoted by a first message
        self._role_admins: set[str] = set()
        self._content_hint_logged = False
        self._stopping = False
        self._watcher: asyncio.Task | None = None

    # -- lifecycle ----------------------------------------------------------------------------------
    def _configure_endpoints(self) -> None:
        """discord.py reads its REST base and gateway URL from these class attributes."""
        if self.options.api_base_url:
            discord.http.Route.BASE = self.options.api_base_url
        if self.options.gateway_url:
            discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.options.gateway_url)

    def _intents(self) -> discord.Intents:
        intents = discord.Intents.none()
        intents.guilds = True
        intents.guild_messages = True
        intents.dm_messages = True
        intents.message_content = True
        return intents

    async def start(self) -> None:
        self._configure_endpoints()
        self.client = _Client(self, intents=self._intents(), guild_ready_timeout=self.options.guild_ready_timeout,
                              max_ratelimit_timeout=self.options.max_ratelimit_timeout,
                              allowed_mentions=discord.AllowedMentions.none())
        try:
            logged_in = await self._login()
        except discord.LoginFailure:
            log.error(BAD_TOKEN_HINT)
            await self.client.close()
            return
        except _UNREACHABLE as exc:
            log.warning("Discord is not reachable at start (%r); retrying in the background", exc)
            logged_in = False
        except discord.HTTPException as exc:
            log.error("Discord refused the login (%s); the Discord adapter is off", exc)
            await self.client.close()
            return
        self._task = asyncio.create_task(self._run(logged_in), name="discord-gateway")
        ready = asyncio.create_task(self._ready.wait())
        done, _ = await asyncio.wait({ready, self._task}, timeout=self.options.ready_timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if not done:
            log.warning("Discord gateway not ready after %.0fs; still trying in the background",
                        self.options.ready_timeout)
        if self.gateway.profile.access.pairing:
            self._watcher = asyncio.create_task(self._watch_approvals(), name="discord-pairing-approvals")

    async def _login(self) -> bool:
        assert self.client is not None
        await self.client.login(self.options.token)  # GET users/@me, the application, then setup_hook
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
                delay = min(delay * 2, 60.0)
                try:
                    logged_in = await self._login()
                except _UNREACHABLE as exc:
                    log.warning("Discord still not reachable (%r); next try in %.0fs", exc, delay)
            await self.client.connect(reconnect=True)
        except discord.LoginFailure:
            log.error(BAD_TOKEN_HINT)
        except discord.PrivilegedIntentsRequired:
            log.error(PRIVILEGED_INTENT_HINT)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Discord gateway connection ended")

    def _on_ready(self) -> None:
        if self.client is not None and self.client.user is not None:
            self.account = str(self.client.user.id)
            log.info("Discord connected as %s (%s) in %d guild(s)", self.client.user, self.account,
                     len(self.client.guilds))
        self._ready.set()

    async def stop(self) -> None:
        self._stopping = True
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watcher
        await super().stop()
        if self.client is not None:
            await self.client.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    # -- application commands -------------------------------------------------------------------------
    async def _setup_commands(self, tree: app_commands.CommandTree) -> None:
        registry = self.gateway.commands
        for name in SLASH_COMMANDS:
            command = registry.get(name)
            if command is None:
                continue
            description = (command.summary or _DEFAULT_SUMMARIES[name])[:100]
            tree.add_command(self._slash_command(name, description))
        if not self.options.sync_commands:
            return
        try:
            synced = await tree.sync()
            log.info("Discord slash commands synced: %s", ", ".join("/" + c.name for c in synced))
        except discord.HTTPException as exc:
            log.warning("Discord slash commands could not be synced (%s); text commands still work", exc)

    def _slash_command(self, name: str, description: str) -> app_commands.Command:
        adapter = self
        if name == "goal":
            @app_commands.describe(text="what to achieve, or: status | pause | resume | clear")
            async def goal(interaction: discord.Interaction, text: str | None = None) -> None:
                await adapter._on_slash(interaction, "goal", text or "")

            return app_commands.Command(name="goal", description=description, callback=goal)

        async def simple(interaction: discord.Interaction) -> None:
            await adapter._on_slash(interaction, name, "")

        return app_commands.Command(name=name, description=description, callback=simple)

    async def _on_slash(self, interaction: discord.Interaction, name: str, args: str) -> None:
        if self._stopping:
            return
        denied = await self._interaction_denied(interaction)
        if denied:
            await interaction.response.send_message(denied, ephemeral=True)
            return
        await interaction.response.defer(thinking=True)  # first thing: Discord wants an answer within 3 s
        user = interaction.user
        self._track_admin(user)
        channel = interaction.channel
        kind, chat_id, thread_id = self._place(channel, interaction.channel_id, interaction.guild_id)
        message_id = str(interaction.id)
        self._interactions[message_id] = _PendingInteraction(interaction, time.monotonic())
        msg = InboundMessage(
            platform=self.platform, account=self.account, chat_kind=kind, chat_id=chat_id,
            thread_id=thread_id, user_id=str(user.id), user_name=user.display_name,
            text=f"/{name} {args}".strip(), message_id=message_id, mentioned=True,
            raw={"interaction_id": message_id, "guild_id": interaction.guild_id,
                 "channel_id": interaction.channel_id})
        try:
            await self.gateway.handle(msg)
        except Exception:
            log.exception("Discord command /%s could not be handed to the engine", name)
            with contextlib.suppress(Exception):  # do not leave the person looking at "thinking…"
                await interaction.edit_original_response(content="⚠️ That did not work. Please try again.")

    async def _interaction_denied(self, interaction: discord.Interaction) -> str | None:
        """Why this interaction is refused (answered at once, privately), or None."""
        if interaction.guild_id is not None:
            if not self._guild_allowed(interaction.guild_id):
                return "This bot is not enabled in this server."
            return None
        user = interaction.user
        if self._dm_allowed(str(user.id)):
            return None
        code = await self._pairing_code(user, interaction.channel_id)
        return pairing_text(code, str(user.id)) if code else "You do not have access to this bot yet."

    # -- inbound --------------------------------------------------------------------------------------
    def _guild_allowed(self, guild_id: int | None) -> bool:
        return not self.options.allowed_guilds or str(guild_id) in self.options.allowed_guilds

    def _dm_allowed(self, user_id: str) -> bool:
        return access_granted(self.pairing, self.gateway.profile.access, self.platform, user_id,
                              self.options.allowed_users)

    async def _pairing_code(self, user: Any, channel_id: Any) -> str | None:
        """The stranger's pairing code to tell them, or None (pairing off, or rate-limited: stay silent)."""
        if not self.gateway.profile.access.pairing:
            log.info("ignoring Discord user %s in DMs: not allowed and pairing is off", user.id)
            return None
        try:
            answer = await asyncio.to_thread(self.pairing.request, self.platform, str(user.id),
                                             getattr(user, "display_name", "") or str(user), chat_id=str(channel_id))
        except Exception:  # noqa: BLE001
            log.exception("pairing request for Discord user %s failed", user.id)
            return None
        if not answer.should_reply:
            log.info("pairing: not answering Discord user %s again (rate limit)", user.id)
            return None
        return answer.code

    async def _watch_approvals(self) -> None:
        """Tell people approved with `hermes-gateway pairing approve` that they are in."""
        while not self._stopping:
            try:
                for approval in await asyncio.to_thread(self.pairing.claim_unnotified, self.platform):
                    if approval.chat_id:
                        target = ReplyTarget(self.platform, self.account, approval.chat_id)
                        try:
                            await self.send(target, "You now have access. Say hello!")
                        except Exception as exc:  # noqa: BLE001
                            log.warning("could not tell Discord user %s they were approved: %s",
                                        approval.user_id, exc)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001
                log.exception("checking pairing approvals failed")
            await asyncio.sleep(self.options.approval_check_seconds)

    def _place(self, channel: Any, channel_id: int | None, guild_id: int | None
               ) -> tuple[ChatKind, str, str | None]:
        if guild_id is None:
            return ChatKind.DM, str(channel_id), None
        if isinstance(channel, discord.Thread):
            return ChatKind.THREAD, str(channel.parent_id), str(channel.id)
        return ChatKind.CHANNEL, str(channel_id), None

    def _me(self) -> discord.ClientUser:
        assert self.client is not None and self.client.user is not None
        return self.client.user

    def _mentions_me(self, message: discord.Message) -> bool:
        me = self._me()
        if any(user.id == me.id for user in message.mentions):
            return True
        return any(role.tags is not None and role.tags.bot_id == me.id for role in message.role_mentions)

    def _replies_to_me(self, message: discord.Message) -> bool:
        ref = message.reference
        if ref is None or ref.message_id is None:
            return False
        resolved = ref.resolved if isinstance(ref.resolved, discord.Message) else ref.cached_message
        if resolved is not None:
            return resolved.author.id == self._me().id
        return False

    def _missing_content(self, message: discord.Message) -> bool:
        return (not message.content and not message.attachments and not message.embeds
                and not message.stickers and getattr(message, "poll", None) is None)

    def _hint_content_intent(self) -> None:
        if not self._content_hint_logged:
            self._content_hint_logged = True
            log.warning(CONTENT_INTENT_HINT)

    def _track_admin(self, user: Any) -> None:
        """Members with the admin role become engine admins (see the module docstring)."""
        role = self.options.admin_role
        if not role or not isinstance(user, discord.Member):
            return
        admins = self.gateway.profile.access.admins
        uid = str(user.id)
        if any(r.name == role for r in user.roles):
            if uid not in admins:
                admins.append(uid)
                self._role_admins.add(uid)
        elif uid in self._role_admins:
            self._role_admins.discard(uid)
            with contextlib.suppress(ValueError):
                admins.remove(uid)

    async def _on_message(self, message: discord.Message) -> None:
        if self.client is None or self.client.user is None or self._stopping:
            return
        me = self.client.user
        author = message.author
        if author.id == me.id or message.webhook_id is not None:
            return
        if author.bot and not self.gateway.profile.access.allow_bots:
            return
        if message.type not in (discord.MessageType.default, discord.MessageType.reply):
            return
        if message.guild is None:
            await self._on_dm(message)
            return
        if not self._guild_allowed(message.guild.id):
            log.debug("ignoring a message from guild %s (not in %s)", message.guild.id, GUILDS_ENV)
            return
        if self._missing_content(message):
            self._hint_content_intent()
            return
        channel = message.channel
        if isinstance(channel, discord.PartialMessageable):
            with contextlib.suppress(discord.HTTPException):
                channel = await self.client.fetch_channel(channel.id)
        mentioned = self._mentions_me(message)
        replied = self._replies_to_me(message)
        if isinstance(channel, discord.Thread):
            following = channel.owner_id == me.id or channel.id in self._threads
            if not (mentioned or replied or following):
                return
            self._threads[channel.id] = True
            kind, chat_id, thread_id = ChatKind.THREAD, str(channel.parent_id), str(channel.id)
        else:
            if not (mentioned or replied):
                return
            kind, chat_id, thread_id = ChatKind.CHANNEL, str(channel.id), None
            if self.options.threads:
                thread_id = await self._open_thread(message)
                if thread_id is not None:
                    kind = ChatKind.THREAD
        self._track_admin(author)
        await self._submit(message, kind, chat_id, thread_id, mentioned or replied)

    async def _on_dm(self, message: discord.Message) -> None:
        uid = str(message.author.id)
        if self._missing_content(message):
            return  # DMs carry their text even without the Message Content intent: nothing to answer
        if not self._dm_allowed(uid):
            code = await self._pairing_code(message.author, message.channel.id)
            if code:
                target = ReplyTarget(self.platform, self.account, str(message.channel.id))
                try:
                    await self.send(target, pairing_text(code, uid))
                except Exception as exc:  # noqa: BLE001
                    log.warning("could not send the pairing code to Discord user %s: %s", uid, exc)
            return
        await self._submit(message, ChatKind.DM, str(message.channel.id), None, True)

    async def _open_thread(self, message: discord.Message) -> str | None:
        """A thread on the message, named after it; None when threads cannot be used here."""
        name = self._thread_name(message)
        try:
            thread = await message.create_thread(name=name,
                                                 auto_archive_duration=self.options.thread_auto_archive_minutes)
        except discord.HTTPException as exc:
            if exc.code == 160004:  # already has one (e.g. the event was replayed): it has the message's id
                self._threads[message.id] = True
                return str(message.id)
            log.warning("could not open a Discord thread in channel %s (%s); answering in the channel",
                        message.channel.id, exc)
            return None
        self._threads[thread.id] = True
        return str(thread.id)

    def _thread_name(self, message: discord.Message) -> str:
        text = self._clean_text(message)
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        name = first or f"Chat with {message.author.display_name}"
        if len(name) > THREAD_NAME_LIMIT - 10:
            name = name[: THREAD_NAME_LIMIT - 11].rstrip() + "…"
        return name

    def _clean_text(self, message: discord.Message) -> str:
        """The message text with the bot's mention removed and other mentions made readable."""
        me = self._me()
        text = re.sub(rf"<@!?{me.id}>", "", message.content)
        for user in message.mentions:
            if user.id != me.id:
                text = re.sub(rf"<@!?{user.id}>", "@" + user.display_name, text)
        for role in message.role_mentions:
            replacement = "" if role.tags is not None and role.tags.bot_id == me.id else "@" + role.name
            text = text.replace(f"<@&{role.id}>", replacement)
        for channel in message.channel_mentions:
            text = text.replace(f"<#{channel.id}>", "#" + getattr(channel, "name", str(channel.id)))
        return text.strip()

    async def _submit(self, message: discord.Message, kind: ChatKind, chat_id: str, thread_id: str | None,
                      mentioned: bool) -> None:
        text = self._clean_text(message) or f"@{self._me().display_name}"
        ref = message.reference.message_id if message.reference and message.reference.message_id else None
        msg = InboundMessage(
            platform=self.platform, account=self.account, chat_kind=kind, chat_id=chat_id, thread_id=thread_id,
            user_id=str(message.author.id), user_name=message.author.display_name, text=text,
            message_id=str(message.id), mentioned=mentioned, reply_to_id=str(ref) if ref else None,
            received_at=message.created_at,
            raw={"guild_id": message.guild.id if message.guild else None, "channel_id": message.channel.id,
                 "message_id": message.id})
        await self.gateway.handle(msg)

    # -- outbound primitives ----------------------------------------------------------------------------
    def scheduler_key(self, target: ReplyTarget) -> Hashable:
        return (target.account, target.thread_id or target.chat_id)  # a thread is a channel of its own

    def pacing_interval(self, target: ReplyTarget) -> float:
        return self.options.edit_interval_seconds

    def render(self, markdown: str) -> str:
        return render_discord(markdown)

    def is_transient_error(self, exc: BaseException) -> bool:
        cause = exc.__cause__ if isinstance(exc, PlatformError) else exc
        if isinstance(cause, (discord.DiscordServerError, aiohttp.ClientConnectionError, aiohttp.ServerTimeoutError,
                              asyncio.TimeoutError, ConnectionError)):
            return True
        return isinstance(cause, OSError)

    def _destination(self, target: ReplyTarget) -> discord.PartialMessageable:
        assert self.client is not None
        return self.client.get_partial_messageable(int(target.thread_id or target.chat_id))

    def _pending(self, key: str | None) -> _PendingInteraction | None:
        if key is None:
            return None
        pending = self._interactions.get(key)
        if pending is not None and not pending.usable(time.monotonic()):
            return None  # kept, so the id is still known as an interaction's (never quoted as a message)
        return pending

    async def _send_raw(self, target: ReplyTarget, text: str, *, rendered: bool, extras: Mapping[str, Any]) -> str:
        pending = self._pending(target.reply_to_id)
        if pending is not None:
            try:
                return await self._send_interaction(pending, text)
            except PlatformError as exc:
                if exc.retry_after is not None:
                    raise
                log.warning("Discord interaction answer failed (%s); posting to the channel instead", exc)
                pending.created = float("-inf")  # the token is dead: later parts go to the channel too
        channel = self._destination(target)
        reference = None
        reply_to = target.reply_to_id
        if (reply_to and reply_to.isdigit() and reply_to != target.thread_id and reply_to not in self._referenced
                and reply_to not in self._interactions):
            reference = discord.MessageReference(message_id=int(reply_to), channel_id=channel.id,
                                                 fail_if_not_exists=False)
        message = await _call(channel.send(text, reference=reference, allowed_mentions=_NO_MENTIONS))
        if reference is not None:
            self._referenced[reply_to] = True
        return str(message.id)

    async def _send_interaction(self, pending: _PendingInteraction, text: str) -> str:
        interaction = pending.interaction
        if not pending.original_used:
            message = await _call(interaction.edit_original_response(content=text, allowed_mentions=_NO_MENTIONS))
            pending.original_used = True
        else:
            message = await _call(interaction.followup.send(text, wait=True, allowed_mentions=_NO_MENTIONS))
        self._interaction_messages[str(message.id)] = pending
        return str(message.id)

    async def _edit_raw(self, target: ReplyTarget, message_id: str, text: str, *, rendered: bool,
                        extras: Mapping[str, Any]) -> None:
        pending = self._interaction_messages.get(message_id)
        if pending is not None and pending.usable(time.monotonic()):
            await _call(pending.interaction.followup.edit_message(int(message_id), content=text,
                                                                  allowed_mentions=_NO_MENTIONS))
            return
        message = self._destination(target).get_partial_message(int(message_id))
        await _call(message.edit(content=text, allowed_mentions=_NO_MENTIONS))

    async def _delete_raw(self, target: ReplyTarget, message_id: str) -> None:
        pending = self._interaction_messages.get(message_id)
        if pending is not None and pending.usable(time.monotonic()):
            await _call(pending.interaction.followup.delete_message(int(message_id)))
            return
        await _call(self._destination(target).get_partial_message(int(message_id)).delete())

    async def _typing_raw(self, target: ReplyTarget) -> None:
        await _call(self._destination(target).typing())


_NO_MENTIONS = discord.AllowedMentions.none()
_UNREACHABLE = (aiohttp.ClientError, OSError, asyncio.TimeoutError, discord.DiscordServerError)


def pairing_text(code: str, user_id: str) -> str:
    """The only thing a stranger hears: their own code and id."""
    return (
        "Hi! I only talk with people my admin has approved.\n\n"
        f"To ask for access, send this code to the admin: `{code}`\n"
        f"They approve it on the server with `hermes-gateway pairing approve {code}`.\n\n"
        f"The code is valid for one hour. Your Discord user id is `{user_id}`."
    )


async def _call(awaitable: Any) -> Any:
    """One discord.py call; its refusals become `PlatformError` (with `retry_after` for rate limits)."""
    try:
        return await awaitable
    except discord.RateLimited as exc:
        raise PlatformError(f"Discord rate limit: retry after {exc.retry_after:.1f}s",
                            retry_after=exc.retry_after) from exc
    except discord.HTTPException as exc:
        if exc.status == 429:  # a 429 discord.py did not handle (e.g. from Cloudflare, without Via)
            retry = exc.response.headers.get("Retry-After") if exc.response is not None else None
            raise PlatformError(f"Discord rate limit ({exc.text or exc.status})",
                                retry_after=float(retry) if retry else 5.0) from exc
        raise PlatformError(f"Discord refused the call ({exc.status}, code {exc.code}): {exc.text}") from exc
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        raise PlatformError(f"Discord could not be reached: {exc!r}") from exc


def build(gateway: Any, settings: Settings, options: Mapping[str, Any] | None, http_app: Any = None) -> DiscordAdapter:
    """The runner's entry point. Raises `ConfigError` when DISCORD_BOT_TOKEN is missing."""
    return DiscordAdapter(gateway, DiscordOptions.load(options or {}), home=settings.home)
