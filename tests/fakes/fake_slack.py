"""A fake Slack on 127.0.0.1: the Web API the adapter calls, and Slack's side of the Events API and
Socket Mode, so slack-bolt and slack-sdk run unpatched against it.

Web API (`/api/<method>`, form, JSON or query bodies, bearer-token check like Slack's `invalid_auth`):
auth.test, chat.postMessage, chat.update, chat.delete, chat.startStream / appendStream / stopStream,
conversations.replies, users.info, chat.postEphemeral (kept in `ephemerals`, seen by one person only),
apps.connections.open (app-level token). Block Kit `blocks` are kept with each message (`buttons()`). Every call is recorded in
`calls`; every channel keeps its messages with their edit histories, so a test asserts on what people
in the channel would see (`thread()`, `visible()`) and whom a message notified (`pings`: the mentions
Slack reads in any of its versions), not on which calls were made.

Faults on cue: `fail("chat.update", status=429, retry_after=1)` answers the next call(s) of a method with
an HTTP 429 + `Retry-After` (Slack's rate limit) or any `error` code. Text over 40,000 characters is
refused with `msg_too_long`, as Slack does (it would otherwise cut it).

Slack's side of the Events API: `post_event()` / `post_command()` send correctly signed requests
(``v0=HMAC-SHA256(secret, "v0:<ts>:<body>")``) to the gateway, with knobs to forge the signature, age
the timestamp or add `X-Slack-Retry-Num`; each returns the HTTP status and the time the gateway took to
answer (the ack time). `say()` plays a person posting a message: it is stored in the channel and the
events Slack would send go out at once and concurrently (`message.*` always — the bot is a member of every
channel —, plus `app_mention` when the text mentions the bot). When the bot posts with chat.postMessage,
the fake echoes the `message` event Slack delivers for the bot's own posts (with `bot_id`), so every test
also checks that the bot does not answer itself.

`press()` plays a person pressing a Block Kit button under a bot message: a signed `block_actions`
interactivity request (form-encoded `payload=<JSON>`, as Slack sends it; an `interactive` envelope in
Socket Mode), forgeable like events.

Files: `upload()` holds a file a person shares (its bytes, name and type, whether Slack states its size);
`say(..., files=[...])` posts the message with them (subtype `file_share`, the file objects on the message
and app_mention events). Each is served at its `url_private_download` on this server
(`/files-pri/<team>-<id>/download/<name>`), only with the bot token as ``Authorization: Bearer`` (403
otherwise), with `Content-Length` or chunked when the size is not stated; files.info answers with the file.
Every download is recorded in `downloads` (file id, whether the token was right, bytes sent).
`hold_downloads()` keeps each download open after its headers (named in `downloads_begun`) until
`release_downloads()`, as a large file on a slow link would: a test can kill the gateway in the middle.
The bot's uploads take Slack's current two steps: files.getUploadURLExternal (filename, length) returns an
upload URL on this server (`/upload/v1/<file id>`, as files.slack.com's, no token needed), which takes the
bytes (a length other than the one declared is refused); files.completeUploadExternal then shares the
uploaded files into `channel_id` (and `thread_ts`) as one bot message with `initial_comment` as its text
and the files on it (`SlackMessage.files`, each with its bytes in `uploads`). Over 1 GB is `file_too_large`.
`fail("files.completeUploadExternal")` scripts a 429 in the middle of an upload.

Socket Mode: apps.connections.open returns a ws:// URL of this server; `say()`/`post_event()` then go
over the websocket as envelopes and wait for the envelope ack. `drop_sockets()` closes every connection
from the server side (the client must reconnect); `request_refresh()` sends Slack's `disconnect`
message (`reason: refresh_requested`).

Limits that are this fake's assumptions (Slack does not document them exactly): native streams refuse
chat.startStream without `thread_ts`, and, in channels, without `recipient_user_id` and
`recipient_team_id`; a streamed message longer than 40,000 characters is refused with `msg_too_long`.
Documented by Slack and kept here: `markdown_text` holds at most 12,000 characters per stream call.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import json
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
from aiohttp import web

from fakes.loopback import LoopbackServer

MAX_TEXT = 40_000
MAX_UPLOAD = 1024 * 1024 * 1024  # Slack's limit for one uploaded file
MAX_STREAM_CHUNK = 12_000

TEAM = "T0HERMES"
BOT_USER = "UHERMESBOT"
BOT_ID = "BHERMES"
APP_ID = "AHERMES"
BOT_TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"
SIGNING_SECRET = "test-signing-secret"


def sign(secret: str, timestamp: str, body: str) -> str:
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return f"v0={digest}"


_PING = re.compile(r"<(@[UW][A-Z0-9]+|!(?:here|channel|everyone)|!subteam\^[A-Z0-9]+)(?:\|[^<>]*)?>")


def pings(text: str) -> list[str]:
    """Whom Slack notifies for `text`: its user mentions (``<@U…>``, ``<@W…>``, labelled or not), user group
    mentions (``<!subteam^S…>``) and special mentions (``<!here>``, ``<!channel>``, ``<!everyone>``), as
    ``api.slack.com/reference/surfaces/formatting`` spells them; mrkdwn or not, streamed or not."""
    return [m.group(1) for m in _PING.finditer(text)]


def unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


@dataclass
class SlackMessage:
    """One message as Slack stores it; `edits` holds every earlier text, oldest first."""

    channel: str
    ts: str
    text: str
    user: str | None = None
    bot_id: str | None = None
    thread_ts: str | None = None
    mrkdwn: bool = True
    streaming: bool = False
    streamed: bool = False  # made with chat.startStream
    deleted: bool = False
    edits: list[str] = field(default_factory=list)
    blocks: list[dict[str, Any]] = field(default_factory=list)

    files: list[dict[str, Any]] = field(default_factory=list)  # the file objects shared with it

    def buttons(self) -> list[dict[str, Any]]:
        """The buttons of the message's `actions` blocks, in order (each Slack's button element)."""
        return [e for b in self.blocks if b.get("type") == "actions" for e in b.get("elements", [])
                if e.get("type") == "button"]

    @property
    def from_bot(self) -> bool:
        return self.bot_id == BOT_ID

    @property
    def pings(self) -> list[str]:
        """Whom any version of the message notified (every frame of a streamed or edited reply counts)."""
        return [who for text in [*self.edits, self.text] for who in pings(text)]

    @property
    def visible(self) -> str:
        """The text a person reads (Slack's &amp; &lt; &gt; escapes undone)."""
        return unescape(self.text)

    def as_api(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": "message", "ts": self.ts, "text": self.text}
        if self.user:
            data["user"] = self.user
        if self.bot_id:
            data["bot_id"] = self.bot_id
        if self.thread_ts:
            data["thread_ts"] = self.thread_ts
        return data


@dataclass
class SlackFile:
    """A file a person shared: what Slack holds and serves at its `url_private_download`."""

    id: str
    name: str
    mimetype: str
    data: bytes
    state_size: bool = True  # False: neither the file object nor the download states the size
    subtype: str | None = None  # "slack_audio" for an audio clip recorded in Slack

    def as_api(self, base: str, team: str, user: str) -> dict[str, Any]:
        url = f"{base}/files-pri/{team}-{self.id}/download/{quote(self.name, safe='')}"
        data: dict[str, Any] = {
            "id": self.id, "created": int(time.time()), "timestamp": int(time.time()), "name": self.name,
            "title": self.name, "mimetype": self.mimetype, "filetype": self.name.rpartition(".")[2],
            "user": user, "mode": "hosted", "is_external": False, "url_private": url,
            "url_private_download": url, "permalink": f"{base}/files/{user}/{self.id}/{quote(self.name, safe='')}",
        }
        if self.state_size:
            data["size"] = len(self.data)
        if self.subtype:
            data["subtype"] = self.subtype
        return data


@dataclass
class ApiCall:
    method: str
    params: dict[str, Any]
    at: float  # time.monotonic() when the call arrived
    status: int = 200
    error: str | None = None
    answered: float | None = None  # time.monotonic() when Slack answered it (None: not yet)


@dataclass
class Fault:
    method: str
    status: int = 200
    error: str = "ratelimited"
    retry_after: float | None = None
    times: int = 1


@dataclass
class Delivery:
    """What Slack saw when it delivered one request to the app."""

    status: int
    body: str
    answered: float  # time.monotonic() when the app's answer (the ack) reached Slack, to order against `ApiCall.at`
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Channel:
    """A channel as `conversations.info` and `conversations.list` show it; `is_member`: the bot is in it."""

    id: str
    name: str
    is_member: bool = True
    is_private: bool = False
    is_archived: bool = False

    def as_api(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "is_channel": not self.is_private, "is_group": self.is_private,
                "is_im": False, "is_mpim": False, "is_private": self.is_private, "is_archived": self.is_archived,
                "is_member": self.is_member}


@dataclass
class User:
    id: str
    name: str
    real_name: str = ""
    display_name: str = ""
    is_bot: bool = False
    bot_id: str | None = None


class FakeSlack(LoopbackServer):
    """The server. `async with FakeSlack() as slack:`; point the adapter at `slack.api_url`."""

    def __init__(self, *, signing_secret: str = SIGNING_SECRET, echo_bot_posts: bool = True) -> None:
        self.signing_secret = signing_secret
        self.echo_bot_posts = echo_bot_posts
        self.team = TEAM
        self.bot_user = BOT_USER
        self.bot_id = BOT_ID
        self.users: dict[str, User] = {
            BOT_USER: User(BOT_USER, "hermes", "Hermes", "Hermes", is_bot=True, bot_id=BOT_ID),
            "UALICE": User("UALICE", "alice", "Alice Liddell", "Alice"),
            "UBOB": User("UBOB", "bob", "Bob Builder", "Bob"),
            "UOTHERBOT": User("UOTHERBOT", "otherbot", "Other Bot", "Other Bot", is_bot=True, bot_id="BOTHER"),
        }
        self.calls: list[ApiCall] = []
        self.channels: dict[str, Channel] = {}  # what conversations.info and conversations.list show
        self.messages: dict[str, list[SlackMessage]] = {}
        self.responses: list[dict[str, Any]] = []  # bodies posted to response_url
        self.ephemerals: list[dict[str, Any]] = []  # chat.postEphemeral params (channel, user, text, ...)
        self.deliveries: list[Delivery] = []
        self.events_url: str | None = None  # the app's request URL (HTTP mode)
        self.socket_acks: list[str] = []
        self.connections_opened = 0  # apps.connections.open calls
        self.files: dict[str, SlackFile] = {}
        self.downloads: list[tuple[str, bool, int]] = []  # (file id, token right, bytes sent)
        self.downloads_begun: list[str] = []  # file ids whose download got its headers
        self._downloads_open = asyncio.Event()
        self._downloads_open.set()
        self.uploads: dict[str, SlackFile] = {}  # the bot's uploads by file id (bytes received)
        self._upload_lengths: dict[str, int] = {}  # file id → declared length, until its bytes arrive
        self.sockets_accepted = 0  # websocket connections made
        self._faults: deque[Fault] = deque()
        self._slow: list[tuple[str, float]] = []
        self._sockets: list[web.WebSocketResponse] = []
        self._socket_ready = asyncio.Event()
        self._acks: dict[str, asyncio.Future] = {}
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self._base = int(time.time())
        self._tasks: set[asyncio.Task] = set()
        self._changed = asyncio.Condition()
        self._session: aiohttp.ClientSession | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/response/{id}", self._response_url)
        app.router.add_get("/ws", self._websocket)
        app.router.add_get("/files-pri/{team}-{file_id}/download/{name}", self._download)
        app.router.add_post("/upload/v1/{file_id}", self._upload)
        return app

    async def after_start(self) -> None:
        # Slack's deliveries never go through a proxy in these tests.
        self._session = aiohttp.ClientSession(trust_env=False)

    async def before_stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for ws in list(self._sockets):
            await ws.close()
        if self._session is not None:
            await self._session.close()

    @property
    def api_url(self) -> str:
        """For SLACK_API_URL (slack-sdk's `base_url`)."""
        return f"{self.url}/api/"

    # -- scripting ---------------------------------------------------------------------------------------

    def fail(self, method: str, *, status: int = 429, error: str = "ratelimited",
             retry_after: float | None = 1, times: int = 1) -> None:
        """Answer the next `times` calls of `method` with this failure (default: HTTP 429 Retry-After: 1)."""
        self._faults.append(Fault(method, status, error, retry_after if status == 429 else None, times))

    def slow(self, method: str, seconds: float, *, times: int = 1) -> None:
        """Take `seconds` to answer each of the next `times` calls of `method` (a busy Slack): work that
        waits for such a call before acknowledging its request is then acknowledged after Slack answered."""
        self._slow.extend([(method, seconds)] * times)

    def hold_downloads(self) -> None:
        """Downloads stop after their headers (recorded in `downloads_begun`) until `release_downloads`."""
        self._downloads_open.clear()

    def release_downloads(self) -> None:
        self._downloads_open.set()

    def calls_to(self, method: str) -> list[ApiCall]:
        return [c for c in self.calls if c.method == method]

    def thread(self, channel: str, thread_ts: str) -> list[SlackMessage]:
        """The thread as people see it: the parent first, then the replies (deleted ones left out)."""
        return [m for m in self.messages.get(channel, [])
                if not m.deleted and (m.ts == thread_ts or m.thread_ts == thread_ts)]

    def top_level(self, channel: str) -> list[SlackMessage]:
        return [m for m in self.messages.get(channel, []) if not m.deleted and m.thread_ts in (None, m.ts)]

    def bot_messages(self, channel: str, thread_ts: str | None = None) -> list[SlackMessage]:
        return [m for m in self.messages.get(channel, []) if m.from_bot and not m.deleted
                and (thread_ts is None or m.thread_ts == thread_ts or m.ts == thread_ts)]

    def find(self, channel: str, ts: str) -> SlackMessage | None:
        return next((m for m in self.messages.get(channel, []) if m.ts == ts), None)

    async def wait_for(self, predicate, timeout: float = 10.0) -> None:
        """Wait until `predicate()` holds (checked after every Web API call)."""
        async def reached() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(reached(), timeout)

    # -- Slack's side: people and events ---------------------------------------------------------------

    def new_ts(self) -> str:
        n = next(self._ts)
        return f"{self._base + n}.{n:06d}"

    def store(self, message: SlackMessage) -> SlackMessage:
        self.messages.setdefault(message.channel, []).append(message)
        return message

    def upload(self, name: str, data: bytes, mimetype: str = "application/octet-stream", *,
               state_size: bool = True, subtype: str | None = None) -> SlackFile:
        """A file a person shares (post it with `say(..., files=[...])`)."""
        file = SlackFile(f"F{next(self._ids):08d}", name, mimetype, data, state_size, subtype)
        self.files[file.id] = file
        return file

    def message_event(self, message: SlackMessage, *, channel_type: str) -> dict[str, Any]:
        event: dict[str, Any] = {"type": "message", "channel": message.channel, "text": message.text,
                                 "ts": message.ts, "event_ts": message.ts, "channel_type": channel_type}
        if message.files:
            event["subtype"] = "file_share"
            event["files"] = message.files
            event["upload"] = False
        if message.user:
            event["user"] = message.user
        if message.bot_id:
            event["bot_id"] = message.bot_id
        if message.thread_ts:
            event["thread_ts"] = message.thread_ts
        return event

    def envelope(self, event: dict[str, Any], *, event_id: str | None = None) -> dict[str, Any]:
        return {
            "token": "legacy-verification-token", "team_id": self.team, "api_app_id": APP_ID,
            "event": event, "type": "event_callback", "event_id": event_id or f"Ev{next(self._ids):08d}",
            "event_time": int(time.time()),
            "authorizations": [{"enterprise_id": None, "team_id": self.team, "user_id": self.bot_user,
                                "is_bot": True, "is_enterprise_install": False}],
            "is_ext_shared_channel": False,
        }

    def store_user_message(self, user: str, channel: str, text: str, *,
                           thread_ts: str | None = None) -> SlackMessage:
        """A message in the channel's history without any event sent (deliver it yourself)."""
        return self.store(SlackMessage(channel, self.new_ts(), text, user=user, thread_ts=thread_ts))

    async def say(self, user: str, channel: str, text: str, *, thread_ts: str | None = None,
                  channel_type: str | None = None, bot_id: str | None = None,
                  team: str | None = None, files: list[SlackFile] | None = None) -> SlackMessage:
        """A person (or another bot) posts; the events Slack sends for it are delivered concurrently.
        Returns the stored message (its `ts` is the thread id of a thread started under it). `team`: the
        person belongs to another organisation and writes in a channel shared with it (Slack Connect), so
        the events carry their team as `team`, `user_team` and `source_team`."""
        kind = channel_type or {"D": "im", "G": "group"}.get(channel[0], "channel")
        shared = [f.as_api(self.url, self.team, user) for f in files or ()]
        message = self.store(SlackMessage(channel, self.new_ts(), text, user=user, bot_id=bot_id,
                                          thread_ts=thread_ts, files=shared))
        events = [self.message_event(message, channel_type=kind)]
        if f"<@{self.bot_user}>" in text and kind != "im":
            mention = {"type": "app_mention", "user": user, "text": text, "ts": message.ts,
                       "channel": channel, "event_ts": message.ts}
            if shared:
                mention["files"] = shared
            if thread_ts:
                mention["thread_ts"] = thread_ts
            if bot_id:
                mention["bot_id"] = bot_id
            events.append(mention)
        for event in events:
            event.update({"team": team, "user_team": team, "source_team": team} if team else {"team": self.team})
        await asyncio.gather(*(self.post_event(e, shared=team is not None) for e in events))
        return message

    async def post_event(self, event: dict[str, Any], *, event_id: str | None = None,
                         retry_num: int | None = None, timestamp: float | None = None,
                         secret: str | None = None, signature: str | None = None,
                         shared: bool = False) -> Delivery:
        """Deliver one event callback (HTTP or, with a socket connected, Socket Mode); `shared`: in a channel
        shared with another organisation."""
        payload = self.envelope(event, event_id=event_id)
        payload["is_ext_shared_channel"] = shared
        if self.events_url is None and self._sockets:
            return await self._socket_deliver("events_api", payload, retry_num or 0)
        return await self.post_signed(json.dumps(payload), "application/json", retry_num=retry_num,
                                      timestamp=timestamp, secret=secret, signature=signature)

    async def post_command(self, command: str, text: str, *, channel: str, user: str = "UALICE",
                           channel_name: str = "general", timestamp: float | None = None,
                           secret: str | None = None) -> Delivery:
        """A person runs a slash command; `response_url` points back at this fake."""
        n = next(self._ids)
        form = {"token": "legacy-verification-token", "team_id": self.team, "team_domain": "hermes-test",
                "channel_id": channel, "channel_name": channel_name, "user_id": user,
                "user_name": self.users[user].name if user in self.users else user, "command": command,
                "text": text, "api_app_id": APP_ID, "is_enterprise_install": "false",
                "response_url": f"{self.url}/response/{n}", "trigger_id": f"{n}.{self._base}.trigger"}
        if self.events_url is None and self._sockets:
            return await self._socket_deliver("slash_commands", form, 0)
        return await self.post_signed(urlencode(form), "application/x-www-form-urlencoded",
                                      timestamp=timestamp, secret=secret)

    async def press(self, user: str, message: SlackMessage, label: str, *, timestamp: float | None = None,
                    secret: str | None = None, signature: str | None = None) -> Delivery:
        """`user` presses the button labelled `label` under the bot's `message`: a `block_actions` request."""
        button = next(b for b in message.buttons() if b["text"]["text"] == label)
        block = next(b for b in message.blocks if button in b.get("elements", []))
        n = next(self._ids)
        channel_name = "directmessage" if message.channel.startswith("D") else "general"
        payload = {
            "type": "block_actions", "api_app_id": APP_ID, "token": "legacy-verification-token",
            "team": {"id": self.team, "domain": "hermes-test"},
            "user": {"id": user, "username": self.users[user].name if user in self.users else user,
                     "team_id": self.team},
            "container": {"type": "message", "message_ts": message.ts, "channel_id": message.channel,
                          "is_ephemeral": False},
            "channel": {"id": message.channel, "name": channel_name},
            "message": {**message.as_api(), "blocks": message.blocks},
            "trigger_id": f"{n}.{self._base}.trigger", "response_url": f"{self.url}/response/{n}",
            "actions": [{**{k: button[k] for k in ("action_id", "value", "text", "type")},
                         "block_id": block.get("block_id", ""), "action_ts": f"{time.time():.6f}"}],
        }
        if self.events_url is None and self._sockets:
            return await self._socket_deliver("interactive", payload, 0)
        return await self.post_signed(urlencode({"payload": json.dumps(payload)}),
                                      "application/x-www-form-urlencoded", timestamp=timestamp, secret=secret,
                                      signature=signature)

    async def post_signed(self, body: str, content_type: str, *, retry_num: int | None = None,
                          timestamp: float | None = None, secret: str | None = None,
                          signature: str | None = None) -> Delivery:
        """POST `body` to the app as Slack does; forge with `secret`, `signature` or an old `timestamp`."""
        assert self.events_url is not None and self._session is not None, "set events_url first"
        ts = str(int(timestamp if timestamp is not None else time.time()))
        headers = {"Content-Type": content_type, "X-Slack-Request-Timestamp": ts,
                   "X-Slack-Signature": signature or sign(secret or self.signing_secret, ts, body)}
        if retry_num is not None:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        async with self._session.post(self.events_url, data=body.encode(), headers=headers) as response:
            delivery = Delivery(response.status, await response.text(), time.monotonic(), dict(response.headers))
        self.deliveries.append(delivery)
        return delivery

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _echo(self, message: SlackMessage) -> None:
        """Slack sends the app a message event for its own post too (with bot_id)."""
        if not self.echo_bot_posts or (self.events_url is None and not self._sockets):
            return
        kind = {"D": "im", "G": "group"}.get(message.channel[0], "channel")
        with contextlib.suppress(TimeoutError, aiohttp.ClientError):  # the app is shutting down
            await self.post_event(self.message_event(message, channel_type=kind))

    # -- Socket Mode ---------------------------------------------------------------------------------------

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        self.sockets_accepted += 1
        self._socket_ready.set()
        await ws.send_str(json.dumps({"type": "hello", "num_connections": len(self._sockets),
                                      "connection_info": {"app_id": APP_ID},
                                      "debug_info": {"host": "fake-slack"}}))
        try:
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    data = json.loads(msg.data)
                    envelope_id = data.get("envelope_id")
                    if envelope_id:
                        self.socket_acks.append(envelope_id)
                        future = self._acks.pop(envelope_id, None)
                        if future is not None and not future.done():
                            future.set_result((time.monotonic(), data))
        finally:
            if ws in self._sockets:
                self._sockets.remove(ws)
            if not self._sockets:
                self._socket_ready.clear()
        return ws

    async def wait_for_socket(self, timeout: float = 10.0) -> None:
        await asyncio.wait_for(self._socket_ready.wait(), timeout)

    @property
    def sockets(self) -> int:
        """Open Socket Mode connections."""
        return len([ws for ws in self._sockets if not ws.closed])

    async def drop_sockets(self) -> None:
        """Close every Socket Mode connection from Slack's side."""
        for ws in list(self._sockets):
            await ws.close(code=aiohttp.WSCloseCode.GOING_AWAY)

    async def request_refresh(self) -> None:
        """Slack's periodic `disconnect` message: the client should open a new connection."""
        for ws in list(self._sockets):
            await ws.send_str(json.dumps({"type": "disconnect", "reason": "refresh_requested",
                                          "debug_info": {"host": "fake-slack"}}))

    async def _socket_deliver(self, kind: str, payload: dict[str, Any], retry: int) -> Delivery:
        """Send an envelope on the newest open connection and wait for its ack; an envelope whose
        connection closes before the ack is sent again on the next one, as Slack does."""
        envelope_id = f"env-{next(self._ids)}"
        future = asyncio.get_running_loop().create_future()
        self._acks[envelope_id] = future
        deadline = time.monotonic() + 10
        while True:
            await self.wait_for_socket(max(0.1, deadline - time.monotonic()))
            open_sockets = [ws for ws in self._sockets if not ws.closed]
            if not open_sockets:
                await asyncio.sleep(0.01)
                continue
            ws = open_sockets[-1]
            try:
                await ws.send_str(json.dumps({
                    "envelope_id": envelope_id, "type": kind, "payload": payload,
                    "accepts_response_payload": kind != "events_api", "retry_attempt": retry,
                    "retry_reason": "timeout" if retry else ""}))
            except ConnectionError:
                continue
            while not future.done() and not ws.closed and time.monotonic() < deadline:
                await asyncio.wait([future], timeout=0.05)
            if future.done():
                break
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no ack for envelope {envelope_id}")
            retry += 1
        answered, ack = future.result()
        delivery = Delivery(200, json.dumps(ack.get("payload") or {}), answered)
        self.deliveries.append(delivery)
        return delivery

    # -- response_url ----------------------------------------------------------------------------------

    async def _response_url(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.responses.append(body)
        await self._notify()
        return web.Response(text="ok")

    # -- files -----------------------------------------------------------------------------------------

    async def _download(self, request: web.Request) -> web.StreamResponse:
        """`url_private_download`: the bytes, to the bot token only; chunked when the size is not stated."""
        file = self.files.get(request.match_info["file_id"])
        token_ok = request.headers.get("Authorization", "") == f"Bearer {BOT_TOKEN}"
        if file is None or request.match_info["team"] != self.team:
            return web.Response(status=404, text="not found")
        if not token_ok:
            self.downloads.append((file.id, False, 0))
            return web.Response(status=403, text="forbidden")
        response = web.StreamResponse(headers={"Content-Type": file.mimetype})
        if file.state_size:
            response.content_length = len(file.data)
        else:
            response.enable_chunked_encoding()
        await response.prepare(request)
        self.downloads_begun.append(file.id)
        await self._notify()
        sent = 0
        try:
            await self._downloads_open.wait()
            for start in range(0, len(file.data), 64 * 1024):
                await response.write(file.data[start:start + 64 * 1024])
                sent += len(file.data[start:start + 64 * 1024])
            await response.write_eof()
        except (ConnectionResetError, aiohttp.ClientConnectionResetError):
            pass  # the client stopped reading (a file over its cap)
        finally:
            self.downloads.append((file.id, True, sent))
        return response

    def _m_files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        name = str(params.get("filename") or "")
        try:
            length = int(params.get("length") or 0)
        except ValueError:
            length = 0
        if not name or length <= 0:
            return self._error("invalid_arguments")
        if length > MAX_UPLOAD:
            return self._error("file_too_large")
        file_id = f"F{next(self._ids):08d}"
        self._upload_lengths[file_id] = length
        self.uploads[file_id] = SlackFile(file_id, name, "", b"")
        return {"ok": True, "upload_url": f"{self.url}/upload/v1/{file_id}", "file_id": file_id}

    async def _upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        body = await request.read()
        if file_id not in self._upload_lengths:
            return web.Response(status=404, text="unknown upload")
        if len(body) != self._upload_lengths[file_id]:
            return web.Response(status=400, text="length mismatch")
        del self._upload_lengths[file_id]
        self.uploads[file_id].data = body
        await self._notify()
        return web.Response(text=f"OK - {len(body)}")

    def _m_files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            wanted = json.loads(str(params.get("files") or "[]"))
        except json.JSONDecodeError:
            return self._error("invalid_arguments")
        channel = str(params.get("channel_id") or "")
        done = [self.uploads.get(str(f.get("id"))) for f in wanted]
        if not wanted or any(f is None or f.id in self._upload_lengths for f in done):
            return self._error("file_not_found")
        shared = [f for f in done if f is not None]
        for file, asked in zip(shared, wanted, strict=True):
            file.name = str(asked.get("title") or file.name)
        if channel:
            message = SlackMessage(channel, self.new_ts(), str(params.get("initial_comment") or ""),
                                   user=self.bot_user, bot_id=self.bot_id, thread_ts=params.get("thread_ts") or None,
                                   files=[f.as_api(self.url, self.team, self.bot_user) for f in shared])
            self.store(message)
        return {"ok": True, "files": [{"id": f.id, "title": f.name} for f in shared]}

    def _m_files_info(self, params: dict[str, Any]) -> dict[str, Any]:
        file = self.files.get(params.get("file", ""))
        if file is None:
            return self._error("file_not_found")
        return {"ok": True, "file": file.as_api(self.url, self.team, "UALICE")}

    # -- the Web API -----------------------------------------------------------------------------------

    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.method == "POST" and request.can_read_body:
            if request.content_type == "application/json":
                params.update(await request.json())
            else:
                params.update(dict(await request.post()))
        return params

    def _token_ok(self, method: str, request: web.Request, params: dict[str, Any]) -> bool:
        auth = request.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else params.get("token", "")
        return token == (APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN)

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        call = ApiCall(method, params, time.monotonic())
        self.calls.append(call)
        try:
            slow = next((s for s in self._slow if s[0] == method), None)
            if slow is not None:
                self._slow.remove(slow)
                await asyncio.sleep(slow[1])
            fault = next((f for f in self._faults if f.method == method), None)
            if fault is not None:
                fault.times -= 1
                if fault.times <= 0:
                    self._faults.remove(fault)
                call.status, call.error = fault.status, fault.error
                headers = {"Retry-After": str(int(fault.retry_after))} if fault.retry_after is not None else {}
                return web.json_response({"ok": False, "error": fault.error}, status=fault.status,
                                         headers=headers)
            if not self._token_ok(method, request, params):
                call.error = "invalid_auth"
                return web.json_response({"ok": False, "error": "invalid_auth"})
            handler = getattr(self, "_m_" + method.replace(".", "_"), None)
            if handler is None:
                call.error = "unknown_method"
                return web.json_response({"ok": False, "error": "unknown_method"}, status=404)
            result = handler(params)
            if not result.get("ok"):
                call.error = result.get("error")
            return web.json_response(result)
        finally:
            call.answered = time.monotonic()
            await self._notify()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    @staticmethod
    def _error(code: str) -> dict[str, Any]:
        return {"ok": False, "error": code}

    def _bot_message(self, params: dict[str, Any]) -> SlackMessage | dict[str, Any]:
        message = self.find(str(params.get("channel", "")), str(params.get("ts", "")))
        if message is None or message.deleted:
            return self._error("message_not_found")
        if not message.from_bot:
            return self._error("cant_update_message")
        return message

    def _m_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": "https://hermes-test.slack.com/", "team": "Hermes Test", "user": "hermes",
                "team_id": self.team, "user_id": self.bot_user, "bot_id": self.bot_id,
                "is_enterprise_install": False}

    def _m_apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        self.connections_opened += 1
        return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/ws?ticket={self.connections_opened}"}

    def _m_users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(params.get("user", "")))
        if user is None:
            return self._error("user_not_found")
        return {"ok": True, "user": {
            "id": user.id, "team_id": self.team, "name": user.name, "real_name": user.real_name,
            "is_bot": user.is_bot, "deleted": False,
            "profile": {"real_name": user.real_name, "display_name": user.display_name,
                        **({"bot_id": user.bot_id} if user.bot_id else {})}}}

    def _m_conversations_info(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self.channels.get(str(params.get("channel", "")))
        if channel is None or (channel.is_private and not channel.is_member):
            return self._error("channel_not_found")
        return {"ok": True, "channel": channel.as_api()}

    def _m_conversations_list(self, params: dict[str, Any]) -> dict[str, Any]:
        seen = [c for c in self.channels.values() if (c.is_member or not c.is_private)
                and not (c.is_archived and _flag(params.get("exclude_archived"), False))]
        start, limit = int(params.get("cursor") or 0), int(params.get("limit") or 100)
        after = start + limit
        return {"ok": True, "channels": [c.as_api() for c in seen[start:after]],
                "response_metadata": {"next_cursor": str(after) if after < len(seen) else ""}}

    def _m_conversations_replies(self, params: dict[str, Any]) -> dict[str, Any]:
        thread = self.thread(str(params.get("channel", "")), str(params.get("ts", "")))
        if not thread:
            return self._error("thread_not_found")
        limit = int(params.get("limit") or 1000)
        return {"ok": True, "messages": [m.as_api() for m in thread[:limit]],
                "has_more": len(thread) > limit, "response_metadata": {"next_cursor": ""}}

    def _m_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, text = str(params.get("channel", "")), str(params.get("text") or "")
        if not channel:
            return self._error("channel_not_found")
        if not text.strip() and not params.get("blocks"):
            return self._error("no_text")
        if len(text) > MAX_TEXT:
            return self._error("msg_too_long")
        thread_ts = params.get("thread_ts") or None
        message = self.store(SlackMessage(channel, self.new_ts(), text, user=self.bot_user, bot_id=self.bot_id,
                                          thread_ts=thread_ts, mrkdwn=_flag(params.get("mrkdwn"), True),
                                          blocks=_blocks(params.get("blocks"))))
        self._spawn(self._echo(message))
        return {"ok": True, "channel": channel, "ts": message.ts, "message": message.as_api()}

    def _m_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._bot_message(params)
        if isinstance(message, dict):
            return message
        text = str(params.get("text") or "")
        if len(text) > MAX_TEXT:
            return self._error("msg_too_long")
        if not text.strip():
            return self._error("no_text")
        if message.streaming:
            return self._error("message_is_streaming")  # assumption: a live stream is closed first
        if text != message.text:
            message.edits.append(message.text)
            message.text = text
        if "mrkdwn" in params:
            message.mrkdwn = _flag(params["mrkdwn"], True)
        if "blocks" in params:
            message.blocks = _blocks(params["blocks"])
        return {"ok": True, "channel": message.channel, "ts": message.ts, "text": text}

    def _m_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        if not params.get("channel") or not params.get("user"):
            return self._error("channel_not_found" if not params.get("channel") else "user_not_in_channel")
        if not str(params.get("text") or "").strip() and not params.get("blocks"):
            return self._error("no_text")
        self.ephemerals.append(params)
        return {"ok": True, "message_ts": self.new_ts()}

    def _m_chat_delete(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._bot_message(params)
        if isinstance(message, dict):
            return message
        message.deleted = True
        message.streaming = False
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _m_chat_startStream(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel", ""))
        thread_ts = params.get("thread_ts")
        if not channel or not thread_ts:
            return self._error("invalid_arguments")
        if channel[0] != "D" and not (params.get("recipient_user_id") and params.get("recipient_team_id")):
            return self._error("invalid_arguments")
        text = str(params.get("markdown_text") or "")
        if len(text) > MAX_STREAM_CHUNK:
            return self._error("msg_too_long")
        message = self.store(SlackMessage(channel, self.new_ts(), text, user=self.bot_user, bot_id=self.bot_id,
                                          thread_ts=str(thread_ts), streaming=True, streamed=True))
        return {"ok": True, "channel": channel, "ts": message.ts}

    def _append(self, params: dict[str, Any], stop: bool) -> dict[str, Any]:
        message = self._bot_message(params)
        if isinstance(message, dict):
            return message
        if not message.streaming:
            return self._error("message_not_in_streaming_state")
        chunk = str(params.get("markdown_text") or "")
        if not chunk and not stop:
            return self._error("invalid_arguments")
        if len(chunk) > MAX_STREAM_CHUNK or len(message.text) + len(chunk) > MAX_TEXT:
            return self._error("msg_too_long")
        if chunk:
            message.edits.append(message.text)
            message.text += chunk
        if stop:
            message.streaming = False
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _m_chat_appendStream(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._append(params, stop=False)

    def _m_chat_stopStream(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._append(params, stop=True)


def _blocks(value: Any) -> list[dict[str, Any]]:
    """Blocks arrive as a list in JSON bodies and as a JSON string in form bodies."""
    if isinstance(value, str):
        value = json.loads(value) if value else []
    return list(value or [])


def _flag(value: Any, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).lower() in ("1", "true", "yes")
