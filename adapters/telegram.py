"""Telegram adapter: python-telegram-bot's `Application` for the Bot API, the shared adapter layer for replies.

Inbound
    Long polling by default; webhook mode (``platforms.telegram.mode: webhook``) adds ``POST
    /telegram/<bot>`` to the gateway's HTTP server and checks ``X-Telegram-Bot-Api-Secret-Token`` against
    ``TELEGRAM_WEBHOOK_SECRET``. Pending updates are never dropped: what people wrote while the gateway was
    down is answered when it starts.

    The polling loop is ours, on the library's ``Bot.get_updates``, rather than PTB's ``Updater``, for
    two reasons. The Updater confirms a batch to Telegram (by asking for the next offset) as soon as it
    has fetched it, before the Application has processed it, so a crash in between loses those messages;
    here the offset moves past an update only once the engine's durable inbox has recorded it (a
    redelivered update is then a duplicate the inbox ignores: nothing lost, nothing doubled). And the
    Updater's back-off on errors (1 s growing ×1.5 to 30 s) has no jitter; ours is the same curve with
    ±`poll_jitter` randomisation, so many gateways do not hammer a recovering Bot API in step.

    An update becomes an `InboundMessage`: private chats → DM (one session per chat); groups and
    supergroups → GROUP (per person unless the profile shares sessions; a forum topic's
    ``message_thread_id`` is the thread). In groups the bot answers only when @mentioned, replied to, or
    given one of its commands, and the @mention is removed from the text. `message_id` carries the
    Telegram message id and the update id, so the inbox dedupes per update. Photos, voice notes, audio,
    video and documents are downloaded to ``<HERMES_HOME>/attachments/<session>/`` and described to the
    model; files over ``max_file_mb`` are refused politely (not downloaded).

Access
    Deny by default. Served: ids in ``TELEGRAM_ALLOWED_USERS`` (comma-separated), in the profile's
    ``access.allowed_users`` or ``access.admins``, and people approved by pairing
    (`hermes_engine.policy.pairing`). Anyone else gets no model call: in a DM only the pairing reply (if
    ``access.pairing``), in a group silence.

Outbound
    The shared layer (`adapters.base`): a per-chat lane paced at ``edit_interval_seconds`` (1 s; groups
    ``group_interval_seconds``, 3 s = 20 a minute), 30 calls a second overall, 429 ``retry_after``
    honoured exactly, streaming as one message edited in place, finals rendered to text + entities
    (`adapters.render.render_telegram`, no parse mode) and re-sent as plain text if Telegram rejects the
    formatting, parts split at 4,096 UTF-16 units.

Options (``platforms.telegram`` in the bot profile) are `TelegramOptions`; the environment gives the
secrets and endpoints (see `build`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import mimetypes
import os
import random
import re
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any, Hashable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from adapters.base import TELEGRAM, PlatformAdapter
from adapters.outbound import OutboundScheduler, default_is_transient
from adapters.render import Rendered, render_telegram
from hermes_engine.errors import ConfigError, PlatformError
from hermes_engine.ports.inbound import Attachment, ChatKind, InboundMessage, ReplyTarget
from hermes_engine.policy.pairing import Pairing, access_granted

log = logging.getLogger(__name__)

DEFAULT_API_BASE_URL = "https://api.telegram.org/bot"
ALLOWED_UPDATES = ["message"]
WEBHOOK_SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
_TOKEN = re.compile(r"^\d+:[A-Za-z0-9_-]+$")
_SECRET = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
_COMMAND_NAME = re.compile(r"^[a-z0-9_]{1,32}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class TelegramOptions(BaseModel):
    """``platforms.telegram`` in a bot profile. Intervals are seconds."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["polling", "webhook"] = "polling"
    max_file_mb: float = Field(20, gt=0)  # bigger files are refused, not downloaded
    webhook_url: str | None = None  # public URL Telegram posts to; TELEGRAM_WEBHOOK_URL also works
    local_mode: bool = False  # a local Bot API server (telegram-bot-api --local) serving files from disk
    reply_to: Literal["groups", "always", "never"] = "groups"  # quote the person's message
    register_commands: bool = True  # setMyCommands from the engine's commands at start
    # pacing and retries
    edit_interval_seconds: float = Field(1.0, ge=0)  # per private chat (~1 message or edit a second)
    group_interval_seconds: float = Field(3.0, ge=0)  # per group (20 a minute)
    global_rate_per_second: float = Field(30, gt=0)
    send_retries: int = Field(8, ge=0)  # transient failures (5xx, network) of one call, backing off …
    send_backoff: float = Field(0.5, ge=0)  # … from this …
    send_backoff_max: float = Field(8.0, ge=0)  # … to this: about 40 s in all, longer than a 30 s outage
    # polling
    poll_timeout: float = Field(30, ge=0)  # long-poll seconds of one getUpdates
    poll_backoff: float = Field(1.0, ge=0)  # first wait after a failed getUpdates, growing ×1.5 …
    poll_backoff_max: float = Field(30.0, ge=0)  # … to this
    poll_jitter: float = Field(0.25, ge=0, le=1)  # ± share of randomisation of each wait
    connect_timeout: float = Field(10.0, gt=0)
    read_timeout: float = Field(15.0, gt=0)
    approval_check_seconds: float = Field(5.0, gt=0)  # how often to look for new pairing approvals

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None) -> "TelegramOptions":
        try:
            return cls(**dict(options or {}))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top level)"
            raise ConfigError(f"Setting 'platforms.telegram.{where}' is invalid: {first['msg']}.") from None


