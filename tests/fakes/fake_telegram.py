"""A fake Telegram Bot API on 127.0.0.1, for running the real python-telegram-bot against.

Routes are the real ones: ``POST /bot{token}/{method}`` (JSON, url-encoded or multipart bodies, as the
library sends them) and ``GET /file/bot{token}/{file_path}`` for downloads. Point the adapter at it with
``TELEGRAM_API_BASE_URL=fake.base_url``.

Tests play the people: ``fake.user_says(chat_id, user, text, ...)`` queues an update (a message with the
entities Telegram would compute: ``bot_command`` and ``mention``), optionally carrying a photo, document or
voice note whose bytes the fake then serves through ``getFile`` and the file route;
``fake.push_update(raw)`` queues any update as given, malformed ones too. They assert on what a
person would see: ``fake.chat(chat_id)`` has every message with its current text, entities and edit
history, and every API call made to that chat with its time. ``fake.first_handed_out`` says when each
update first left the fake (in a getUpdates answer or a webhook post), for benchmarks that time the bot.

Implemented methods: getMe, getUpdates (offset confirms, ``timeout`` long-polls), sendMessage,
sendPhoto, sendDocument and sendVoice (multipart: the message keeps the file's bytes, name and caption in
``ChatMessage.file``; over 50 MB, a photo over 10 MB or of dimensions Telegram refuses is refused as the
real server does), editMessageText, deleteMessage, sendChatAction, setMyCommands, getMyCommands, deleteWebhook, setWebhook,
getWebhookInfo, getFile, close, logOut. Anything else answers 404 like the real server (which the library
reports as ``InvalidToken``).

Faults, injectable at any time:

- ``rate_limit(chat_id, retry_after=2, times=1, methods=...)``: the next ``times`` matching calls answer
  429 with ``parameters.retry_after``; until that time has passed, every further call to that chat is
  answered 429 as well and recorded in ``chat.violations`` (a client that respects ``retry_after`` leaves
  it empty).
- ``outage(seconds)``: every request (API and files) answers 502 Bad Gateway for that long.
- ``reject_markup = True``: any ``parse_mode`` or ``entities`` is refused with "can't parse entities".
  Independently, formatting is read as Telegram reads it (`fakes.telegram_reading`): a message shows the
  text after its HTML is parsed, and what Telegram cannot parse (an unsupported tag, ``a < b`` in HTML,
  entities out of the text's bounds) is refused with its "can't parse entities" answer.
- Text over 4,096 UTF-16 units: 400 "message is too long"; an edit to identical content: 400 "message is
  not modified"; an unknown message: 400 "message to edit not found".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientSession, web

from fakes.loopback import LoopbackServer
from fakes.telegram_reading import CantParse, read, utf16_len

MAX_TEXT = 4096
MAX_DOWNLOAD = 20 * 1024 * 1024  # the official server's getFile limit
MAX_UPLOAD = 50 * 1024 * 1024  # sendDocument
MAX_PHOTO = 10 * 1024 * 1024  # sendPhoto

_STRING_FIELDS = {"text", "caption", "parse_mode", "url", "secret_token", "file_id", "action",
                  "language_code", "inline_message_id", "business_connection_id", "message_effect_id"}


@dataclass(frozen=True)
class SentFile:
    """A file the bot uploaded: `kind` is "photo" or "document"."""

    kind: str
    name: str
    data: bytes
    content_type: str


@dataclass(frozen=True)
class FakeUser:
    id: int
    first_name: str = "Test"
    username: str | None = None
    is_bot: bool = False
    last_name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "is_bot": self.is_bot, "first_name": self.first_name}
        if self.username:
            data["username"] = self.username
        if self.last_name:
            data["last_name"] = self.last_name
        return data


@dataclass
class FakeFile:
    """A file a person sends. `size` overrides the reported `file_size` (to simulate a big file without
    holding its bytes). `stated=False`: Telegram leaves `file_size` out (of the message and of getFile) and
    the file route sends the bytes chunked, without a Content-Length."""

    name: str
    data: bytes = b""
    mime_type: str = "application/octet-stream"
    size: int | None = None
    stated: bool = True

    @property
    def file_size(self) -> int:
        return self.size if self.size is not None else len(self.data)

    def size_field(self, size: int | None = None) -> dict[str, int]:
        return {"file_size": self.file_size if size is None else size} if self.stated else {}


@dataclass
class ChatMessage:
    """A message as the chat shows it. `history` holds (time, text) of the creation and of every edit."""

    message_id: int
    from_bot: bool
    text: str
    entities: list[dict[str, Any]] = field(default_factory=list)
    parse_mode: str | None = None
    reply_to: int | None = None
    thread_id: int | None = None
    user_id: int | None = None
    history: list[tuple[float, str]] = field(default_factory=list)
    deleted: bool = False
    raw: dict[str, Any] | None = None
    reply_markup: dict[str, Any] | None = None  # inline buttons, as sent or last edited
    file: SentFile | None = None  # what sendPhoto / sendDocument / sendVoice carried; `text` is then its caption

    @property
    def buttons(self) -> list[tuple[str, str]]:
        """(label, callback data) of every inline button, in order."""
        rows = (self.reply_markup or {}).get("inline_keyboard") or []
        return [(b["text"], b.get("callback_data", "")) for row in rows for b in row]

    @property
    def edits(self) -> int:
        return max(0, len(self.history) - 1)

    @property
    def formatted(self) -> bool:
        return bool(self.entities) or bool(self.parse_mode)


@dataclass
class ApiCall:
    time: float
    method: str
    params: dict[str, Any]
    status: int
    description: str = ""
    via: str = ""  # the caller, when it came through `base_url_for(caller)`


@dataclass
class FakeChat:
    id: int
    type: str = "private"
    title: str | None = None
    is_forum: bool = False
    messages: list[ChatMessage] = field(default_factory=list)
    calls: list[ApiCall] = field(default_factory=list)
    violations: list[ApiCall] = field(default_factory=list)
    blocked_until: float = 0.0  # monotonic time before which any call is a 429 (after a 429 was sent)
    username: str | None = None  # a public group's or channel's `@username` (getChat finds it by it)
    bot_status: str = "member"  # the bot's `getChatMember` status: member, administrator, left, kicked
    members: dict[int, str] = field(default_factory=dict)  # people's `getChatMember` status (absent: left)

    def to_dict(self, user: FakeUser | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "type": self.type}
        if self.type == "private" and user is not None:
            data["first_name"] = user.first_name
            if user.username:
                data["username"] = user.username
        else:
            data["title"] = self.title or f"Group {self.id}"
        if self.is_forum:
            data["is_forum"] = True
        return data

    # -- what a person sees ------------------------------------------------------------------------
    @property
    def bot_messages(self) -> list[ChatMessage]:
        """The bot's messages still in the chat, oldest first."""
        return [m for m in self.messages if m.from_bot and not m.deleted]

    @property
    def bot_texts(self) -> list[str]:
        return [m.text for m in self.bot_messages]

    @property
    def user_messages(self) -> list[ChatMessage]:
        return [m for m in self.messages if not m.from_bot]

    def message(self, message_id: int) -> ChatMessage | None:
        return next((m for m in self.messages if m.message_id == message_id), None)

    def call_times(self, methods: Iterable[str] = ("sendMessage", "editMessageText", "deleteMessage"),
                   *, ok_only: bool = False) -> list[float]:
        wanted = set(methods)
        return [c.time for c in self.calls if c.method in wanted and (not ok_only or c.status == 200)]


