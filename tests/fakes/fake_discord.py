"""A fake Discord on 127.0.0.1: REST (``/api/v10``) plus the websocket gateway, for the real discord.py.

The real client logs in, syncs its application commands, connects to the gateway, receives events and
answers over REST exactly as it would against discord.com; nothing in the library is patched. Point it
here with ``DISCORD_API_BASE_URL=fake.api_base`` and ``DISCORD_GATEWAY_URL=fake.gateway_url``.

What it models (the parts a bot adapter meets):

- REST: ``users/@me``, ``oauth2/applications/@me``, ``gateway`` / ``gateway/bot``, ``channels/{id}``,
  channel messages (POST, PATCH, DELETE), typing, starting a thread from a message, a guild member, bulk
  overwrite of global application commands, the interaction callback, and interaction follow-ups through
  the application's webhook (POST, PATCH ``@original`` or an id, DELETE).
- A channel's history (``GET channels/{id}/messages``) as Discord documents it: ``limit`` 1-100 (50 when
  absent); ``before``, ``after`` and ``around`` exclusive of each other (more than one is refused here);
  ``after`` gives the messages that follow the id (the oldest ones after it), ``before`` and no anchor the
  newest ones; every page is sorted newest first. Listed messages are REST message objects: no
  ``guild_id`` or ``member`` (those only come with gateway events), content withheld without the Message
  Content intent as on the gateway.
- Every response with a body carries ``Content-Type: application/json`` exactly (discord.py parses a body
  as JSON only then); 204 answers carry no body and no content type, as Discord's do.
- Rate limits per route and major parameter with ``X-RateLimit-Limit/Remaining/Reset/Reset-After/Bucket``
  headers; a request over the limit gets 429 with ``retry_after`` in the JSON body and a ``Via`` header
  (discord.py treats a 429 without ``Via`` as a Cloudflare ban). `rate_limit_next` cues 429s on demand.
  Every 429 is recorded in `rate_limited` (``cued`` tells the cued ones from real overruns).
- Discord's refusals: content over 2,000 characters (400, code 50035), an empty message (50006), editing
  someone else's message (50005), unknown message/channel (10008/10003), a second thread on one message
  (160004), replying to a message that is not in the channel (50035), an interaction answered twice
  (40060) or after 3 seconds (10062), an expired interaction token (50027).
- Gateway (plain JSON text frames; discord.py asks for ``compress=zlib-stream`` in the URL but parses any
  text frame as JSON): HELLO, IDENTIFY → READY (``session_id``, ``resume_gateway_url`` pointing back
  here at a different path, ``user``, ``application``) → GUILD_CREATE per guild, HEARTBEAT → ACK,
  RESUME → missed events replayed → RESUMED, an unknown session → INVALID_SESSION. Privileged intents can
  be refused (close 4014) or the Message Content intent withheld (content of messages that do not
  mention the bot arrives empty, as Discord sends it).
- Message components: buttons a message was posted or edited with are kept (`FakeMessage.buttons`);
  `press` sends INTERACTION_CREATE of type 3, and its callback may answer with a message (4, ephemeral
  with flags 64), acknowledge (6) or update the pressed message (7).
- Attachments: `attach()` holds a file a person sends (its bytes, name and type, a voice message's duration
  and waveform); `user_says(..., attachments=[...])` posts the message with them (a voice message also sets
  the message's IS_VOICE_MESSAGE flag). Each is served at its `url` on this server, as Discord's CDN serves
  it (``/attachments/<channel>/<id>/<name>``, signed query, no token), with the size the payload declares
  as `Content-Length` unless the test makes it lie (`declared_size`), then chunked. Every download is
  recorded in `cdn_downloads` (attachment id, bytes sent); `hold_downloads` keeps each open after its
  headers (named in `cdn_begun`) until `release_downloads`. The bot's own files come as discord.py sends
  them, multipart ``payload_json`` + ``files[n]``: the message keeps them as attachment objects (an empty
  content is then allowed), their bytes in `files` by attachment id; over 10 MB in all is 413 (40005).
- Tests act as people: `user_says`, `slash`, `press`; and as the network: `drop_connection`, `pause_gateway`,
  `hold_history`, `deliver_again`, or a malformed event (`message_event` changed, then `dispatch`).

Everything the bot did is recorded: `messages` (with each message's edit history), `requests`,
`interactions`, `commands`, `identifies`, `resumes`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from aiohttp import WSMsgType, web

from fakes.loopback import LoopbackServer

API_PREFIX = "/api/v10"
MAX_CONTENT = 2000
MAX_UPLOAD = 10 * 1024 * 1024  # a message's files, for a bot in a server without boosts
_UPLOAD_IDS = itertools.count(1_300_000_000_000_000_000)  # attachment ids of the bot's uploads
INTENT_GUILD_MEMBERS = 1 << 1
INTENT_GUILD_PRESENCES = 1 << 8
INTENT_MESSAGE_CONTENT = 1 << 15
PRIVILEGED_INTENTS = INTENT_GUILD_MEMBERS | INTENT_GUILD_PRESENCES | INTENT_MESSAGE_CONTENT

CH_GUILD_TEXT, CH_DM, CH_PUBLIC_THREAD = 0, 1, 11
FLAG_LOADING = 128
FLAG_IS_VOICE_MESSAGE = 1 << 13
DISCORD_EPOCH_MS = 1_420_070_400_000


def _now_iso(offset: float = 0.0) -> str:
    return (datetime.now(UTC) + timedelta(seconds=offset)).isoformat()


# -- records ---------------------------------------------------------------------------------------------

@dataclass
class FakeMessage:
    """A message in a channel and what it showed over time: `history[0]` as posted, then each edit."""

    id: str
    channel_id: str
    author: dict[str, Any]
    history: list[str]
    guild_id: str | None = None
    member: dict[str, Any] | None = None
    mentions: list[dict[str, Any]] = field(default_factory=list)
    reference: dict[str, Any] | None = None
    webhook_id: str | None = None
    interaction_id: str | None = None
    flags: int = 0
    components: list[dict[str, Any]] = field(default_factory=list)  # action rows, as last posted or edited
    attachments: list[dict[str, Any]] = field(default_factory=list)  # attachment objects, as sent
    deleted: bool = False
    created_at: float = field(default_factory=time.monotonic)
    timestamp: str = field(default_factory=_now_iso)
    edited_timestamp: str | None = None

    @property
    def content(self) -> str:
        return self.history[-1]

    @property
    def edits(self) -> int:
        return len(self.history) - 1

    @property
    def by_bot(self) -> bool:
        return bool(self.author.get("bot"))

    @property
    def buttons(self) -> list[tuple[str, str]]:
        """(label, custom_id) of every button the message shows now, row by row."""
        return [(c.get("label") or "", c.get("custom_id") or "") for row in self.components
                for c in row.get("components", []) if c.get("type") == 2]


@dataclass
class FakeAttachment:
    """A file a person sends, served at its CDN `url`."""

    id: str
    filename: str
    content_type: str | None
    data: bytes
    declared_size: int | None = None  # what the payload says, when the test makes it lie
    duration_secs: float | None = None  # a voice message's, with a waveform
    voice: bool = False

    def as_api(self, base: str, channel_id: str) -> dict[str, Any]:
        url = f"{base}/attachments/{channel_id}/{self.id}/{quote(self.filename, safe='')}?ex=1&is=1&hm=sig"
        data: dict[str, Any] = {"id": self.id, "filename": self.filename, "url": url, "proxy_url": url,
                                "size": len(self.data) if self.declared_size is None else self.declared_size}
        if self.content_type:
            data["content_type"] = self.content_type
        if self.voice:
            data["duration_secs"] = self.duration_secs or 1.5
            data["waveform"] = base64.b64encode(bytes(range(0, 256, 4))).decode()
            data["flags"] = 0
        return data


@dataclass
class RestCall:
    method: str
    path: str
    route: str  # the route template, e.g. "/channels/{channel_id}/messages/{message_id}"
    body: Any
    status: int = 0
    at: float = field(default_factory=time.monotonic)


@dataclass
class RateLimitHit:
    method: str
    route: str
    path: str
    retry_after: float
    cued: bool
    at: float = field(default_factory=time.monotonic)


@dataclass
class FakeInteraction:
    id: str
    token: str
    name: str
    channel_id: str
    guild_id: str | None
    user: dict[str, Any]
    payload: dict[str, Any]
    dispatched_at: float = field(default_factory=time.monotonic)
    callback_type: int | None = None
    callback_at: float | None = None
    callback_data: dict[str, Any] = field(default_factory=dict)  # the `data` of the callback, as sent
    message_id: str | None = None  # the message whose component was pressed
    original_id: str | None = None
    followup_ids: list[str] = field(default_factory=list)

    @property
    def reply(self) -> str | None:
        """What the bot answered in the callback (a message's content), None before or without one."""
        return self.callback_data.get("content") if self.callback_type in (4, 7) else None

    @property
    def ephemeral(self) -> bool:
        return bool(int(self.callback_data.get("flags") or 0) & 64)

    @property
    def ack_delay(self) -> float | None:
        """Seconds from the event to the bot's callback (Discord allows 3)."""
        return None if self.callback_at is None else self.callback_at - self.dispatched_at


@dataclass
class _Bucket:
    limit: int
    window: float
    started: float = 0.0
    used: int = 0


@dataclass
class _Cue:
    method: str
    route: str | None
    retry_after: float
    times: int
    is_global: bool = False


@dataclass
class _Session:
    id: str
    intents: int
    seq: int = 0
    events: list[tuple[int, str, Any]] = field(default_factory=list)
    ws: web.WebSocketResponse | None = None
    send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class DiscordError(Exception):
    def __init__(self, status: int, code: int, message: str, errors: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.errors = status, code, message, errors


# -- the server ------------------------------------------------------------------------------------------

class FakeDiscord(LoopbackServer):
    """See the module docstring. ``async with FakeDiscord() as fake:`` or `start()` / `stop()`."""

    def __init__(self, *, token: str = "test-bot-token", bot_name: str = "Hermes",
                 default_limit: int = 1000, default_window: float = 1.0) -> None:
        self.token = token
        self._ids = itertools.count(1)
        self.bot = self._new_user(bot_name, bot=True)
        self.application_id = self.bot["id"]
        self.users: dict[str, dict[str, Any]] = {}
        self.guilds: dict[str, dict[str, Any]] = {}
        self.channels: dict[str, dict[str, Any]] = {}
        self.messages: dict[str, FakeMessage] = {}
        self.member_roles: dict[tuple[str, str], list[str]] = {}  # (guild, user) -> role ids
        self.commands: list[dict[str, Any]] = []
        self.command_syncs = 0
        self.interactions: dict[str, FakeInteraction] = {}
        self.requests: list[RestCall] = []
        self.rate_limited: list[RateLimitHit] = []
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.gateway_paths: list[str] = []  # path of every websocket connection, in order
        self.replayed: list[tuple[int, str, Any]] = []  # events sent again on RESUME
        self.unknown_routes: list[str] = []  # requests no route matched (a test should see none)
        self.files: dict[str, FakeAttachment] = {}
        self.cdn_downloads: list[tuple[str, int]] = []  # (attachment id, bytes sent)
        self.cdn_begun: list[str] = []  # attachment ids whose download got its headers
        self._cdn_open = asyncio.Event()
        self._cdn_open.set()
        # knobs
        self.grant_message_content = True  # False: the portal toggle is off for a bot that still connects
        self.reject_privileged_intents = False  # True: IDENTIFY asking for them is closed with 4014
        self.replay_overlap = 0  # on RESUME, also replay this many events the client already had
        self.heartbeat_interval_ms = 41_250
        self.interaction_ack_window = 3.0
        self.interaction_token_ttl = 15 * 60.0
        self.default_limit, self.default_window = default_limit, default_window
        self._limits: dict[tuple[str, str], tuple[int, float]] = {}
        self._buckets: dict[tuple[str, str, str], _Bucket] = {}
        self._cues: list[_Cue] = []
        self._session: _Session | None = None
        self._replay_from: int | None = None
        self._sessions: dict[str, _Session] = {}
        self._gateway_open = asyncio.Event()
        self._gateway_open.set()
        self._history_open = asyncio.Event()
        self._history_open.set()
        self._changed = asyncio.Event()
        self._sockets: set[web.WebSocketResponse] = set()
        # a default guild with one text channel, an everyone role and an admin role
        guild = self.add_guild("Test Guild", channels=("general",), roles=("Hermes Admin",))
        self.guild_id = guild["id"]
        self.channel_id = next(c for c in guild["channels"])["id"]

    # -- lifecycle ---------------------------------------------------------------------------------------
    def build_app(self) -> web.Application:
        app = web.Application(middlewares=[self._json_errors], client_max_size=4 * MAX_UPLOAD)
        r = app.router
        p = API_PREFIX
        r.add_get(p + "/users/@me", self._users_me)
        r.add_get(p + "/oauth2/applications/@me", self._application_me)
        r.add_get(p + "/gateway", self._gateway_info)
        r.add_get(p + "/gateway/bot", self._gateway_bot)
        r.add_get(p + "/channels/{channel_id}", self._get_channel)
        r.add_post(p + "/channels/{channel_id}/messages", self._create_message)
        r.add_get(p + "/channels/{channel_id}/messages", self._list_messages)
        r.add_get(p + "/channels/{channel_id}/messages/{message_id}", self._get_message)
        r.add_get(p + "/guilds/{guild_id}/members/{user_id}", self._get_member)
        r.add_patch(p + "/channels/{channel_id}/messages/{message_id}", self._edit_message)
        r.add_delete(p + "/channels/{channel_id}/messages/{message_id}", self._delete_message)
        r.add_post(p + "/channels/{channel_id}/typing", self._typing)
        r.add_post(p + "/channels/{channel_id}/messages/{message_id}/threads", self._start_thread)
        r.add_put(p + "/applications/{application_id}/commands", self._bulk_commands)
        r.add_get(p + "/applications/{application_id}/commands", self._list_commands)
        r.add_post(p + "/interactions/{interaction_id}/{token}/callback", self._interaction_callback)
        r.add_post(p + "/webhooks/{application_id}/{token}", self._followup)
        r.add_get(p + "/webhooks/{application_id}/{token}/messages/{message_id}", self._webhook_get)
        r.add_patch(p + "/webhooks/{application_id}/{token}/messages/{message_id}", self._webhook_edit)
        r.add_delete(p + "/webhooks/{application_id}/{token}/messages/{message_id}", self._webhook_delete)
        r.add_get("/attachments/{channel_id}/{attachment_id}/{filename}", self._cdn)
        r.add_get("/gateway/ws", self._websocket)
        r.add_get("/resume/ws", self._websocket)
        return app

    async def before_stop(self) -> None:
        self._gateway_open.set()
        for ws in list(self._sockets):
            await ws.close(code=1001)

    @property
    def api_base(self) -> str:
        """For DISCORD_API_BASE_URL (discord.py's `Route.BASE`)."""
        return self.url + API_PREFIX

    @property
    def gateway_url(self) -> str:
        """For DISCORD_GATEWAY_URL (discord.py's `DiscordWebSocket.DEFAULT_GATEWAY`)."""
        return f"ws://127.0.0.1:{self.port}/gateway/ws"

    @property
    def resume_gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/resume/ws"

    # -- world building ----------------------------------------------------------------------------------
    def snowflake(self) -> str:
        """A real-shaped id: milliseconds since the Discord epoch, then a counter (ids grow with time)."""
        return str(((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22) | (next(self._ids) & 0x3FFFFF))

    def _new_user(self, name: str, *, bot: bool = False) -> dict[str, Any]:
        return {"id": self.snowflake(), "username": name.lower().replace(" ", "_"), "global_name": name,
                "discriminator": "0", "avatar": None, "bot": bot, "public_flags": 0, "flags": 0}

    def user(self, name_or_user: str | dict[str, Any], *, bot: bool = False) -> dict[str, Any]:
        """The person named `name` (created on first use), or the given user dict."""
        if isinstance(name_or_user, dict):
            return name_or_user
        if name_or_user not in self.users:
            self.users[name_or_user] = self._new_user(name_or_user, bot=bot)
        return self.users[name_or_user]

    def add_guild(self, name: str, *, channels: tuple[str, ...] = ("general",),
                  roles: tuple[str, ...] = ()) -> dict[str, Any]:
        guild_id = self.snowflake()
        role_list = [self._role(guild_id, "@everyone", 0)]
        role_list += [self._role(self.snowflake(), r, i + 1) for i, r in enumerate(roles)]
        guild = {"id": guild_id, "name": name, "owner_id": self.snowflake(), "roles": role_list,
                 "channels": [], "threads": [], "members": [], "emojis": [], "stickers": [], "features": [],
                 "unavailable": False, "member_count": 2, "large": False, "joined_at": _now_iso(),
                 "preferred_locale": "en-US", "premium_tier": 0, "verification_level": 0,
                 "default_message_notifications": 0, "explicit_content_filter": 0, "mfa_level": 0,
                 "nsfw_level": 0, "system_channel_flags": 0, "afk_timeout": 300, "icon": None,
                 "banner": None, "splash": None, "discovery_splash": None, "description": None,
                 "voice_states": [], "presences": [], "stage_instances": [], "guild_scheduled_events": [],
                 "soundboard_sounds": []}
        self.guilds[guild_id] = guild
        for position, channel_name in enumerate(channels):
            self.add_channel(guild_id, channel_name, position=position)
        if self._session is not None and self._session.ws is not None:
            asyncio.get_running_loop().create_task(self.dispatch("GUILD_CREATE", self._guild_create(guild)))
        return guild

    @staticmethod
    def _role(role_id: str, name: str, position: int) -> dict[str, Any]:
        return {"id": role_id, "name": name, "color": 0, "colors": {"primary_color": 0}, "hoist": False,
                "icon": None, "unicode_emoji": None, "position": position, "permissions": "2248473465835073",
                "managed": False, "mentionable": False, "flags": 0}

    def add_channel(self, guild_id: str, name: str, *, position: int = 0) -> dict[str, Any]:
        channel = {"id": self.snowflake(), "type": CH_GUILD_TEXT, "guild_id": guild_id, "name": name,
                   "position": position, "permission_overwrites": [], "nsfw": False, "topic": None,
                   "parent_id": None, "rate_limit_per_user": 0, "last_message_id": None, "flags": 0}
        self.channels[channel["id"]] = channel
        self.guilds[guild_id]["channels"].append(channel)
        return channel

    def role_id(self, name: str, guild_id: str | None = None) -> str:
        guild = self.guilds[guild_id or self.guild_id]
        return next(r["id"] for r in guild["roles"] if r["name"] == name)

    def give_role(self, user: str | dict[str, Any], role_name: str, guild_id: str | None = None) -> None:
        gid = guild_id or self.guild_id
        key = (gid, self.user(user)["id"])
        self.member_roles.setdefault(key, []).append(self.role_id(role_name, gid))

    def dm_channel(self, user: str | dict[str, Any]) -> dict[str, Any]:
        """The DM channel between the bot and this person (created on first use)."""
        person = self.user(user)
        for channel in self.channels.values():
            if channel["type"] == CH_DM and channel["recipients"][0]["id"] == person["id"]:
                return channel
        channel = {"id": self.snowflake(), "type": CH_DM, "recipients": [person], "last_message_id": None,
                   "flags": 0}
        self.channels[channel["id"]] = channel
        return channel

    def _member(self, guild_id: str, user: dict[str, Any], *, with_user: bool = False) -> dict[str, Any]:
        member = {"roles": list(self.member_roles.get((guild_id, user["id"]), [])), "nick": None,
                  "avatar": None, "joined_at": _now_iso(-3600), "premium_since": None, "deaf": False,
                  "mute": False, "pending": False, "flags": 0, "communication_disabled_until": None}
        if with_user:
            member["user"] = user
        return member

    def _guild_create(self, guild: dict[str, Any]) -> dict[str, Any]:
        data = dict(guild)
        data["channels"] = [c for c in guild["channels"]]
        data["threads"] = [self.channels[t] for t in guild["threads"]]
        data["members"] = [self._member(guild["id"], self.bot, with_user=True)]
        return data

    # -- what tests look at ------------------------------------------------------------------------------
    def messages_in(self, channel_id: str, *, by_bot: bool | None = None,
                    include_deleted: bool = False) -> list[FakeMessage]:
        found = [m for m in self.messages.values() if m.channel_id == str(channel_id)
                 and (include_deleted or not m.deleted) and (by_bot is None or m.by_bot == by_bot)]
        return sorted(found, key=lambda m: int(m.id))

    def bot_messages(self, channel_id: str, **kwargs: Any) -> list[FakeMessage]:
        return self.messages_in(channel_id, by_bot=True, **kwargs)

    def threads(self) -> list[dict[str, Any]]:
        return [c for c in self.channels.values() if c["type"] == CH_PUBLIC_THREAD]

    def thread_of(self, message: FakeMessage | str) -> dict[str, Any] | None:
        """The thread started on this message (on Discord it has the message's id)."""
        mid = message.id if isinstance(message, FakeMessage) else str(message)
        channel = self.channels.get(mid)
        return channel if channel and channel["type"] == CH_PUBLIC_THREAD else None

    def calls(self, method: str | None = None, route: str | None = None) -> list[RestCall]:
        return [c for c in self.requests if (method is None or c.method == method)
                and (route is None or c.route == route)]

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0,
                       what: str = "the condition") -> Any:
        """Wait until `predicate()` is truthy (re-checked on every change); returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"fake Discord: timed out waiting for {what}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.05))

    def _touch(self) -> None:
        self._changed.set()

    # -- scripting the network ---------------------------------------------------------------------------
    def set_rate_limit(self, method: str, route: str, limit: int, window: float) -> None:
        """Per-route limit (per major parameter), e.g. ("PATCH", "/channels/{channel_id}/messages/{message_id}")."""
        self._limits[(method.upper(), route)] = (limit, window)

    def rate_limit_next(self, method: str, route: str | None = None, *, retry_after: float = 0.5,
                        times: int = 1, is_global: bool = False) -> None:
        """Answer the next `times` matching requests with 429 and this `retry_after`."""
        self._cues.append(_Cue(method.upper(), route, retry_after, times, is_global))

    def pause_gateway(self) -> None:
        """New websocket connections wait (no HELLO) until `resume_gateway`; events queue up meanwhile."""
        self._gateway_open.clear()

    def resume_gateway(self) -> None:
        self._gateway_open.set()

    def hold_downloads(self) -> None:
        """CDN downloads stop after their headers (recorded in `cdn_begun`) until `release_downloads`."""
        self._cdn_open.clear()

    def release_downloads(self) -> None:
        self._cdn_open.set()

    def hold_history(self) -> None:
        """Channel history requests wait (recorded, unanswered) until `release_history`."""
        self._history_open.clear()

    def release_history(self) -> None:
        self._history_open.set()

    async def drop_connection(self, code: int = 4000) -> None:
        """Close the live gateway connection with `code` (4000 is resumable), as a network drop would."""
        session = self._session
        if session is None or session.ws is None:
            return
        ws, session.ws = session.ws, None
        async with session.send_lock:
            await ws.close(code=code, message=b"dropped by the test")

    def replay_on_resume(self, message: FakeMessage) -> None:
        """On the next RESUME, replay from this message's MESSAGE_CREATE on, though the bot had it (Discord
        delivers at least once)."""
        session = self._session
        assert session is not None
        self._replay_from = next(seq for seq, event, data in session.events
                                 if event == "MESSAGE_CREATE" and data.get("id") == message.id)

    @property
    def connected(self) -> bool:
        return self._session is not None and self._session.ws is not None

    # -- people acting -----------------------------------------------------------------------------------
    def attach(self, filename: str, data: bytes, content_type: str | None = None, *,
               declared_size: int | None = None, voice: bool = False) -> FakeAttachment:
        """A file a person sends (post it with `user_says(..., attachments=[...])`)."""
        attachment = FakeAttachment(self.snowflake(), filename, content_type, data, declared_size, voice=voice)
        self.files[attachment.id] = attachment
        return attachment

    async def user_says(self, channel_id: str, user: str | dict[str, Any], text: str, *,
                        mentions_bot: bool = False, guild_id: str | None = None,
                        reply_to: FakeMessage | str | None = None,
                        attachments: list[FakeAttachment] | None = None) -> FakeMessage:
        """A person posts `text` in a channel, thread or DM; the bot gets MESSAGE_CREATE."""
        channel = self.channels[str(channel_id)]
        author = self.user(user)
        gid = guild_id or channel.get("guild_id")
        mentions: list[dict[str, Any]] = []
        content = text
        if mentions_bot:
            tag = f"<@{self.bot['id']}>"
            if tag not in content:
                content = f"{tag} {content}"
            mentions.append(self.bot)
        reference = None
        if reply_to is not None:
            ref_id = reply_to.id if isinstance(reply_to, FakeMessage) else str(reply_to)
            reference = {"message_id": ref_id, "channel_id": str(channel_id), "guild_id": gid}
        message = FakeMessage(self.snowflake(), str(channel_id), author, [content], guild_id=gid,
                              member=self._member(gid, author) if gid else None, mentions=mentions,
                              reference=reference,
                              attachments=[a.as_api(self.url, str(channel_id)) for a in attachments or ()],
                              flags=FLAG_IS_VOICE_MESSAGE if any(a.voice for a in attachments or ()) else 0)
        self.messages[message.id] = message
        channel["last_message_id"] = message.id
        self._touch()
        await self.dispatch("MESSAGE_CREATE", self._message_payload(message, for_gateway=True))
        return message

    def message_event(self, channel_id: str, user: str | dict[str, Any], text: str, *,
                      mentions_bot: bool = False) -> dict[str, Any]:
        """The MESSAGE_CREATE a person's message would bring, for a message that is never posted: what a test
        makes a malformed event from (send it with `dispatch`)."""
        channel = self.channels[str(channel_id)]
        author, gid = self.user(user), channel.get("guild_id")
        content = f"<@{self.bot['id']}> {text}" if mentions_bot else text
        message = FakeMessage(self.snowflake(), str(channel_id), author, [content], guild_id=gid,
                              member=self._member(gid, author) if gid else None,
                              mentions=[self.bot] if mentions_bot else [])
        return self._message_payload(message, for_gateway=True)

    async def deliver_again(self, message: FakeMessage) -> None:
        """Send a message's MESSAGE_CREATE once more on the live session (Discord delivers at least once)."""
        await self.dispatch("MESSAGE_CREATE", self._message_payload(message, for_gateway=True))

    async def slash(self, channel_id: str, user: str | dict[str, Any], name: str,
                    options: dict[str, str] | None = None, *, guild_id: str | None = None) -> FakeInteraction:
        """A person runs the application command `/name` with string options; the bot gets
        INTERACTION_CREATE."""
        command = next((c for c in self.commands if c["name"] == name), None)
        data = {"id": command["id"] if command else self.snowflake(), "name": name, "type": 1,
                "options": [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()]}
        return await self._interact(channel_id, user, 2, name, data, guild_id=guild_id)

    async def press(self, user: str | dict[str, Any], message: FakeMessage, custom_id: str) -> FakeInteraction:
        """A person presses the button `custom_id` under the bot's `message`: INTERACTION_CREATE of type 3
        (a message component), answered through the same callback as a command."""
        if not any(cid == custom_id for _, cid in message.buttons):
            raise ValueError(f"message {message.id} shows no button {custom_id!r}")
        data = {"custom_id": custom_id, "component_type": 2}
        return await self._interact(message.channel_id, user, 3, custom_id, data, guild_id=message.guild_id,
                                    message=message)

    async def _interact(self, channel_id: str, user: str | dict[str, Any], kind: int, name: str,
                        data: dict[str, Any], *, guild_id: str | None,
                        message: FakeMessage | None = None) -> FakeInteraction:
        channel = self.channels[str(channel_id)]
        person = self.user(user)
        gid = guild_id or channel.get("guild_id")
        interaction_id, token = self.snowflake(), "aW50ZXJhY3Rpb24" + secrets.token_urlsafe(24)
        payload: dict[str, Any] = {
            "id": interaction_id, "application_id": self.application_id, "type": kind, "token": token,
            "version": 1, "locale": "en-US", "app_permissions": "2248473465835073",
            "attachment_size_limit": 10 * 1024 * 1024, "entitlements": [], "data": data,
            "channel_id": str(channel_id), "channel": self._channel_payload(channel),
        }
        if message is not None:
            payload["message"] = self._message_payload(message)
        if gid:
            payload.update(guild_id=gid, guild_locale="en-US", context=0,
                           authorizing_integration_owners={"0": gid},
                           member={**self._member(gid, person, with_user=True), "permissions": "2248473465835073"},
                           guild={"id": gid, "locale": "en-US", "features": []})
        else:
            payload.update(user=person, context=1, authorizing_integration_owners={"0": gid or "0"})
        interaction = FakeInteraction(interaction_id, token, name, str(channel_id), gid, person, payload,
                                      message_id=message.id if message is not None else None)
        self.interactions[interaction_id] = interaction
        self._touch()
        await self.dispatch("INTERACTION_CREATE", payload)
        return interaction

    # -- gateway -----------------------------------------------------------------------------------------
    async def dispatch(self, event: str, data: Any) -> None:
        """Send a DISPATCH to the bot; while it is disconnected the event waits for its RESUME."""
        session = self._session
        if session is None:
            return
        async with session.send_lock:
            session.seq += 1
            session.events.append((session.seq, event, data))
            if session.ws is not None and not session.ws.closed:
                with contextlib.suppress(ConnectionError, RuntimeError):  # dropped: replayed on RESUME
                    await session.ws.send_str(json.dumps({"op": 0, "t": event, "s": session.seq, "d": data}))

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.add(ws)
        self.gateway_paths.append(request.path)
        session: _Session | None = None
        try:
            await self._gateway_open.wait()
            await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval_ms}}))
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                frame = json.loads(msg.data)
                op, d = frame.get("op"), frame.get("d")
                if op == 1:
                    await ws.send_str(json.dumps({"op": 11}))
                elif op == 2:
                    session = await self._identify(ws, d)
                elif op == 6:
                    session = await self._resume(ws, d)
                # presence updates (3), member requests (8) etc. are accepted and ignored
        finally:
            self._sockets.discard(ws)
            if session is not None and session.ws is ws:
                session.ws = None
            self._touch()
        return ws

    async def _identify(self, ws: web.WebSocketResponse, d: dict[str, Any]) -> _Session | None:
        self.identifies.append(d)
        if d.get("token") != self.token:
            await ws.close(code=4004, message=b"Authentication failed.")
            return None
        intents = int(d.get("intents") or 0)
        if self.reject_privileged_intents and intents & PRIVILEGED_INTENTS:
            await ws.close(code=4014, message=b"Disallowed intent(s).")
            return None
        session = _Session(secrets.token_hex(16), intents, ws=ws)
        self._sessions[session.id] = session
        self._session = session
        ready = {"v": 10, "user": self.bot, "session_id": session.id, "session_type": "normal",
                 "resume_gateway_url": self.resume_gateway_url, "private_channels": [], "relationships": [],
                 "presences": [], "guild_join_requests": [], "geo_ordered_rtc_regions": [],
                 "application": {"id": self.application_id, "flags": 0},
                 "guilds": [{"id": g, "unavailable": True} for g in self.guilds], "_trace": ["fake-discord"]}
        if d.get("shard"):
            ready["shard"] = d["shard"]  # Discord echoes the shard a sharded IDENTIFY asked for
        await self.dispatch("READY", ready)
        for guild in self.guilds.values():
            await self.dispatch("GUILD_CREATE", self._guild_create(guild))
        self._touch()
        return session

    async def _resume(self, ws: web.WebSocketResponse, d: dict[str, Any]) -> _Session | None:
        self.resumes.append(d)
        session = self._sessions.get(d.get("session_id") or "")
        if session is None or d.get("token") != self.token:
            await ws.send_str(json.dumps({"op": 9, "d": False}))
            return None
        async with session.send_lock:
            seen = int(d.get("seq") or 0)
            first = max(0, seen - self.replay_overlap)
            if self._replay_from is not None:
                first = min(first, self._replay_from - 1)
                self._replay_from = None
            for seq, event, data in session.events:
                if seq > first and event not in ("READY", "RESUMED"):
                    self.replayed.append((seq, event, data))
                    await ws.send_str(json.dumps({"op": 0, "t": event, "s": seq, "d": data}))
            session.seq += 1
            session.events.append((session.seq, "RESUMED", {}))
            await ws.send_str(json.dumps({"op": 0, "t": "RESUMED", "s": session.seq, "d": {}}))
            session.ws = ws
            self._session = session
        self._touch()
        return session

    # -- REST plumbing -----------------------------------------------------------------------------------
    @web.middleware
    async def _json_errors(self, request: web.Request, handler: Callable[..., Any]) -> web.StreamResponse:
        """Unknown routes answer as Discord does (JSON, 404/405) and are recorded in `unknown_routes`."""
        try:
            return await handler(request)
        except (web.HTTPNotFound, web.HTTPMethodNotAllowed) as exc:
            self.unknown_routes.append(f"{request.method} {request.path}")
            return self._json({"message": f"{exc.status}: {exc.reason}", "code": 0}, exc.status)

    @staticmethod
    def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
        return web.Response(body=json.dumps(data).encode(), status=status,
                            headers={"Content-Type": "application/json", **(headers or {})})

    def _limit_for(self, method: str, route: str) -> tuple[int, float]:
        return self._limits.get((method, route), (self.default_limit, self.default_window))

    def _major(self, request: web.Request) -> str:
        info = request.match_info
        return (info.get("channel_id") or info.get("guild_id") or info.get("token") or info.get("application_id")
                or "")

    async def _rest(self, request: web.Request, handler: Callable[..., Any], *, bot_auth: bool = True
                    ) -> web.Response:
        route = request.match_info.route.resource.canonical[len(API_PREFIX):]  # type: ignore[union-attr]
        body: Any = None
        if request.content_type == "multipart/form-data":
            body = await _multipart(request)
        elif request.can_read_body:
            raw = await request.read()
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
        call = RestCall(request.method, request.path[len(API_PREFIX):], route, body)
        self.requests.append(call)
        try:
            if bot_auth and request.headers.get("Authorization") != f"Bot {self.token}":
                raise DiscordError(401, 0, "401: Unauthorized")
            headers = self._rate_limit(request, route)
            result = await handler(request, body)
        except _RateLimited as limited:
            call.status = 429
            return limited.response
        except DiscordError as exc:
            call.status = exc.status
            data: dict[str, Any] = {"message": exc.message, "code": exc.code}
            if exc.errors:
                data["errors"] = exc.errors
            return self._json(data, exc.status)
        finally:
            self._touch()
        if result is None:
            call.status = 204
            return web.Response(status=204, headers=headers)
        call.status = 200
        return self._json(result, 200, headers)

    def _rate_limit(self, request: web.Request, route: str) -> dict[str, str]:
        method = request.method
        limit, window = self._limit_for(method, route)
        key = (method, route, self._major(request))
        now = time.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None or now - bucket.started >= bucket.window:
            bucket = self._buckets[key] = _Bucket(limit, window, started=now)
        reset_after = math.ceil(max(0.0, bucket.started + bucket.window - now) * 1000) / 1000
        bucket_hash = f"{abs(hash((method, route))) :x}"

        def headers(remaining: int) -> dict[str, str]:
            return {"X-RateLimit-Limit": str(bucket.limit), "X-RateLimit-Remaining": str(remaining),
                    "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
                    "X-RateLimit-Reset-After": f"{reset_after:.3f}", "X-RateLimit-Bucket": bucket_hash}

        for cue in self._cues:
            if cue.times > 0 and cue.method == method and (cue.route is None or cue.route == route):
                cue.times -= 1
                self._record_429(request, route, cue.retry_after, cued=True)
                raise _RateLimited(self._too_many(cue.retry_after, headers(0), is_global=cue.is_global))
        if bucket.used >= bucket.limit:
            self._record_429(request, route, reset_after, cued=False)
            raise _RateLimited(self._too_many(reset_after, headers(0)))
        bucket.used += 1
        return headers(bucket.limit - bucket.used)

    def _record_429(self, request: web.Request, route: str, retry_after: float, *, cued: bool) -> None:
        self.rate_limited.append(RateLimitHit(request.method, route, request.path[len(API_PREFIX):],
                                              retry_after, cued))

    def _too_many(self, retry_after: float, headers: dict[str, str], is_global: bool = False) -> web.Response:
        extra = {"Retry-After": str(max(1, round(retry_after))), "Via": "1.1 google",
                 "X-RateLimit-Scope": "global" if is_global else "user"}
        if is_global:
            extra["X-RateLimit-Global"] = "true"
        return self._json({"message": "You are being rate limited.", "retry_after": round(retry_after, 3),
                           "global": is_global, "code": 0}, 429, {**headers, **extra})

    # -- payloads ----------------------------------------------------------------------------------------
    def _channel_payload(self, channel: dict[str, Any]) -> dict[str, Any]:
        return dict(channel)

    def _message_payload(self, m: FakeMessage, *, for_gateway: bool = False,
                         with_reference: bool = True) -> dict[str, Any]:
        content = m.content
        if (for_gateway and not self.grant_message_content and m.guild_id and not m.by_bot
                and not any(u["id"] == self.bot["id"] for u in m.mentions)):
            content = ""  # what Discord sends a bot without the Message Content intent
        data: dict[str, Any] = {
            "id": m.id, "channel_id": m.channel_id, "author": m.author, "content": content,
            "timestamp": m.timestamp, "edited_timestamp": m.edited_timestamp, "tts": False,
            "mention_everyone": False, "mentions": m.mentions, "mention_roles": [], "attachments": m.attachments,
            "embeds": [], "components": m.components, "pinned": False, "type": 19 if m.reference else 0,
            "flags": m.flags,
        }
        channel = self.channels.get(m.channel_id, {})
        if channel.get("type") == CH_PUBLIC_THREAD:
            data["position"] = 0
        if m.guild_id:
            data["guild_id"] = m.guild_id
            if m.member is not None:
                data["member"] = m.member
        if m.webhook_id:
            data["webhook_id"] = m.webhook_id
            data["application_id"] = self.application_id
        if m.reference:
            data["message_reference"] = {"type": 0, **m.reference}
            if with_reference:
                ref = self.messages.get(m.reference["message_id"])
                data["referenced_message"] = (self._message_payload(ref, for_gateway=for_gateway,
                                                                    with_reference=False)
                                              if ref and not ref.deleted else None)
        return data

    # -- the CDN -----------------------------------------------------------------------------------------
    async def _cdn(self, request: web.Request) -> web.StreamResponse:
        """An attachment's bytes: no token (the URL is signed), the declared size as Content-Length unless
        the declared size lies, then chunked."""
        attachment = self.files.get(request.match_info["attachment_id"])
        if attachment is None or not request.query.get("hm"):
            return web.Response(status=404, text="not found")
        response = web.StreamResponse(headers={"Content-Type": attachment.content_type or "application/octet-stream"})
        if attachment.declared_size is None:
            response.content_length = len(attachment.data)
        else:
            response.enable_chunked_encoding()
        await response.prepare(request)
        self.cdn_begun.append(attachment.id)
        sent = 0
        try:
            await self._cdn_open.wait()
            for start in range(0, len(attachment.data), 64 * 1024):
                piece = attachment.data[start:start + 64 * 1024]
                await response.write(piece)
                sent += len(piece)
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client stopped reading (an attachment over its cap)
        finally:
            self.cdn_downloads.append((attachment.id, sent))
        return response

    # -- REST handlers -----------------------------------------------------------------------------------
    async def _users_me(self, request: web.Request) -> web.Response:
        async def handle(_: web.Request, __: Any) -> Any:
            return {**self.bot, "verified": True, "mfa_enabled": False, "email": None, "locale": "en-US"}
        return await self._rest(request, handle)

    async def _application_me(self, request: web.Request) -> web.Response:
        async def handle(_: web.Request, __: Any) -> Any:
            owner = self.user("Owner")
            return {"id": self.application_id, "name": self.bot["global_name"], "description": "",
                    "icon": None, "rpc_origins": [], "bot_public": True, "bot_require_code_grant": False,
                    "owner": owner, "team": None, "verify_key": "0" * 64, "flags": 0, "summary": "",
                    "bot": self.bot, "interactions_endpoint_url": None, "tags": []}
        return await self._rest(request, handle)

    async def _gateway_info(self, request: web.Request) -> web.Response:
        async def handle(_: web.Request, __: Any) -> Any:
            return {"url": self.gateway_url}
        return await self._rest(request, handle, bot_auth=False)

    async def _gateway_bot(self, request: web.Request) -> web.Response:
        async def handle(_: web.Request, __: Any) -> Any:
            return {"url": self.gateway_url, "shards": 1,
                    "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0,
                                            "max_concurrency": 1}}
        return await self._rest(request, handle)

    def _channel(self, channel_id: str) -> dict[str, Any]:
        channel = self.channels.get(channel_id)
        if channel is None:
            raise DiscordError(404, 10003, "Unknown Channel")
        return channel

    def _message(self, channel_id: str, message_id: str) -> FakeMessage:
        message = self.messages.get(message_id)
        if message is None or message.deleted or message.channel_id != channel_id:
            raise DiscordError(404, 10008, "Unknown Message")
        return message

    @staticmethod
    def _check_content(body: dict[str, Any], *, required: bool) -> str | None:
        content = body.get("content")
        if content is not None and len(content) > MAX_CONTENT:
            raise DiscordError(400, 50035, "Invalid Form Body", {"content": {"_errors": [
                {"code": "BASE_TYPE_MAX_LENGTH", "message": f"Must be {MAX_CONTENT} or fewer in length."}]}})
        if required and not (content or body.get("embeds") or body.get("sticker_ids")):
            raise DiscordError(400, 50006, "Cannot send an empty message")
        return content

    async def _get_channel(self, request: web.Request) -> web.Response:
        async def handle(req: web.Request, _: Any) -> Any:
            return self._channel_payload(self._channel(req.match_info["channel_id"]))
        return await self._rest(request, handle)

    def _post(self, channel_id: str, content: str, body: dict[str, Any], **extra: Any) -> FakeMessage:
        channel = self.channels[channel_id]
        reference = None
        ref = body.get("message_reference")
        if ref:
            target = self.messages.get(str(ref.get("message_id")))
            if target is None or target.deleted or target.channel_id != channel_id:
                if ref.get("fail_if_not_exists", True):
                    raise DiscordError(400, 50035, "Invalid Form Body", {"message_reference": {"_errors": [
                        {"code": "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "message": "Unknown message"}]}})
            else:
                reference = {"message_id": target.id, "channel_id": channel_id,
                             "guild_id": channel.get("guild_id")}
        message = FakeMessage(self.snowflake(), channel_id, self.bot, [content],
                              guild_id=channel.get("guild_id"), reference=reference, **extra)
        self.messages[message.id] = message
        channel["last_message_id"] = message.id
        return message

    async def _create_message(self, request: web.Request) -> web.Response:
        async def handle(req: web.Request, body: Any) -> Any:
            channel_id = req.match_info["channel_id"]
            self._channel(channel_id)
            body = body if isinstance(body, dict) else {}
            uploads: list[FakeAttachment] = body.get("_uploads") or []
            if sum(len(a.data) for a in uploads) > MAX_UPLOAD:
                raise DiscordError(413, 40005, "Request entity too large")
            content = self._check_content(body, required=not uploads) or ""
            for upload in uploads:
                self.files[upload.id] = upload
            message = self._post(channel_id, content, body, components=list(body.get("components") or []),
                                 attachments=[a.as_api(self.url, channel_id) for a in uploads])
            payload = self._message_payload(message)
            await self.dispatch("MESSAGE_CREATE", self._message_payload(message, for_gateway=True))
            return payload
        return await self._rest(request, handle)

    async def _list_messages(self, request: web.Request) -> web.Response:
        async def handle(req: web.Request, _: Any) -> Any:
            channel_id = req.match_info["channel_id"]
            self._channel(channel_id)
            limit, anchors = req.query.get("limit", "50"), [k for k in ("around", "before", "after") if k in req.query]
            if not limit.isdigit() or not 1 <= int(limit) <= 100:
                raise DiscordError(400, 50035, "Invalid Form Body", {"limit": {"_errors": [
                    {"code": "NUMBER_TYPE_MAX", "message": "int value should be less than or equal to 100."}]}})
            if len(anchors) > 1 or not all(req.query[k].isdigit() for k in anchors):
                raise DiscordError(400, 50035, "Invalid Form Body", {anchors[-1]: {"_errors": [
                    {"code": "SNOWFLAKE_TYPE_INVALID", "message": "Only one of before, after and around, "
                                                                  "as a snowflake."}]}})
            await self._history_open.wait()
            listed, n = self.messages_in(channel_id), int(limit)  # oldest first
            anchor = int(req.query[anchors[0]]) if anchors else None
            if anchors == ["after"]:
                page = [m for m in listed if int(m.id) > anchor][:n]
            elif anchors == ["around"]:
                older = [m for m in listed if int(m.id) < anchor][-(n // 2):] if n > 1 else []
                page = older + [m for m in listed if int(m.id) >= anchor][:n - len(older)]
            else:
                page = [m for m in listed if anchor is None or int(m.id) < anchor][-n:]
            return [self._listed(m) for m in reversed(page)]
        return await self._rest(request, handle)

    def _listed(self, message: FakeMessage) -> dict[str, Any]:
        """A message as the REST API lists it: content as the gateway shows it, without the gateway's extras."""
        data = self._message_payload(message, for_gateway=True)
        data.pop("guild_id", None)
        data.pop("member", None)
        return data

    async def _get_member(self, request: web.Request) -> web.Response:
        async def handle(req: web.Request, _: Any) -> Any:
            guild_id, user_id = req.match_info["guild_id"], req.match_info["user_id"]
            if guild_id not in self.guilds:
                raise DiscordError(404, 10004, "Unknown Guild")
            user = next((u for u in [self.bot, *self.users.values()] if u["id"] == user_id), None)
            if user is None:
                raise DiscordError(404, 10007, "Unknown Member")
            return self._member(guild_id, user, with_user=True)
        return await self._rest(request, handle)

    async def _get_message(self, request: web.Request) -> web.Response:
        async def handle(req: web.Request, _: Any) -> Any:
            return self._message_payload(self._message(req.match_info["channel_id"], req.match_info["message_id"]))
        return await self._rest(request, handle)

    def _edit(self, message: FakeMessage, body: dict[str, Any]) -> dict[str, Any]:
        if message.author["id"] != self.bot["id"]:
            raise DiscordError(403, 50005, "Cannot edit a message authored by another user")
        content = self._check_content(body, required=False)
        if content is not None:
            message.history.append(content)
            message.edited_timestamp = _now_iso()
        if "components" in body:
            message.components = list(body["components"] or [])
        message.flags &= ~FLAG_LOADING
        return self._message_payload(message)

    async def _edit_message(self, request: web.Request) -> web.Response:
        async def handle(req: web.Request, body: Any) -> Any:
            message = self._message(req.match_info["channel_id"], req.match_info["message_id"])
            payload = self._edit(message, body if isinstance(body, dict) else {})
            await self.dispatch("MESSAGE_UPDATE", payload)
            return payload
        return await self._rest(request, handle)

    async def _delete_message(self, request: web.Request) -> web.Response:
        async def handle(req: web.Request, _: Any) -> Any:
            message = self._message(req.match_info["channel_id"], req.match_info["message_id"])
            if message.author["id"] != self.bot["id"]:
                raise DiscordError(403, 50013, "Missing Permissions")
            message.deleted = True
            await self.dispatch("MESSAGE_DELETE", {"id": message.id, "channel_id": message.channel_id,
                                                   **({"guild_id": message.guild_id} if message.guild_id else {})})
            return None
        return await self._rest(request, handle)

    async def _typing(self, request: web.Request) -> web.Response:
        async def handle(req: web.Request, _: Any) -> Any:
            self._channel(req.match_info["channel_id"])
            return None
        return await self._rest(request, handle)

    async def _start_thread(self, request: web.Request) -> web.Response:
        async def handle(req: web.Request, body: Any) -> Any:
            channel_id, message_id = req.match_info["channel_id"], req.match_info["message_id"]
            parent = self._channel(channel_id)
            if parent["type"] != CH_GUILD_TEXT:
                raise DiscordError(400, 50024, "Cannot execute action on this channel type")
            self._message(channel_id, message_id)
            if message_id in self.channels:
                raise DiscordError(400, 160004, "A thread has already been created for this message")
            body = body if isinstance(body, dict) else {}
            name = str(body.get("name") or "").strip()
            if not 1 <= len(name) <= 100:
                raise DiscordError(400, 50035, "Invalid Form Body", {"name": {"_errors": [
                    {"code": "BASE_TYPE_BAD_LENGTH", "message": "Must be between 1 and 100 in length."}]}})
            archive = int(body.get("auto_archive_duration") or 1440)
            thread = {"id": message_id, "type": CH_PUBLIC_THREAD, "guild_id": parent["guild_id"],
                      "parent_id": channel_id, "owner_id": self.bot["id"], "name": name,
                      "last_message_id": None, "rate_limit_per_user": 0, "message_count": 0,
                      "member_count": 1, "total_message_sent": 0, "flags": 0, "applied_tags": [],
                      "thread_metadata": {"archived": False, "auto_archive_duration": archive,
                                          "archive_timestamp": _now_iso(), "locked": False,
                                          "create_timestamp": _now_iso()}}
            self.channels[message_id] = thread
            self.guilds[parent["guild_id"]]["threads"].append(message_id)
            await self.dispatch("THREAD_CREATE", {**thread, "newly_created": True})
            return thread
        return await self._rest(request, handle)

    async def _bulk_commands(self, request: web.Request) -> web.Response:
        async def handle(req: web.Request, body: Any) -> Any:
            if req.match_info["application_id"] != self.application_id:
                raise DiscordError(403, 50035, "Invalid application")
            commands = []
            for spec in body or []:
                existing = next((c for c in self.commands if c["name"] == spec["name"]), None)
                commands.append({"type": 1, "options": [], "default_member_permissions": None, "nsfw": False,
                                 "contexts": None, "integration_types": [0], "name_localizations": None,
                                 "description_localizations": None, **spec,
                                 "id": existing["id"] if existing else self.snowflake(),
                                 "application_id": self.application_id, "version": self.snowflake()})
            self.commands = commands
            self.command_syncs += 1
            return commands
        return await self._rest(request, handle)

    async def _list_commands(self, request: web.Request) -> web.Response:
        async def handle(_: web.Request, __: Any) -> Any:
            return self.commands
        return await self._rest(request, handle)

    # -- interactions ------------------------------------------------------------------------------------
    def _interaction(self, token: str, *, check_ttl: bool = True) -> FakeInteraction:
        found = next((i for i in self.interactions.values() if i.token == token), None)
        if found is None:
            raise DiscordError(401, 50027, "Invalid Webhook Token")
        if check_ttl and time.monotonic() - found.dispatched_at > self.interaction_token_ttl:
            raise DiscordError(401, 50027, "Invalid Webhook Token")
        return found

    async def _interaction_callback(self, request: web.Request) -> web.Response:
        async def handle(req: web.Request, body: Any) -> Any:
            interaction = self.interactions.get(req.match_info["interaction_id"])
            if interaction is None or interaction.token != req.match_info["token"]:
                raise DiscordError(404, 10062, "Unknown interaction")
            if interaction.callback_type is not None:
                raise DiscordError(400, 40060, "Interaction has already been acknowledged.")
            if time.monotonic() - interaction.dispatched_at > self.interaction_ack_window:
                raise DiscordError(404, 10062, "Unknown interaction")
            body = body if isinstance(body, dict) else {}
            kind = int(body.get("type", 0))
            data = body.get("data") or {}
            interaction.callback_type, interaction.callback_at = kind, time.monotonic()
            interaction.callback_data = dict(data)
            resource: dict[str, Any] = {"type": kind}
            if kind in (6, 7) and interaction.message_id is None:
                raise DiscordError(400, 50035, "Invalid interaction response type")  # only for components
            if kind == 7:  # update the message whose button was pressed
                pressed = self._message(interaction.channel_id, interaction.message_id or "")
                resource["message"] = self._edit(pressed, data)
                await self.dispatch("MESSAGE_UPDATE", resource["message"])
            elif kind == 5:  # deferred: Discord shows "<bot> is thinking…"
                message = self._post(interaction.channel_id, "", {}, webhook_id=self.application_id,
                                     interaction_id=interaction.id, flags=FLAG_LOADING | int(data.get("flags") or 0))
                interaction.original_id = message.id
            elif kind == 4:
                content = self._check_content(data, required=True) or ""
                message = self._post(interaction.channel_id, content, {}, webhook_id=self.application_id,
                                     interaction_id=interaction.id, flags=int(data.get("flags") or 0))
                interaction.original_id = message.id
                resource["message"] = self._message_payload(message)
            elif kind not in (1, 6):  # 6: a component press acknowledged, the message left as it is
                raise DiscordError(400, 50035, "Invalid interaction response type")
            if req.query.get("with_response") not in ("1", "true", "True"):
                return None
            return {"interaction": {"id": interaction.id, "type": interaction.payload["type"],
                                    "response_message_id": interaction.original_id,
                                    "response_message_loading": kind == 5,
                                    "response_message_ephemeral": bool(int(data.get("flags") or 0) & 64)},
                    "resource": resource}
        return await self._rest(request, handle, bot_auth=False)

    async def _followup(self, request: web.Request) -> web.Response:
        async def handle(req: web.Request, body: Any) -> Any:
            if req.match_info["application_id"] != self.application_id:
                raise DiscordError(404, 10015, "Unknown Webhook")
            interaction = self._interaction(req.match_info["token"])
            body = body if isinstance(body, dict) else {}
            content = self._check_content(body, required=True) or ""
            message = self._post(interaction.channel_id, content, {}, webhook_id=self.application_id,
                                 interaction_id=interaction.id, flags=int(body.get("flags") or 0))
            interaction.followup_ids.append(message.id)
            payload = self._message_payload(message)
            await self.dispatch("MESSAGE_CREATE", self._message_payload(message, for_gateway=True))
            return payload if req.query.get("wait") in ("1", "true", "True") else None
        return await self._rest(request, handle, bot_auth=False)

    def _webhook_message(self, req: web.Request) -> tuple[FakeInteraction, FakeMessage]:
        if req.match_info["application_id"] != self.application_id:
            raise DiscordError(404, 10015, "Unknown Webhook")
        interaction = self._interaction(req.match_info["token"])
        mid = req.match_info["message_id"]
        if mid == "@original":
            if interaction.original_id is None:
                raise DiscordError(404, 10008, "Unknown Message")
            mid = interaction.original_id
        message = self.messages.get(mid)
        if message is None or message.deleted or message.interaction_id != interaction.id:
            raise DiscordError(404, 10008, "Unknown Message")
        return interaction, message

    async def _webhook_get(self, request: web.Request) -> web.Response:
        async def handle(req: web.Request, _: Any) -> Any:
            return self._message_payload(self._webhook_message(req)[1])
        return await self._rest(request, handle, bot_auth=False)

    async def _webhook_edit(self, request: web.Request) -> web.Response:
        async def handle(req: web.Request, body: Any) -> Any:
            _, message = self._webhook_message(req)
            payload = self._edit(message, body if isinstance(body, dict) else {})
            await self.dispatch("MESSAGE_UPDATE", payload)
            return payload
        return await self._rest(request, handle, bot_auth=False)

    async def _webhook_delete(self, request: web.Request) -> web.Response:
        async def handle(req: web.Request, _: Any) -> Any:
            _, message = self._webhook_message(req)
            message.deleted = True
            return None
        return await self._rest(request, handle, bot_auth=False)


class _RateLimited(Exception):
    def __init__(self, response: web.Response) -> None:
        super().__init__("rate limited")
        self.response = response


async def _multipart(request: web.Request) -> dict[str, Any]:
    """A message with files, as discord.py sends it: ``payload_json`` and a ``files[n]`` part per file. The
    files come back as attachments under ``_uploads``, each with a new id (as Discord gives them)."""
    form = await request.post()
    try:
        body = json.loads(str(form.get("payload_json") or "{}"))
    except ValueError:
        body = {}
    uploads = []
    for name, value in form.items():
        if name.startswith("files[") and isinstance(value, web.FileField):
            uploads.append(FakeAttachment(str(next(_UPLOAD_IDS)), value.filename, value.content_type,
                                          value.file.read(), None))
    body["_uploads"] = uploads
    return body
