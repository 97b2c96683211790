"""The Telegram adapter's lifecycle: receiving updates (long polling or webhook) and handing them to the
engine, with python-telegram-bot's `Bot` as the Bot API client (`updates.TolerantBot`: a malformed update
is rejected alone, never the batch around it) and the shared layer (`adapters.base`) for replies.

Pending updates are never dropped: what people wrote while the gateway was down is answered when it
starts.

The polling loop is ours, on the library's ``Bot.get_updates``, rather than PTB's ``Updater``, for two
reasons. The Updater confirms a batch to Telegram (by asking for the next offset) as soon as it has
fetched it, before the Application has processed it, so a crash in between loses those messages; here the
offset moves past an update only once the engine's durable inbox has recorded it (a redelivered update is
then a duplicate the inbox ignores: nothing lost, nothing doubled). And the Updater's back-off on errors
(1 s growing ×1.5 to 30 s) has no jitter; ours is the same curve with ±`poll_jitter` randomisation, so
many gateways do not hammer a recovering Bot API in step.

Who may be answered is the engine's decision (`EnginePort.admit`); the adapter reports the facts and
delivers what the engine wants a stranger to read.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import random
import re
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.base import PlatformAdapter
from adapters.election import Election
from adapters.outbound import OutboundScheduler, default_is_transient
from adapters.parts import TELEGRAM
from adapters.render import Rendered, render_telegram
from adapters.telegram.approvals import TelegramApprovals
from adapters.telegram.botapi import (
    ALLOWED_UPDATES,
    TelegramCallError,
    redact_token_in_logs,
    retry_after_seconds,
)
from adapters.telegram.inbound import UpdateReader
from adapters.telegram.media import AttachmentFetcher, has_media
from adapters.telegram.options import TelegramOptions
from adapters.telegram.outbound import TelegramLanes, TelegramPartRenderer, TelegramSender
from adapters.telegram.presence import chat_presence
from hermes_engine.errors import ConfigError
from hermes_engine.ports.engine import EnginePort
from hermes_engine.ports.inbound import ChatKind, ReplyTarget
from hermes_engine.ports.reply import ChatAccess, ChatPresence

if TYPE_CHECKING:
    from adapters.telegram.updates import RejectedUpdate

log = logging.getLogger(__package__)

WEBHOOK_SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
_COMMAND_NAME = re.compile(r"^[a-z0-9_]{1,32}$")  # what setMyCommands accepts


class TelegramAdapter(PlatformAdapter):
    platform = "telegram"
    capabilities = TELEGRAM

    def __init__(self, engine: EnginePort, *, token: str, base_url: str, file_url: str,
                 options: TelegramOptions | None = None, home: Path, allowed_users: frozenset[str] = frozenset(),
                 webhook_secret: str | None = None, webhook_url: str | None = None) -> None:
        from adapters.telegram.library import load

        load()
        from adapters.telegram.request import AiohttpRequest
        from adapters.telegram.updates import TolerantBot

        redact_token_in_logs(token)
        self.options = opts = options or TelegramOptions()
        self.capabilities = replace(TELEGRAM, edit_interval_seconds=opts.edit_interval_seconds,
                                    global_rate_per_second=opts.global_rate_per_second)
        scheduler = OutboundScheduler(opts.edit_interval_seconds, global_rate=opts.global_rate_per_second,
                                      max_retries=opts.send_retries, backoff=opts.send_backoff,
                                      max_backoff=opts.send_backoff_max, is_transient=self.is_transient_error)
        self.engine = engine
        self.account = token.split(":", 1)[0]  # the bot's user id: stable, unlike its @username
        self.allowed_users = frozenset(allowed_users)
        self.webhook_secret = webhook_secret
        self.webhook_url = webhook_url
        self.webhook_path = f"/telegram/{engine.bot}"
        self.rejected: deque[RejectedUpdate] = deque(maxlen=100)  # the latest updates too malformed to read
        self._unrecorded: dict[str, RejectedUpdate] = {}  # rejected, not yet in `rejects` (by event id)
        # Pool sizes as python-telegram-bot's ApplicationBuilder sets them: one long poll, many sends.
        self.bot = TolerantBot(
            token, base_url=base_url, base_file_url=file_url, local_mode=opts.local_mode, on_rejected=self._reject,
            request=AiohttpRequest(256, connect_timeout=opts.connect_timeout, read_timeout=opts.read_timeout,
                                   write_timeout=opts.read_timeout, pool_timeout=opts.connect_timeout),
            get_updates_request=AiohttpRequest(1, connect_timeout=opts.connect_timeout,
                                               read_timeout=opts.read_timeout))
        self.reader = UpdateReader(self.platform, self.account, knows_command=engine.knows_command)
        self.sender = TelegramSender(self.bot, opts)
        super().__init__(self.sender, scheduler=scheduler, lanes=TelegramLanes(opts), files=self.sender,
                         renderer=TelegramPartRenderer(self.render, self.capabilities, platform=self.platform))
        self.approvals = TelegramApprovals(self.bot, self.call)
        self.media = AttachmentFetcher(self.bot, Path(home), opts)
        self.ready = asyncio.Event()  # set once getMe succeeded and the bot is set up
        self._offset: int | None = None
        self._initialized = False
        self._set_up = False  # `log_in` did `_setup` already; the next `_run` goes straight to receiving
        self._stopping = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._main: asyncio.Task[Any] | None = None
        self._election: Election | None = None  # the poller's, when replicas elect one

    @property
    def username(self) -> str | None:
        return self.reader.username

    # ----------------------------------------------------------------- lifecycle
    async def log_in(self) -> None:
        """getMe, and when polling deleteWebhook and setMyCommands, before the gateway takes messages. A
        webhook is registered only by `start`, once the HTTP server it names is listening."""
        try:
            if self.options.mode == "polling":
                await self._setup()
                self._set_up = True
            else:
                await self._initialize()
        except Exception as exc:  # noqa: BLE001 - `start` tries again, and says what is wrong
            log.debug("Telegram log-in before the start failed (%s); the start tries again", exc)

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
        self.connected = False
        tasks = [t for t in [self._main, *self._tasks] if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._main = None
        self._tasks.clear()

    async def stop(self) -> None:
        """Stop receiving (confirming what was recorded), let queued finals go out, close the client."""
        await self.stop_receiving()
        await super().stop()
        if self._initialized:
            self._initialized = False
            with contextlib.suppress(Exception):
                await self.bot.shutdown()

    async def _initialize(self) -> None:
        if not self._initialized:
            await self.bot.initialize()  # getMe
            self._initialized = True
        self.reader.username = self.bot.username
        if self.bot.id:
            self.reader.bot_id = self.bot.id

    async def _run(self) -> None:
        if self._set_up:
            self._set_up = False
        else:
            await self._with_backoff("connect", self._setup)
        self.ready.set()
        self.connected = True
        log.info("Telegram bot @%s is up (%s mode)", self.username, self.options.mode)
        if self.options.mode == "polling":
            if self._election is None:
                self._election = self.election(f"telegram-poller:{self.account}", self.options.poller_lease_seconds)
            if self._election is None:
                await self._poll()
            else:
                await self._election.run(self._poll)

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
        """The engine's commands for setMyCommands, with /start first (Telegram's own greeting). Admin-only
        commands stay out: the menu is the same for everyone."""
        from telegram import BotCommand

        menu = [BotCommand("start", "start here: what I can do")]
        for command in self.engine.command_menu():
            name = command.name.lower()
            if name == "start" or not _COMMAND_NAME.match(name) or command.admin_only:
                continue
            menu.append(BotCommand(name, (command.summary or name)[:256]))
        return menu[:100]  # Telegram takes at most 100

    async def _with_backoff(self, what: str, action: Callable[[], Awaitable[Any]]) -> Any:
        """Retry `action` until it succeeds, backing off with jitter; rate limits wait as asked."""
        from telegram.error import InvalidToken, RetryAfter, TelegramError

        failures = 0
        while True:
            try:
                return await action()
            except asyncio.CancelledError:
                raise
            except RetryAfter as exc:
                await asyncio.sleep(retry_after_seconds(exc) + 0.1)
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

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ----------------------------------------------------------------- receiving
    async def _poll(self) -> None:
        """Long-poll getUpdates; on the way out for a shutdown, tell Telegram what was recorded, so it is
        not resent (not when the lease was lost: the new poller confirms)."""
        try:
            await self._poll_updates()
        finally:
            if self._stopping and self._offset is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.bot.get_updates(offset=self._offset, timeout=0,
                                                                allowed_updates=ALLOWED_UPDATES), 3)

    async def _poll_updates(self) -> None:
        """Move the offset past an update only once it has been handled. Elected, poll only while the
        lease is surely this replica's (a process paused past it must not ask once more)."""
        from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError, TimedOut

        failures = 0
        while not self._stopping:
            if self._election is not None and not self._election.leading:
                return
            try:
                updates = await self.bot.get_updates(offset=self._offset,
                                                     timeout=timedelta(seconds=self.options.poll_timeout),
                                                     allowed_updates=ALLOWED_UPDATES)
            except asyncio.CancelledError:
                raise
            except RetryAfter as exc:
                await asyncio.sleep(retry_after_seconds(exc) + 0.1)
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
                    log.warning("another process is polling this Telegram bot (%s): replicas on one database "
                                "elect one poller, so this one is not on this gateway's database", exc)
                level = logging.WARNING if failures in (1, 5) or failures % 20 == 0 else logging.DEBUG
                log.log(level, "Telegram getUpdates failed (%s); attempt %d, next in %.1fs", exc, failures, delay,
                        exc_info=not isinstance(exc, (TelegramError, OSError)))
                await asyncio.sleep(delay)
                continue
            if not updates:
                if failures:
                    log.info("Telegram polling recovered after %d failed attempts", failures)
                    failures = 0
                continue
            try:
                await self._record_rejected()
                await self.process_updates(updates)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. the database is down: keep them unconfirmed
                # Fetching worked but recording did not: the back-off grows until a batch is recorded.
                failures += 1
                delay = self._backoff(failures)
                log.warning("could not record Telegram updates (%s); fetching them again in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            if failures:
                log.info("Telegram polling recovered after %d failed attempts", failures)
                failures = 0
            self._offset = updates[-1].update_id + 1

    async def process_updates(self, updates: Sequence[Any]) -> None:
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
        """One update → the engine (or the engine's reply to a stranger, or nothing). True if the engine
        took it. Raises only when the engine could not record it."""
        if update.callback_query is not None:  # a press on an approval request's buttons
            await self.approvals.on_press(update.callback_query)
            return False
        try:
            incoming = self.reader.read(update)
        except Exception:  # noqa: BLE001 - a malformed update must not block the ones after it
            log.exception("could not read Telegram update %s; skipped", getattr(update, "update_id", "?"))
            return False
        if incoming is None:
            return False
        msg, user = incoming.inbound, incoming.user
        decision = await self.engine.admit(
            self.platform, msg.user_id, user_name=user.full_name or user.username or "", chat_id=msg.chat_id,
            direct=msg.chat_kind is ChatKind.DM, is_bot=bool(user.is_bot), also_allowed=self.allowed_users)
        if decision.reply:
            target = ReplyTarget(self.platform, self.account, msg.chat_id)
            self._spawn(self._send_quietly(target, decision.reply), f"telegram:access:{msg.user_id}")
        if not decision.allowed:
            log.info("not answering user %s in Telegram chat %s: not admitted", msg.user_id, msg.chat_id)
            return False
        if has_media(incoming.message):
            attachments = await self.media.fetch(incoming.message, self.engine.session_key(msg),
                                                 msg.message_id.split(":", 1)[0])
            msg = replace(msg, attachments=attachments)
            for i, notice in enumerate(self.media.notices(attachments)):
                await self._send_quietly(msg.reply_target(), notice, key=f"{msg.event_id}:file-notice:{i}")
        if not msg.text.strip() and not msg.attachments:
            return False
        return bool(await self.engine.handle(msg))

    def _reject(self, rejected: RejectedUpdate) -> None:
        """An update too malformed to read: logged with what it held and kept in `rejected`, to be recorded
        by `_record_rejected` before Telegram is told it was taken; the updates around it are answered."""
        self.rejected.append(rejected)
        self._unrecorded[rejected.event_id(self.account)] = rejected
        log.warning("rejected a malformed Telegram update %s (%s): %s", rejected.update_id, rejected.reason,
                    rejected.raw)

    async def _record_rejected(self) -> None:
        """Write the updates rejected so far to the reject log. Raises when it cannot: they stay unconfirmed,
        come again and are rejected again."""
        for event_id, rejected in list(self._unrecorded.items()):
            if self.rejects is not None:
                payload: dict[str, Any] = {"update_id": rejected.update_id, "reason": rejected.reason,
                                           "raw": rejected.raw}
                if rejected.sender is not None:  # shaped as a message's sender, so /forget finds it
                    payload["message"] = {"account": self.account, "user_id": rejected.sender}
                await self.rejects.record_rejected(self.platform, event_id, payload)
            self._unrecorded.pop(event_id, None)  # another request may have recorded it meanwhile

    async def _send_quietly(self, target: ReplyTarget, text: str, *, key: str | None = None) -> None:
        try:
            await self.send(target, text, idempotency_key=key)
        except Exception as exc:  # noqa: BLE001 - the person may have blocked the bot; nothing to do
            log.warning("could not send to Telegram chat %s: %s", target.chat_id, exc)

    async def handle_webhook(self, request: Any) -> Any:
        """``POST /telegram/<bot>``: check the secret, record the update, answer 200 (Telegram resends
        on anything else, which the inbox dedupes)."""
        from aiohttp import web

        from adapters.telegram.updates import RejectedUpdate, decode_update

        given = request.headers.get(WEBHOOK_SECRET_HEADER, "")
        if not self.webhook_secret or not hmac.compare_digest(given.encode(), self.webhook_secret.encode()):
            return web.Response(status=401, text="wrong secret token")
        if not self.ready.is_set() or self._stopping:
            return web.Response(status=503, text="not receiving now")
        try:
            data = await request.json()
        except ValueError:
            return web.Response(status=400, text="not JSON")
        update = decode_update(data, self.bot)
        if isinstance(update, RejectedUpdate):
            self._reject(update)
            try:
                await self._record_rejected()
            except Exception:  # noqa: BLE001
                log.exception("could not record rejected Telegram update %s; Telegram will resend it",
                              update.update_id)
                return web.Response(status=500, text="try again")
            return web.Response(status=200, text="rejected")  # anything else and Telegram sends it again
        try:
            await self.process_updates([update])
        except Exception:  # noqa: BLE001
            log.exception("could not record Telegram update %s; Telegram will resend it", update.update_id)
            return web.Response(status=500, text="try again")
        return web.Response(status=200, text="ok")

    # ----------------------------------------------------------------- sending (see `outbound`)
    def chat_access(self, target: ReplyTarget, *, direct: bool) -> ChatAccess:
        """As `admit` decides: the profile's rules and `TELEGRAM_ALLOWED_USERS`."""
        return ChatAccess(self.allowed_users)

    async def chat_presence(self, target: ReplyTarget, *, writer: str | None = None) -> ChatPresence:
        """Through the Bot API: `getChat`, then the bot's and the writer's `getChatMember` (`presence.py`)."""
        return await chat_presence(self.bot, target.chat_id, writer)

    def approval_asker(self) -> TelegramApprovals:
        return self.approvals

    def render(self, markdown: str) -> Rendered:
        return render_telegram(markdown)

    def is_markup_error(self, exc: BaseException) -> bool:
        return isinstance(exc, TelegramCallError) and exc.markup

    def is_transient_error(self, exc: BaseException) -> bool:
        return bool(getattr(exc, "transient", False)) or default_is_transient(exc)


def _log_crash(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the Telegram adapter stopped receiving", exc_info=task.exception())