@dataclass
class _RateLimit:
    chat_id: int
    retry_after: int
    times: int
    methods: frozenset[str] | None


class TelegramApiError(Exception):
    def __init__(self, status: int, description: str, parameters: dict[str, Any] | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters


def _bad_request(description: str) -> TelegramApiError:
    return TelegramApiError(400, f"Bad Request: {description}")


class FakeTelegram(LoopbackServer):
    """The server. ``async with FakeTelegram() as fake:`` or ``start()`` / ``stop()``."""

    def __init__(self, *, token: str = "123456789:TEST-token_abcdefghijklmnopqrstuvw",
                 bot_username: str = "hermes_test_bot", bot_name: str = "Hermes") -> None:
        self.token = token
        self.bot = FakeUser(int(token.split(":")[0]), bot_name, bot_username, is_bot=True)
        self.chats: dict[int, FakeChat] = {}
        self.updates: list[dict[str, Any]] = []  # not yet confirmed
        self.delivered_update_ids: list[int] = []  # every update id handed out by getUpdates (repeats too)
        self.first_handed_out: dict[int, float] = {}  # update id -> when (monotonic) it was first handed out
        self.refused_update_ids: list[int] = []  # every webhook delivery the bot did not answer 200 (repeats too)
        self.confirmed_offset = 0
        self.commands: list[dict[str, Any]] | None = None
        self.webhook_url: str = ""
        self.webhook_secret: str | None = None
        self.requests: list[ApiCall] = []  # every API call, any chat
        self.files: dict[str, tuple[str, FakeFile]] = {}  # file_id -> (file_path, file)
        self.downloads: list[str] = []  # file paths downloaded
        self.reject_markup = False
        self.callback_answers: list[tuple[str, str]] = []  # (callback query id, text) of answerCallbackQuery
        self.outage_until = 0.0
        self.outage_hits = 0
        self.held_methods: set[str] = set()  # calls to these wait, unanswered and not applied, until `release`
        self.held_answer_methods: set[str] = set()  # calls to these are applied, their answers wait
        self.held: list[tuple[str, dict[str, Any]]] = []
        self._release = asyncio.Event()
        self._rate_limits: list[_RateLimit] = []
        self._update_ids = itertools.count(1000)
        self._message_ids: dict[int, itertools.count] = {}
        self._file_ids = itertools.count(1)
        self._new_update = asyncio.Condition()
        self._changed = asyncio.Condition()
        self._webhook_task: asyncio.Task | None = None
        self._closing = False
        self._poll_turn = 0  # the newest getUpdates; an older one still waiting is ended with 409 Conflict
        self.conflicts: list[str] = []  # callers (`via`) whose waiting getUpdates a newer one ended

    # -- lifecycle ---------------------------------------------------------------------------------
    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_route("*", "/via/{via}/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._file)
        return app

    async def before_stop(self) -> None:
        self._closing = True
        self._release.set()
        async with self._new_update:  # release long polls, or the server waits for them to time out
            self._new_update.notify_all()
        if self._webhook_task is not None:
            self._webhook_task.cancel()

    @property
    def base_url(self) -> str:
        """The value for TELEGRAM_API_BASE_URL (python-telegram-bot's `base_url`)."""
        return f"{self.url}/bot"

    def base_url_for(self, caller: str) -> str:
        """A TELEGRAM_API_BASE_URL whose calls are recorded as `caller`'s (`ApiCall.via`), to tell apart
        several processes polling one bot."""
        return f"{self.url}/via/{caller}/bot"

    @property
    def pollers(self) -> list[str]:
        """The caller of every getUpdates answered, in order."""
        return [call.via for call in self.requests if call.method == "getUpdates" and call.status == 200]

    @property
    def file_base_url(self) -> str:
        return f"{self.url}/file/bot"

    # -- people ------------------------------------------------------------------------------------
    def chat(self, chat_id: int, chat_type: str | None = None, *, title: str | None = None,
             is_forum: bool = False) -> FakeChat:
        chat = self.chats.get(chat_id)
        if chat is None:
            kind = chat_type or ("private" if chat_id > 0 else "supergroup")
            chat = FakeChat(chat_id, kind, title, is_forum)
            self.chats[chat_id] = chat
        return chat

    def _next_message_id(self, chat_id: int) -> int:
        counter = self._message_ids.setdefault(chat_id, itertools.count(1))
        return next(counter)

    def user_says(self, chat_id: int, user: int | FakeUser, text: str = "", *, chat_type: str | None = None,
                  title: str | None = None, reply_to: int | None = None, thread_id: int | None = None,
                  photo: FakeFile | None = None, document: FakeFile | None = None,
                  voice: FakeFile | None = None, entities: list[dict[str, Any]] | None = None,
                  is_forum: bool = False) -> dict[str, Any]:
        """Queue an update: `user` writes `text` (the caption when a file is attached) in `chat_id`.
        Returns the update. `reply_to` is the id of a message in that chat (the bot's, for instance);
        `thread_id` puts the message in a forum topic."""
        if isinstance(user, int):
            user = FakeUser(user, f"User{user}", f"user{user}")
        chat = self.chat(chat_id, chat_type, title=title, is_forum=is_forum or thread_id is not None)
        message_id = self._next_message_id(chat_id)
        message: dict[str, Any] = {"message_id": message_id, "date": int(time.time()),
                                   "chat": chat.to_dict(user), "from": user.to_dict()}
        has_file = photo is not None or document is not None or voice is not None
        computed = entities if entities is not None else _entities_for(text)
        if has_file:
            if text:
                message["caption"] = text
                if computed:
                    message["caption_entities"] = computed
        else:
            message["text"] = text
            if computed:
                message["entities"] = computed
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        if reply_to is not None:
            replied = chat.message(reply_to)
            original: dict[str, Any] = {"message_id": reply_to, "date": int(time.time()), "chat": chat.to_dict(user)}
            if replied is not None and replied.from_bot:
                original["from"] = self.bot.to_dict()
                original["text"] = replied.text
            elif replied is not None and replied.raw is not None:
                original = dict(replied.raw)
            message["reply_to_message"] = original
        elif thread_id is not None:
            # Telegram marks topic messages as replies to the topic's creation message.
            message["reply_to_message"] = {"message_id": thread_id, "date": int(time.time()),
                                           "chat": chat.to_dict(user), "from": user.to_dict(),
                                           "forum_topic_created": {"name": "topic", "icon_color": 7322096}}
        if photo is not None:
            sizes = []
            for scale, (w, h) in enumerate(((90, 60), (320, 213), (1280, 853))):
                file_id, unique = self._register_file("photos", f"photo_{scale}.jpg", photo)
                size = max(1, photo.file_size * (scale + 1) // 3)
                sizes.append({"file_id": file_id, "file_unique_id": unique, "width": w, "height": h,
                              **photo.size_field(size if scale < 2 else None)})
            message["photo"] = sizes
        if document is not None:
            file_id, unique = self._register_file("documents", document.name, document)
            message["document"] = {"file_id": file_id, "file_unique_id": unique, "file_name": document.name,
                                   "mime_type": document.mime_type, **document.size_field()}
        if voice is not None:
            file_id, unique = self._register_file("voice", voice.name, voice)
            message["voice"] = {"file_id": file_id, "file_unique_id": unique, "duration": 3,
                                "mime_type": voice.mime_type, **voice.size_field()}
        chat.messages.append(ChatMessage(message_id, False, text, list(computed or []), None, reply_to,
                                         thread_id, user.id, [(time.monotonic(), text)], raw=message))
        update = {"update_id": next(self._update_ids), "message": message}
        self.push_update(update)
        return update

    def push_update(self, update: dict[str, Any]) -> dict[str, Any]:
        """Queue any raw update, malformed ones too (for shapes `user_says` does not make); one without an
        ``update_id`` gets the next. Returns the update."""
        if "update_id" not in update:
            update = {"update_id": next(self._update_ids), **update}
        self.updates.append(update)
        asyncio.get_running_loop().create_task(self._notify_update())
        if self.webhook_url:
            self._ensure_webhook_pusher()
        return update

    def _register_file(self, folder: str, name: str, file: FakeFile) -> tuple[str, str]:
        n = next(self._file_ids)
        file_id = f"FILE{n:06d}"
        self.files[file_id] = (f"{folder}/file_{n}_{name}", file)
        return file_id, f"U{n:06d}"

    # -- faults ------------------------------------------------------------------------------------
    def rate_limit(self, chat_id: int, *, retry_after: int = 2, times: int = 1,
                   methods: Iterable[str] | None = ("sendMessage", "editMessageText")) -> None:
        """Answer the next `times` calls (of `methods`, None = any) to `chat_id` with 429 retry_after."""
        self._rate_limits.append(_RateLimit(chat_id, retry_after, times,
                                            frozenset(methods) if methods is not None else None))

    def hold(self, *methods: str) -> None:
        """Calls to `methods` arrive but are neither answered nor applied until `release()`: the moment
        to kill a client that has just sent one."""
        self.held_methods.update(methods)
        self._release.clear()

    def hold_answers(self, *methods: str) -> None:
        """Calls to `methods` take effect (a message is posted) but their answers wait until `release()`:
        the moment to kill a client whose call landed before it could learn so."""
        self.held_answer_methods.update(methods)
        self._release.clear()

    def release(self) -> None:
        self.held_methods.clear()
        self.held_answer_methods.clear()
        self._release.set()

    def outage(self, seconds: float) -> None:
        """Every request fails with 502 Bad Gateway for `seconds` from now."""
        self.outage_until = time.monotonic() + seconds

    # -- waiting -----------------------------------------------------------------------------------
    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0, message: str = "") -> Any:
        """Wait until `predicate()` is truthy (re-checked after every API call); return its value."""
        deadline = time.monotonic() + timeout

        async def check() -> Any:
            async with self._changed:
                while True:
                    value = predicate()
                    if value:
                        return value
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError(message or "condition not met on the fake Telegram")
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), min(remaining, 0.2))

        return await check()

    async def wait_for_text(self, chat_id: int, text: str, timeout: float = 10.0) -> ChatMessage:
        """Wait until a bot message in the chat shows exactly `text`."""
        return await self.wait_for(
            lambda: next((m for m in self.chat(chat_id).bot_messages if m.text == text), None), timeout,
            f"no bot message reading {text[:60]!r} in chat {chat_id}; chat shows {self.chat(chat_id).bot_texts!r}")

    async def wait_for_messages(self, chat_id: int, count: int, timeout: float = 10.0) -> list[ChatMessage]:
        return await self.wait_for(
            lambda: self.chat(chat_id).bot_messages if len(self.chat(chat_id).bot_messages) >= count else None,
            timeout, f"fewer than {count} bot messages in chat {chat_id}: {self.chat(chat_id).bot_texts!r}")

    async def settle(self, quiet: float = 0.3, timeout: float = 10.0) -> None:
        """Wait until no API call (other than getUpdates) happened for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            last = max((c.time for c in self.requests if c.method != "getUpdates"), default=0.0)
            if time.monotonic() - last >= quiet:
                return
            await asyncio.sleep(quiet / 3)
        raise TimeoutError("the fake Telegram did not settle")

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _notify_update(self) -> None:
        async with self._new_update:
            self._new_update.notify_all()
        await self._notify()

    # -- HTTP --------------------------------------------------------------------------------------
    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _read_params(request)
        chat_id = _int_or_none(params.get("chat_id"))
        if method in self.held_methods:
            self.held.append((method, params))
            await self._notify()
            await self._release.wait()
            return web.json_response({"ok": False, "error_code": 502, "description": "held and dropped"},
                                     status=502)
        now = time.monotonic()
        try:
            if request.match_info["token"] != self.token:
                raise TelegramApiError(401, "Unauthorized")
            if now < self.outage_until:
                self.outage_hits += 1
                raise TelegramApiError(502, "Bad Gateway")
            handler = getattr(self, f"_m_{method}", None)
            if handler is None:
                raise TelegramApiError(404, "Not Found")
            if chat_id is not None:
                self._check_rate_limit(method, chat_id, now, params)
            if method == "getUpdates":
                result = await self._m_getUpdates(params, request)
            else:
                result = await handler(params)
            status, body = 200, {"ok": True, "result": result}
        except TelegramApiError as exc:
            status = exc.status
            body = {"ok": False, "error_code": exc.status, "description": exc.description}
            if exc.parameters:
                body["parameters"] = exc.parameters
        call = ApiCall(now, method, params, status, body.get("description", ""), request.match_info.get("via", ""))
        self.requests.append(call)
        if chat_id is not None and method != "getUpdates":
            self.chat(chat_id).calls.append(call)
        await self._notify()
        if method in self.held_answer_methods:
            self.held.append((method, params))
            await self._notify()
            await self._release.wait()
        if status == 502:
            return web.Response(status=502, text="<html><body>502 Bad Gateway</body></html>",
                                content_type="text/html")
        return web.json_response(body, status=status)

    def _check_rate_limit(self, method: str, chat_id: int, now: float, params: dict[str, Any]) -> None:
        chat = self.chat(chat_id)
        if now < chat.blocked_until:
            retry = max(1, int(chat.blocked_until - now + 0.999))
            chat.violations.append(ApiCall(now, method, params, 429))
            raise TelegramApiError(429, f"Too Many Requests: retry after {retry}", {"retry_after": retry})
        for rule in self._rate_limits:
            if rule.chat_id == chat_id and rule.times > 0 and (rule.methods is None or method in rule.methods):
                rule.times -= 1
                chat.blocked_until = now + rule.retry_after
                raise TelegramApiError(429, f"Too Many Requests: retry after {rule.retry_after}",
                                       {"retry_after": rule.retry_after})

    async def _file(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return web.json_response({"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401)
        if time.monotonic() < self.outage_until:
            return web.Response(status=502, text="Bad Gateway")
        path = request.match_info["path"]
        for file_path, file in self.files.values():
            if file_path == path:
                self.downloads.append(path)
                if file.stated:
                    return web.Response(body=file.data, content_type="application/octet-stream")
                response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
                response.enable_chunked_encoding()
                await response.prepare(request)
                with contextlib.suppress(ConnectionError):  # the client may stop reading early
                    for start in range(0, len(file.data), 64 * 1024):
                        await response.write(file.data[start:start + 64 * 1024])
                    await response.write_eof()
                return response
        return web.json_response({"ok": False, "error_code": 404, "description": "Not Found"}, status=404)

    # -- methods -----------------------------------------------------------------------------------
    def _known_chat(self, reference: Any) -> FakeChat:
        """The chat a getChat-like call names by id or `@username`, as Telegram shows it to the bot."""
        text = str(reference)
        found = (next((c for c in self.chats.values() if c.username and f"@{c.username}" == text), None)
                 if text.startswith("@") else self.chats.get(_int_or_none(text) or 0))
        if found is None:
            raise _bad_request("chat not found")
        if found.bot_status == "kicked":
            raise TelegramApiError(403, "Forbidden: bot was kicked from the supergroup chat")
        return found

    async def _m_getChat(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._known_chat(params["chat_id"])
        data = {**chat.to_dict(), "accent_color_id": 0, "max_reaction_count": 11,
                "accepted_gift_types": {"unlimited_gifts": False, "limited_gifts": False, "unique_gifts": False,
                                        "premium_subscription": False, "gifts_from_channels": False}}
        if chat.username:
            data["username"] = chat.username
        return data

    async def _m_getChatMember(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._known_chat(params["chat_id"])
        user_id = int(params["user_id"])
        if user_id != self.bot.id:
            status = chat.members.get(user_id, "left")
            member_of = {"status": status, "user": {"id": user_id, "is_bot": False, "first_name": str(user_id)}}
            return {**member_of, "until_date": 0} if status == "kicked" else member_of
        member: dict[str, Any] = {"status": chat.bot_status, "user": self.bot.to_dict()}
        if chat.bot_status == "administrator":
            member.update({flag: True for flag in (
                "can_be_edited", "is_anonymous", "can_manage_chat", "can_delete_messages", "can_manage_video_chats",
                "can_restrict_members", "can_promote_members", "can_change_info", "can_invite_users",
                "can_post_stories", "can_edit_stories", "can_delete_stories", "can_post_messages")})
        if chat.bot_status == "kicked":
            member["until_date"] = 0
        return member

    async def _m_getMe(self, params: dict[str, Any]) -> dict[str, Any]:
        return {**self.bot.to_dict(), "can_join_groups": True, "can_read_all_group_messages": False,
                "supports_inline_queries": False, "can_connect_to_business": False, "has_main_web_app": False}

    async def _m_getUpdates(self, params: dict[str, Any], request: web.Request | None = None) -> list[dict[str, Any]]:
        """Like Telegram: a getUpdates ends an older one still waiting with 409 Conflict (counted in
        `conflicts` when its caller is still connected to hear it)."""
        if self.webhook_url:
            raise TelegramApiError(409, "Conflict: can't use getUpdates method while webhook is active; "
                                        "use deleteWebhook to delete the webhook first")
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        timeout = float(params.get("timeout") or 0)
        if offset:
            self.confirmed_offset = max(self.confirmed_offset, offset)
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
        deadline = time.monotonic() + timeout
        self._poll_turn += 1
        turn = self._poll_turn
        async with self._new_update:
            self._new_update.notify_all()
            while True:
                if turn != self._poll_turn:
                    if request is not None and request.transport is not None and not request.transport.is_closing():
                        self.conflicts.append(request.match_info.get("via", ""))
                    raise TelegramApiError(409, "Conflict: terminated by other getUpdates request; make sure "
                                                "that only one bot instance is running")
                ready = [u for u in self.updates if u["update_id"] >= offset][:limit]
                remaining = deadline - time.monotonic()
                if ready or remaining <= 0 or self._closing or time.monotonic() < self.outage_until:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._new_update.wait(), remaining)
        now = time.monotonic()
        if now < self.outage_until:
            raise TelegramApiError(502, "Bad Gateway")
        self.delivered_update_ids.extend(u["update_id"] for u in ready)
        for update in ready:
            self.first_handed_out.setdefault(update["update_id"], now)
        return ready

    def _text_check(self, text: str, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        """Validate the formatting and the length; return the displayed text and its entities."""
        parse_mode = params.get("parse_mode") or None
        entities = params.get("entities") or []
        if isinstance(entities, str):
            entities = json.loads(entities)
        if (parse_mode or entities) and self.reject_markup:
            raise _bad_request("can't parse entities: Can't find end of the entity starting at byte offset 0")
        try:
            shown, entities = read(text, str(parse_mode) if parse_mode else None, list(entities))
        except CantParse as exc:
            raise _bad_request(str(exc)) from None
        if not shown.strip():
            raise _bad_request("message text is empty")
        if utf16_len(shown) > MAX_TEXT:
            raise _bad_request("message is too long")
        return shown, entities

    async def _m_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self.chat(int(params["chat_id"]))
        text = str(params.get("text", ""))
        shown, entities = self._text_check(text, params)
        reply = params.get("reply_parameters") or {}
        reply_to = reply.get("message_id") if isinstance(reply, dict) else None
        reply_to = reply_to or _int_or_none(params.get("reply_to_message_id"))
        thread_id = _int_or_none(params.get("message_thread_id"))
        if reply_to is not None and chat.message(int(reply_to)) is None and not (
                isinstance(reply, dict) and reply.get("allow_sending_without_reply")):
            raise _bad_request("message to be replied not found")
        message_id = self._next_message_id(chat.id)
        message = ChatMessage(message_id, True, shown, entities, params.get("parse_mode"),
                              int(reply_to) if reply_to else None, thread_id, self.bot.id,
                              [(time.monotonic(), shown)])
        message.reply_markup = _markup(params)
        chat.messages.append(message)
        return self._message_json(chat, message)

    async def _m_sendPhoto(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._file_message(params, "photo", MAX_PHOTO)

    async def _m_sendDocument(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._file_message(params, "document", MAX_UPLOAD)

    async def _m_sendVoice(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._file_message(params, "voice", MAX_UPLOAD)

    def _file_message(self, params: dict[str, Any], kind: str, limit: int) -> dict[str, Any]:
        chat = self.chat(int(params["chat_id"]))
        upload = params.get(kind)
        if isinstance(upload, str) and upload.startswith("attach://"):
            upload = params.get(upload[len("attach://"):])
        if not isinstance(upload, SentFile):
            raise _bad_request(f"there is no {kind} in the request")
        if len(upload.data) > limit:
            raise TelegramApiError(413, "Request Entity Too Large")
        if kind == "photo" and not _photo_dimensions_ok(upload.data):
            raise _bad_request("PHOTO_INVALID_DIMENSIONS")
        sent = SentFile(kind, upload.name, upload.data, upload.content_type)
        caption = str(params.get("caption") or "")
        thread_id = _int_or_none(params.get("message_thread_id"))
        reply = params.get("reply_parameters") or {}
        reply_to = reply.get("message_id") if isinstance(reply, dict) else None
        message = ChatMessage(self._next_message_id(chat.id), True, caption, [], None,
                              int(reply_to) if reply_to else None, thread_id, self.bot.id,
                              [(time.monotonic(), caption)], file=sent)
        chat.messages.append(message)
        data = self._message_json(chat, message)
        data.pop("text", None)
        if caption:
            data["caption"] = caption
        unique = f"up{message.message_id}"
        if kind == "photo":
            data["photo"] = [{"file_id": unique, "file_unique_id": unique, "width": 1, "height": 1,
                              "file_size": len(sent.data)}]
        elif kind == "voice":
            data["voice"] = {"file_id": unique, "file_unique_id": unique, "duration": 1, "mime_type": "audio/ogg",
                             "file_size": len(sent.data)}
        else:
            data["document"] = {"file_id": unique, "file_unique_id": unique, "file_name": sent.name,
                                "file_size": len(sent.data)}
        return data

    async def _m_editMessageText(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self.chat(int(params["chat_id"]))
        message = chat.message(int(params["message_id"]))
        if message is None or message.deleted:
            raise _bad_request("message to edit not found")
        if not message.from_bot:
            raise _bad_request("message can't be edited")
        shown, entities = self._text_check(str(params.get("text", "")), params)
        if shown == message.text and entities == message.entities:
            raise _bad_request("message is not modified: specified new message content and reply markup are "
                               "exactly the same as a current content and reply markup of the message")
        message.text, message.entities, message.parse_mode = shown, entities, params.get("parse_mode")
        message.reply_markup = _markup(params)
        message.history.append((time.monotonic(), shown))
        return self._message_json(chat, message)

    async def _m_deleteMessage(self, params: dict[str, Any]) -> bool:
        chat = self.chat(int(params["chat_id"]))
        message = chat.message(int(params["message_id"]))
        if message is None or message.deleted:
            raise _bad_request("message to delete not found")
        message.deleted = True
        return True

    async def _m_sendChatAction(self, params: dict[str, Any]) -> bool:
        self.chat(int(params["chat_id"]))
        return True

    async def _m_setMyCommands(self, params: dict[str, Any]) -> bool:
        commands = params.get("commands") or []
        for c in commands:
            if not re.fullmatch(r"[a-z0-9_]{1,32}", c.get("command", "")) or not 1 <= len(c.get("description", "")) <= 256:
                raise _bad_request(f"BOT_COMMAND_INVALID: {c!r}")
        self.commands = list(commands)
        return True

    async def _m_getMyCommands(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        return list(self.commands or [])

    async def _m_deleteWebhook(self, params: dict[str, Any]) -> bool:
        self.webhook_url, self.webhook_secret = "", None
        if params.get("drop_pending_updates") in (True, "true"):
            self.updates.clear()
        return True

    async def _m_setWebhook(self, params: dict[str, Any]) -> bool:
        self.webhook_url = str(params.get("url") or "")
        self.webhook_secret = params.get("secret_token")
        if self.webhook_url:
            self._ensure_webhook_pusher()
        return True

    async def _m_getWebhookInfo(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"url": self.webhook_url, "has_custom_certificate": False,
                "pending_update_count": len(self.updates)}

    async def _m_getFile(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = str(params.get("file_id"))
        if file_id not in self.files:
            raise _bad_request("invalid file_id")
        path, file = self.files[file_id]
        if file.file_size > MAX_DOWNLOAD:
            raise _bad_request("file is too big")
        return {"file_id": file_id, "file_unique_id": f"U{file_id}", **file.size_field(), "file_path": path}

    async def _m_close(self, params: dict[str, Any]) -> bool:
        return True

    async def _m_logOut(self, params: dict[str, Any]) -> bool:
        return True

    def _message_json(self, chat: FakeChat, message: ChatMessage) -> dict[str, Any]:
        data: dict[str, Any] = {"message_id": message.message_id, "date": int(time.time()),
                                "chat": chat.to_dict(FakeUser(chat.id, "Chat")), "from": self.bot.to_dict(),
                                "text": message.text}
        if message.entities:
            data["entities"] = message.entities
        if message.message_id and len(message.history) > 1:
            data["edit_date"] = int(time.time())
        if message.thread_id is not None:
            data["message_thread_id"] = message.thread_id
        if message.reply_markup:
            data["reply_markup"] = message.reply_markup
        return data

    # -- inline buttons ------------------------------------------------------------------------------
    def press(self, chat_id: int, user: FakeUser, message_id: int, data: str,
              shown: ChatMessage | None = None) -> dict[str, Any]:
        """`user` presses the inline button carrying `data` under the bot's message: a callback query.
        `shown`: the message as the presser's client still shows it (a copy taken before it was edited), so
        a button can be pressed after the bot removed it, as on a client that has not refreshed yet."""
        chat = self.chat(chat_id)
        message = shown or chat.message(message_id)
        assert message is not None and data in [d for _, d in message.buttons], "no such button"
        query = {"id": str(next(self._update_ids)), "from": user.to_dict(), "chat_instance": str(chat_id),
                 "message": self._message_json(chat, message), "data": data}
        return self.push_update({"callback_query": query})

    async def _m_answerCallbackQuery(self, params: dict[str, Any]) -> bool:
        self.callback_answers.append((str(params["callback_query_id"]), str(params.get("text") or "")))
        return True

    # -- webhook delivery (Telegram pushes updates to the bot) --------------------------------------
    def _ensure_webhook_pusher(self) -> None:
        if self._webhook_task is None or self._webhook_task.done():
            self._webhook_task = asyncio.get_running_loop().create_task(self._push_webhook())

    async def _push_webhook(self) -> None:
        async with ClientSession() as http:
            while self.webhook_url and self.updates:
                update = self.updates[0]
                headers = {"X-Telegram-Bot-Api-Secret-Token": self.webhook_secret} if self.webhook_secret else {}
                self.first_handed_out.setdefault(update["update_id"], time.monotonic())
                try:
                    async with http.post(self.webhook_url, json=update, headers=headers) as response:
                        ok = response.status == 200
                except Exception:  # noqa: BLE001 - the bot is down: try again, like Telegram
                    ok = False
                if ok:
                    self.delivered_update_ids.append(update["update_id"])
                    self.updates.pop(0)
                    await self._notify()
                else:
                    self.refused_update_ids.append(update["update_id"])
                    await self._notify()
                    await asyncio.sleep(0.2)


# -- helpers -------------------------------------------------------------------------------------------

def _markup(params: dict[str, Any]) -> dict[str, Any] | None:
    markup = params.get("reply_markup")
    return json.loads(markup) if isinstance(markup, str) else markup


def _entities_for(text: str) -> list[dict[str, Any]]:
    """The entities Telegram computes itself for plain text: a leading bot command and @mentions."""
    entities = []
    for m in re.finditer(r"(?<![\w/])/[A-Za-z0-9_]+(?:@[A-Za-z0-9_]+)?|(?<![\w@])@[A-Za-z0-9_]{5,32}", text):
        kind = "bot_command" if m.group().startswith("/") else "mention"
        if kind == "bot_command" and m.start() != 0:
            continue
        offset = utf16_len(text[: m.start()])
        entities.append({"type": kind, "offset": offset, "length": utf16_len(m.group())})
    return entities


async def _read_params(request: web.Request) -> dict[str, Any]:
    if request.content_type == "application/json":
        try:
            data = await request.json()
        except json.JSONDecodeError:
            data = {}
        return dict(data or {})
    raw = dict(request.query)
    uploads: dict[str, SentFile] = {}
    if request.method == "POST" and request.can_read_body:
        form = await request.post()
        for key, value in form.items():
            if hasattr(value, "file"):
                params_file = SentFile("", value.filename or key, value.file.read(),
                                       value.content_type or "application/octet-stream")
                uploads[key] = params_file
                continue
            raw[key] = value
    params: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _STRING_FIELDS or not isinstance(value, str):
            params[key] = value
            continue
        try:
            params[key] = json.loads(value)
        except (json.JSONDecodeError, ValueError):
            params[key] = value
    params.update(uploads)
    return params


def _photo_dimensions_ok(data: bytes) -> bool:
    """Telegram's rule for a photo: width and height at most 10,000 together, neither side more than 20
    times the other (read from a PNG's header; other types are taken as they come)."""
    if not data.startswith(b"\x89PNG\r\n\x1a\n") or len(data) < 24:
        return True
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    return width + height <= 10_000 and max(width, height) <= 20 * max(1, min(width, height))


def _int_or_none(value: Any) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