class TelegramCallError(PlatformError):
    """A Bot API call failed. `transient`: worth retrying (5xx, network); `markup`: the formatting was
    refused (the part is then sent as plain text)."""

    def __init__(self, message: str, *, retry_after: float | None = None, transient: bool = False,
                 markup: bool = False) -> None:
        super().__init__(message, retry_after=retry_after)
        self.transient = transient
        self.markup = markup


def api_file_url(base_url: str) -> str:
    """The file download base beside an API base: ``…/bot`` → ``…/file/bot``."""
    base = base_url.rstrip("/")
    if base.endswith("/bot"):
        return base[: -len("/bot")] + "/file/bot"
    return base + "/file/bot"


def parse_user_ids(value: str | None) -> frozenset[str]:
    return frozenset(part.strip().lstrip("@") for part in (value or "").split(",") if part.strip())


def build(gateway: Any, settings: Any, options: Mapping[str, Any] | None, http_app: Any = None) -> "TelegramAdapter":
    """Make the adapter for one bot (called by `hermes_gateway.serve`). Reads:

    - ``TELEGRAM_BOT_TOKEN`` (required; ConfigError when missing, so the runner skips Telegram);
    - ``TELEGRAM_API_BASE_URL`` (default ``https://api.telegram.org/bot``; the file URL is derived beside
      it, ``…/file/bot``, or given as ``TELEGRAM_API_FILE_URL``);
    - ``TELEGRAM_ALLOWED_USERS`` (comma-separated user ids);
    - webhook mode: ``TELEGRAM_WEBHOOK_SECRET`` (required) and ``TELEGRAM_WEBHOOK_URL`` (optional: when
      set, the webhook is registered at start; otherwise register it yourself).
    """
    env = os.environ
    token = (env.get("TELEGRAM_BOT_TOKEN") or "").strip()
    if not token:
        raise ConfigError("TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather and export its token.")
    if not _TOKEN.match(token):
        raise ConfigError("TELEGRAM_BOT_TOKEN does not look like a bot token (digits, a colon, then letters).")
    opts = TelegramOptions.parse(options)
    base_url = (env.get("TELEGRAM_API_BASE_URL") or DEFAULT_API_BASE_URL).strip().rstrip("/")
    file_url = (env.get("TELEGRAM_API_FILE_URL") or api_file_url(base_url)).strip().rstrip("/")
    secret = (env.get("TELEGRAM_WEBHOOK_SECRET") or "").strip() or None
    webhook_url = opts.webhook_url or (env.get("TELEGRAM_WEBHOOK_URL") or "").strip() or None
    if opts.mode == "webhook":
        if not secret:
            raise ConfigError("TELEGRAM_WEBHOOK_SECRET is not set: webhook mode needs a secret (1-256 of "
                              "A-Z, a-z, 0-9, _ and -) to tell Telegram's requests from anyone else's.")
        if not _SECRET.match(secret):
            raise ConfigError("TELEGRAM_WEBHOOK_SECRET may hold only 1-256 of A-Z, a-z, 0-9, _ and -.")
        if http_app is None:
            raise ConfigError("Telegram webhook mode needs the gateway's HTTP server (run with `hermes-gateway run`).")
    adapter = TelegramAdapter(gateway, token=token, base_url=base_url, file_url=file_url, options=opts,
                              home=Path(settings.home), allowed_users=parse_user_ids(env.get("TELEGRAM_ALLOWED_USERS")),
                              webhook_secret=secret, webhook_url=webhook_url)
    if opts.mode == "webhook":
        http_app.router.add_post(adapter.webhook_path, adapter.handle_webhook)
    return adapter


class TelegramAdapter(PlatformAdapter):
    platform = "telegram"
    capabilities = TELEGRAM

    def __init__(self, gateway: Any, *, token: str, base_url: str, file_url: str,
                 options: TelegramOptions | None = None, home: Path, allowed_users: frozenset[str] = frozenset(),
                 webhook_secret: str | None = None, webhook_url: str | None = None,
                 pairing: Pairing | None = None) -> None:
        from telegram.ext import ApplicationBuilder

        redact_token_in_logs(token)
        self.options = opts = options or TelegramOptions()
        self.capabilities = replace(TELEGRAM, edit_interval_seconds=opts.edit_interval_seconds,
                                    global_rate_per_second=opts.global_rate_per_second)
        scheduler = OutboundScheduler(opts.edit_interval_seconds, global_rate=opts.global_rate_per_second,
                                      max_retries=opts.send_retries, backoff=opts.send_backoff,
                                      max_backoff=opts.send_backoff_max, is_transient=self.is_transient_error)
        super().__init__(scheduler=scheduler)
        self.gateway = gateway
        self.home = Path(home)
        self.account = token.split(":", 1)[0]  # the bot's user id: stable, unlike its @username
        self.allowed_users = frozenset(allowed_users)
        self.pairing = pairing or Pairing.for_home(self.home)
        self.webhook_secret = webhook_secret
        self.webhook_url = webhook_url
        self.webhook_path = f"/telegram/{getattr(gateway, 'bot', 'default')}"
        builder = (ApplicationBuilder().token(token).base_url(base_url).base_file_url(file_url)
                   .updater(None).job_queue(None)
                   .connect_timeout(opts.connect_timeout).read_timeout(opts.read_timeout)
                   .write_timeout(opts.read_timeout).pool_timeout(opts.connect_timeout)
                   .get_updates_connect_timeout(opts.connect_timeout)
                   .get_updates_read_timeout(opts.read_timeout))
        if opts.local_mode:
            builder = builder.local_mode(True)
        self.application = builder.build()
        self.bot = self.application.bot
        self.username: str | None = None
        self.bot_id = int(self.account)
        self.ready = asyncio.Event()  # set once getMe succeeded and the bot is set up
        self._offset: int | None = None
        self._initialized = False
        self._stopping = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._main: asyncio.Task[Any] | None = None

    # ----------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Check the token (fails with ConfigError if Telegram refuses it), then receive in the
        background. An unreachable Bot API does not fail the start: the adapter keeps trying."""
        from telegram.error import InvalidToken, TelegramError

        self._stopping = False
        try:
            await self._initialize()
        except InvalidToken:
            raise ConfigError("TELEGRAM_BOT_TOKEN was refused by the Telegram Bot API (check it with @BotFather, "
                              "and TELEGRAM_API_BASE_URL if you use your own Bot API server).") from None
        except (TelegramError, OSError) as exc:
            log.warning("Telegram Bot API not reachable at start (%s); retrying in the background", exc)
        self._main = asyncio.create_task(self._run(), name=f"telegram:{self.webhook_path}")
        self._main.add_done_callback(_log_crash)

    async def stop_receiving(self) -> None:
        """Take no more updates (polling ends; the webhook answers 503, so Telegram keeps them) and confirm
        what was recorded. Replies can still go out: a runner may stop receiving, stop the gateway, then
        call `stop`. Idempotent."""
        if self._stopping and self._main is None:
            return
        self._stopping = True
        tasks = [t for t in [self._main, *self._tasks] if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._main = None
        self._tasks.clear()
        if self.options.mode == "polling" and self._offset is not None and self.ready.is_set():
            with contextlib.suppress(Exception):  # tell Telegram what was recorded, so it is not resent
                await asyncio.wait_for(self.bot.get_updates(offset=self._offset, timeout=0,
                                                            allowed_updates=ALLOWED_UPDATES), 3)

    async def stop(self) -> None:
        """Stop receiving (confirming what was recorded), let queued finals go out, close the client."""
        await self.stop_receiving()
        await super().stop()
        if self._initialized:
            self._initialized = False
            with contextlib.suppress(Exception):
                await self.application.shutdown()

    async def _initialize(self) -> None:
        if not self._initialized:
            await self.application.initialize()  # getMe
            self._initialized = True
        self.username = self.bot.username
        if self.bot.id:
            self.bot_id = self.bot.id

    async def _run(self) -> None:
        await self._with_backoff("connect", self._setup)
        self.ready.set()
        log.info("Telegram bot @%s is up (%s mode)", self.username, self.options.mode)
        watcher = self._spawn(self._watch_approvals(), "telegram:approvals")
        if self.options.mode == "polling":
            await self._poll()
        else:
            await watcher

    async def _setup(self) -> None:
        await self._initialize()
        if self.options.mode == "polling":
            await self.bot.delete_webhook(drop_pending_updates=False)  # getUpdates refuses while one is set
        elif self.webhook_url:
            await self.bot.set_webhook(self.webhook_url, secret_token=self.webhook_secret,
                                       allowed_updates=ALLOWED_UPDATES, drop_pending_updates=False)
        else:
            log.info("TELEGRAM_WEBHOOK_URL is not set: the webhook must already point at %s", self.webhook_path)
        if self.options.register_commands:
            try:
                await self.bot.set_my_commands(self.command_menu())
            except Exception as exc:  # noqa: BLE001 - a menu is nice to have, never a reason not to serve
                log.warning("could not register the Telegram command menu: %s", exc)

    def command_menu(self) -> list[Any]:
        """The engine's commands for setMyCommands, with /start first."""
        from telegram import BotCommand

        menu = [BotCommand("start", "start here: what I can do")]
        for command in self.gateway.commands.listing():
            name = command.name.lower()
            if name == "start" or not _COMMAND_NAME.match(name) or command.admin_only:
                continue
            menu.append(BotCommand(name, (command.summary or name)[:256]))
        return menu[:100]  # Telegram takes at most 100

    async def _with_backoff(self, what: str, action: Any) -> Any:
        """Retry `action` until it succeeds, backing off with jitter; rate limits wait as asked."""
        from telegram.error import InvalidToken, RetryAfter, TelegramError

        failures = 0
        while True:
            try:
                return await action()
            except asyncio.CancelledError:
                raise
            except RetryAfter as exc:
                await asyncio.sleep(_retry_after_seconds(exc) + 0.1)
            except InvalidToken:
                failures += 1
                log.error("Telegram refused the bot token during %s; retrying slowly", what)
                await asyncio.sleep(self.options.poll_backoff_max)
            except Exception as exc:  # noqa: BLE001 - keep trying: the Bot API may be down for a while
                failures += 1
                delay = self._backoff(failures)
                level = logging.WARNING if failures in (1, 5) or failures % 20 == 0 else logging.DEBUG
                log.log(level, "Telegram %s failed (%s); attempt %d, next in %.1fs", what, exc, failures, delay,
                        exc_info=not isinstance(exc, (TelegramError, OSError)))
                await asyncio.sleep(delay)

    def _backoff(self, failures: int) -> float:
        opts = self.options
        delay = min(opts.poll_backoff_max, opts.poll_backoff * 1.5 ** max(0, failures - 1))
        return max(0.0, delay * (1 + random.uniform(-opts.poll_jitter, opts.poll_jitter)))

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ----------------------------------------------------------------- receiving
    async def _poll(self) -> None:
        """Long-poll getUpdates; move the offset past an update only once it has been handled."""
        from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError, TimedOut

        failures = 0
        while not self._stopping:
            try:
                updates = await self.bot.get_updates(offset=self._offset, timeout=self.options.poll_timeout,
                                                     allowed_updates=ALLOWED_UPDATES)
            except asyncio.CancelledError:
                raise
            except RetryAfter as exc:
                await asyncio.sleep(_retry_after_seconds(exc) + 0.1)
                continue
            except TimedOut:
                continue  # a long poll that outlived its read timeout: ask again at once
            except InvalidToken:
                log.error("Telegram refused the bot token while polling (check TELEGRAM_BOT_TOKEN)")
                await asyncio.sleep(self.options.poll_backoff_max)
                continue
            except Exception as exc:  # noqa: BLE001 - outages, 5xx, transport errors: never stop polling
                failures += 1
                delay = self._backoff(failures)
                if isinstance(exc, Conflict) and failures == 1:
                    log.warning("another process is polling this Telegram bot (%s): run one poller per bot, "
                                "or use webhook mode when running several gateway processes", exc)
                level = logging.WARNING if failures in (1, 5) or failures % 20 == 0 else logging.DEBUG
                log.log(level, "Telegram getUpdates failed (%s); attempt %d, next in %.1fs", exc, failures, delay,
                        exc_info=not isinstance(exc, (TelegramError, OSError)))
                await asyncio.sleep(delay)
                continue
            if failures:
                log.info("Telegram polling recovered after %d failed attempts", failures)
                failures = 0
            if not updates:
                continue
            try:
                await self.process_updates(updates)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. the database is down: keep them unconfirmed
                failures += 1
                delay = self._backoff(failures)
                log.warning("could not record Telegram updates (%s); fetching them again in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            self._offset = updates[-1].update_id + 1

    async def process_updates(self, updates: list[Any]) -> None:
        """Handle a batch: chats in parallel, each chat's updates in order. Raises if any update could not
        be recorded (the batch is then fetched again; what was recorded is a duplicate the inbox drops)."""
        lanes: dict[Hashable, list[Any]] = {}
        for update in updates:
            chat = update.effective_chat
            lanes.setdefault(chat.id if chat else update.update_id, []).append(update)

        async def lane(items: list[Any]) -> None:
            for update in items:
                await self.process_update(update)

        results = await asyncio.gather(*(lane(items) for items in lanes.values()), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def process_update(self, update: Any) -> bool:
        """One update → the gateway (or the pairing reply, or nothing). True if the gateway took it.
        Raises only when the gateway could not record it."""
        try:
            prepared = self._prepare(update)
        except Exception:  # noqa: BLE001 - a malformed update must not block the ones after it
            log.exception("could not read Telegram update %s; skipped", getattr(update, "update_id", "?"))
            return False
        if prepared is None:
            return False
        message, kind, user, text, mentioned = prepared
        user_id = str(user.id)
        if not self.is_allowed(user_id):
            if kind is ChatKind.DM:
                await self._pairing_reply(message, user)
            else:
                log.info("ignoring user %s in Telegram chat %s: not allowed", user_id, message.chat.id)
            return False
        thread_id = str(message.message_thread_id) if message.is_topic_message and message.message_thread_id else None
        reply_to = message.reply_to_message
        is_topic_root = reply_to is not None and message.is_topic_message and reply_to.message_id == message.message_thread_id
        base = InboundMessage(
            platform=self.platform, account=self.account, chat_kind=kind, chat_id=str(message.chat.id),
            user_id=user_id, user_name=user.full_name or user.username or user_id, text=text,
            message_id=f"{message.message_id}:{update.update_id}", thread_id=thread_id, mentioned=mentioned,
            reply_to_id=str(reply_to.message_id) if reply_to is not None and not is_topic_root else None,
            received_at=message.date, raw=update.to_dict())
        attachments = await self._attachments(message, base)
        msg = replace(base, attachments=attachments) if attachments else base
        if not msg.text.strip() and not msg.attachments:
            return False
        return bool(await self.gateway.handle(msg))

    def _prepare(self, update: Any) -> tuple[Any, ChatKind, Any, str, bool] | None:
        """Decide whether an update is for the engine at all; (message, kind, user, text, mentioned)."""
        message = update.message
        if message is None or message.from_user is None:
            return None  # edits, channel posts, membership changes, anonymous admins
        user = message.from_user
        if user.is_bot and (user.id == self.bot_id or not self.gateway.profile.access.allow_bots):
            return None
        chat_type = message.chat.type
        if chat_type == "private":
            kind = ChatKind.DM
        elif chat_type in ("group", "supergroup"):
            kind = ChatKind.GROUP
        else:
            return None
        text = message.text or message.caption or ""
        entities = (message.entities or ()) if message.text is not None else (message.caption_entities or ())
        mentioned = self._mentions_me(message, text, entities) or self._replies_to_me(message)
        has_media = bool(message.photo or message.document or message.voice or message.audio or message.video
                         or message.video_note)
        if kind is ChatKind.GROUP:
            if not (mentioned or self._is_my_command(text)):
                return None
        if self.username:
            text = _strip_mention(text, self.username)
        if not text.strip() and not has_media:
            if kind is ChatKind.GROUP and mentioned:
                text = "(mentioned you without a message)"
            else:
                return None
        return message, kind, user, text, mentioned

    def _mentions_me(self, message: Any, text: str, entities: Any) -> bool:
        name = (self.username or "").lower()
        for entity in entities:
            if entity.type == "mention" and name:
                shown = (message.parse_entity(entity) if message.text is not None
                         else message.parse_caption_entity(entity))
                if shown.lower() == "@" + name:
                    return True
            elif entity.type == "text_mention" and entity.user is not None and entity.user.id == self.bot_id:
                return True
        return bool(name) and re.search(rf"(?<![\w@])@{re.escape(name)}\b", text, re.I) is not None

    def _replies_to_me(self, message: Any) -> bool:
        original = message.reply_to_message
        if original is None or original.from_user is None:
            return False
        if message.is_topic_message and original.message_id == message.message_thread_id:
            return False  # the topic's root, not a reply
        return original.from_user.id == self.bot_id

    def _is_my_command(self, text: str) -> bool:
        match = re.match(r"^/([A-Za-z0-9_]+)(?:@([A-Za-z0-9_]+))?", text.strip())
        if not match:
            return False
        name, addressee = match.group(1).lower(), match.group(2)
        if addressee:
            return bool(self.username) and addressee.lower() == (self.username or "").lower()
        return name == "start" or self.gateway.commands.get(name) is not None

    # ----------------------------------------------------------------- access and pairing
    def is_allowed(self, user_id: str) -> bool:
        return access_granted(self.pairing, self.gateway.profile.access, self.platform, user_id,
                              self.allowed_users)

    async def _pairing_reply(self, message: Any, user: Any) -> None:
        if not self.gateway.profile.access.pairing:
            log.info("ignoring Telegram user %s: not allowed and pairing is off", user.id)
            return
        answer = await asyncio.to_thread(self.pairing.request, self.platform, str(user.id),
                                         user.full_name or user.username or "", chat_id=str(message.chat.id))
        if not answer.should_reply:
            log.info("pairing: not answering Telegram user %s again (rate limit)", user.id)
            return
        text = pairing_text(answer.code or "", str(user.id))
        target = ReplyTarget(self.platform, self.account, str(message.chat.id))
        self._spawn(self._send_quietly(target, text), f"telegram:pairing:{user.id}")

    async def _send_quietly(self, target: ReplyTarget, text: str) -> None:
        try:
            await self.send(target, text)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not send to Telegram chat %s: %s", target.chat_id, exc)

    async def _watch_approvals(self) -> None:
        """Tell people approved with `hermes-gateway pairing approve` that they are in."""
        if not self.gateway.profile.access.pairing:
            return
        while not self._stopping:
            try:
                for approval in await asyncio.to_thread(self.pairing.claim_unnotified, self.platform):
                    if approval.chat_id:
                        target = ReplyTarget(self.platform, self.account, approval.chat_id)
                        await self._send_quietly(target, "You now have access. Say hello!")
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001
                log.exception("checking pairing approvals failed")
            await asyncio.sleep(self.options.approval_check_seconds)

    # ----------------------------------------------------------------- attachments
    async def _attachments(self, message: Any, msg: InboundMessage) -> tuple[Attachment, ...]:
        found: list[tuple[str, Any, str, str]] = []  # (kind, file object, file name, mime type)
        limit = int(self.options.max_file_mb * 1024 * 1024)
        if message.photo:
            fitting = [p for p in message.photo if (p.file_size or 0) <= limit]
            photo = fitting[-1] if fitting else message.photo[-1]
            found.append(("photo", photo, f"photo_{photo.file_unique_id}.jpg", "image/jpeg"))
        for kind, obj, default_mime in (("document", message.document, "application/octet-stream"),
                                        ("voice", message.voice, "audio/ogg"),
                                        ("audio", message.audio, "audio/mpeg"),
                                        ("video", message.video, "video/mp4"),
                                        ("video", message.video_note, "video/mp4")):
            if obj is None:
                continue
            mime = getattr(obj, "mime_type", None) or default_mime
            name = getattr(obj, "file_name", None) or f"{kind}_{obj.file_unique_id}{_extension(mime)}"
            found.append((kind, obj, name, mime))
        if not found:
            return ()
        folder = self.home / "attachments" / _safe(msg.session_key(self.gateway.profile.shared_sessions))
        tg_message_id = msg.message_id.split(":", 1)[0]
        out = []
        for kind, obj, name, mime in found:
            size = int(obj.file_size or 0)
            name = _safe(Path(name).name) or kind
            if size > limit:
                out.append(Attachment(kind, name, mime, size, None,
                                      f"larger than the {self.options.max_file_mb:g} MB limit for files"))
                continue
            path = folder / f"{tg_message_id}-{name}"
            try:
                size = await self._download(obj.file_id, path)
            except Exception as exc:  # noqa: BLE001 - describe the failure to the model, keep the message
                text = str(exc)
                log.warning("could not download a Telegram %s (%s): %s", kind, name, text)
                reason = (f"larger than the {self.options.max_file_mb:g} MB limit for files"
                          if "too big" in text.lower() else "could not be downloaded")
                out.append(Attachment(kind, name, mime, size, None, reason))
                continue
            out.append(Attachment(kind, name, mime, size, str(path)))
        return tuple(out)

    async def _download(self, file_id: str, path: Path) -> int:
        from telegram.error import BadRequest, NetworkError

        path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):
            try:
                file = await self.bot.get_file(file_id)
                await file.download_to_drive(custom_path=path)
                return path.stat().st_size
            except BadRequest:
                raise
            except NetworkError:
                if attempt == 2:
                    raise
                await asyncio.sleep(0.5 * 2 ** attempt)
        raise AssertionError("unreachable")

    # ----------------------------------------------------------------- webhook
    async def handle_webhook(self, request: Any) -> Any:
        """``POST /telegram/<bot>``: check the secret, record the update, answer 200 (Telegram resends
        on anything else, which the inbox dedupes)."""
        from aiohttp import web
        from telegram import Update

        given = request.headers.get(WEBHOOK_SECRET_HEADER, "")
        if not self.webhook_secret or not hmac.compare_digest(given.encode(), self.webhook_secret.encode()):
            return web.Response(status=401, text="wrong secret token")
        if not self.ready.is_set() or self._stopping:
            return web.Response(status=503, text="not receiving now")
        try:
            data = await request.json()
            update = Update.de_json(data, self.bot)
        except Exception:  # noqa: BLE001
            return web.Response(status=400, text="not an update")
        if update is None:
            return web.Response(status=400, text="not an update")
        try:
            await self.process_updates([update])
        except Exception:  # noqa: BLE001
            log.exception("could not record Telegram update %s; Telegram will resend it", update.update_id)
            return web.Response(status=500, text="try again")
        return web.Response(status=200, text="ok")

    # ----------------------------------------------------------------- sending (primitives)
    def render(self, markdown: str) -> Rendered:
        return render_telegram(markdown)

    def is_markup_error(self, exc: BaseException) -> bool:
        return isinstance(exc, TelegramCallError) and exc.markup

    def is_transient_error(self, exc: BaseException) -> bool:
        return bool(getattr(exc, "transient", False)) or default_is_transient(exc)

    def pacing_interval(self, target: ReplyTarget) -> float:
        if _is_group_chat(target.chat_id):
            return self.options.group_interval_seconds
        return self.options.edit_interval_seconds

    def _target_kwargs(self, target: ReplyTarget) -> dict[str, Any]:
        from telegram import ReplyParameters

        kwargs: dict[str, Any] = {"chat_id": int(target.chat_id)}
        if target.thread_id:
            kwargs["message_thread_id"] = int(target.thread_id)
        mode = self.options.reply_to
        if target.reply_to_id and (mode == "always" or (mode == "groups" and _is_group_chat(target.chat_id))):
            with contextlib.suppress(ValueError):
                kwargs["reply_parameters"] = ReplyParameters(
                    message_id=int(str(target.reply_to_id).split(":", 1)[0]), allow_sending_without_reply=True)
        return kwargs

    def _entities(self, extras: Mapping[str, Any], rendered: bool) -> Any:
        from telegram import MessageEntity

        if not rendered or not extras.get("entities"):
            return None
        return MessageEntity.de_list([dict(e) for e in extras["entities"]], self.bot) or None

    async def _send_raw(self, target: ReplyTarget, text: str, *, rendered: bool, extras: Mapping[str, Any]) -> str:
        entities = self._entities(extras, rendered)
        message = await _api(self.bot.send_message(text=text, entities=entities, parse_mode=None,
                                                   **self._target_kwargs(target)))
        return str(message.message_id)

    async def _edit_raw(self, target: ReplyTarget, message_id: str, text: str, *, rendered: bool,
                        extras: Mapping[str, Any]) -> None:
        entities = self._entities(extras, rendered)
        try:
            await _api(self.bot.edit_message_text(text=text, chat_id=int(target.chat_id), message_id=int(message_id),
                                                  entities=entities, parse_mode=None))
        except TelegramCallError as exc:
            if "message is not modified" in str(exc).lower():
                return
            raise

    async def _delete_raw(self, target: ReplyTarget, message_id: str) -> None:
        try:
            await _api(self.bot.delete_message(chat_id=int(target.chat_id), message_id=int(message_id)))
        except TelegramCallError as exc:
            if "not found" in str(exc).lower():
                return
            raise

    async def _typing_raw(self, target: ReplyTarget) -> None:
        kwargs: dict[str, Any] = {"chat_id": int(target.chat_id), "action": "typing"}
        if target.thread_id:
            kwargs["message_thread_id"] = int(target.thread_id)
        await _api(self.bot.send_chat_action(**kwargs))


# -------------------------------------------------------------------- helpers

_MARKUP_ERRORS = ("can't parse entities", "can't find end", "unsupported start tag", "entity", "entities")


async def _api(call: Any) -> Any:
    """Await one Bot API call; translate the library's errors into `TelegramCallError`."""
    from telegram.error import BadRequest, ChatMigrated, Forbidden, NetworkError, RetryAfter, TelegramError, TimedOut

    try:
        return await call
    except RetryAfter as exc:
        raise TelegramCallError(str(exc), retry_after=_retry_after_seconds(exc)) from exc
    except BadRequest as exc:
        text = exc.message.lower()
        raise TelegramCallError(exc.message, markup=any(m in text for m in _MARKUP_ERRORS)) from exc
    except TimedOut as exc:
        raise TelegramCallError(f"timed out: {exc.message}", transient=True) from exc
    except (Forbidden, ChatMigrated) as exc:
        raise TelegramCallError(str(exc)) from exc
    except NetworkError as exc:  # 5xx and transport errors
        raise TelegramCallError(exc.message, transient=True) from exc
    except TelegramError as exc:
        raise TelegramCallError(str(exc)) from exc


def _log_crash(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the Telegram adapter stopped receiving", exc_info=task.exception())


class _RedactToken(logging.Filter):
    """Keeps the bot token out of logs: the Bot API puts it in every URL, and httpx logs URLs at INFO."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self.token in message:
            record.msg, record.args = message.replace(self.token, "<TELEGRAM_BOT_TOKEN>"), None
        return True


_REDACTED_LOGGERS = ("httpx", "telegram.Bot", "telegram.ext.ExtBot", "telegram.ext.Application", "telegram.ext",
                     __name__)


def redact_token_in_logs(token: str) -> None:
    for name in _REDACTED_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _RedactToken) and f.token == token for f in logger.filters):
            logger.addFilter(_RedactToken(token))


def _retry_after_seconds(exc: Any) -> float:
    value = getattr(exc, "_retry_after", None)  # a timedelta since PTB 22.2
    if value is not None and hasattr(value, "total_seconds"):
        return float(value.total_seconds())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = exc.retry_after
    return float(value.total_seconds()) if hasattr(value, "total_seconds") else float(value)


def _is_group_chat(chat_id: str) -> bool:
    return str(chat_id).startswith("-")


def _strip_mention(text: str, username: str) -> str:
    stripped = re.sub(rf"@{re.escape(username)}\b", "", text, flags=re.I)
    if stripped == text:
        return text
    return re.sub(r"[ \t]{2,}", " ", stripped).strip()


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name).strip("._")[:120]


def _extension(mime: str) -> str:
    return {"audio/ogg": ".ogg", "video/mp4": ".mp4", "audio/mpeg": ".mp3", "image/jpeg": ".jpg"}.get(
        mime, mimetypes.guess_extension(mime) or "")


def pairing_text(code: str, user_id: str) -> str:
    """The only thing a stranger hears: their own code and id."""
    return (
        "Hi! I only talk with people my admin has approved.\n\n"
        f"To ask for access, send this code to the admin: `{code}`\n"
        f"They approve it on the server with `hermes-gateway pairing approve {code}`.\n\n"
        f"The code is valid for one hour. Your Telegram user id is `{user_id}`."
    )
