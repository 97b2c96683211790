"""Talking to the Bot API safely: its errors mapped to what the shared outbound layer understands (rate
limit, retry, refused formatting), and the bot token kept out of logs.

Every module of this package logs through the package's logger (``logging.getLogger(__package__)``) so
that the token filter, attached per logger, covers all of them.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from hermes_engine.errors import PlatformError

DEFAULT_API_BASE_URL = "https://api.telegram.org/bot"
ALLOWED_UPDATES = ["message", "callback_query"]

_MARKUP_ERRORS = ("can't parse entities", "can't find end", "unsupported start tag", "entity", "entities")


class TelegramCallError(PlatformError):
    """A Bot API call failed. `transient`: worth retrying (5xx, network); `markup`: the formatting was
    refused (the part is then sent as plain text)."""

    def __init__(self, message: str, *, retry_after: float | None = None, transient: bool = False,
                 markup: bool = False) -> None:
        super().__init__(message, retry_after=retry_after)
        self.transient = transient
        self.markup = markup


async def call_api(call: Any) -> Any:
    """Await one Bot API call; the library's errors become `TelegramCallError`, the only kind the shared
    layer has to understand."""
    from telegram.error import BadRequest, ChatMigrated, Forbidden, NetworkError, RetryAfter, TelegramError, TimedOut

    try:
        return await call
    except RetryAfter as exc:
        raise TelegramCallError(str(exc), retry_after=retry_after_seconds(exc)) from exc
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


def retry_after_seconds(exc: Any) -> float:
    """The wait Telegram asked for, read without tripping the library's deprecation of the old type."""
    value = getattr(exc, "_retry_after", None)  # a timedelta since PTB 22.2
    if value is not None and hasattr(value, "total_seconds"):
        return float(value.total_seconds())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = exc.retry_after
    return float(value.total_seconds()) if hasattr(value, "total_seconds") else float(value)


def api_file_url(base_url: str) -> str:
    """The file download base beside an API base: ``…/bot`` → ``…/file/bot`` (also for a self-hosted
    Bot API server, which serves both under one root)."""
    base = base_url.rstrip("/")
    if base.endswith("/bot"):
        return base[: -len("/bot")] + "/file/bot"
    return base + "/file/bot"


def is_group_chat(chat_id: str) -> bool:
    """Telegram gives groups and supergroups negative ids; they have their own, slower rate limit."""
    return str(chat_id).startswith("-")


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


# A logger's filters see only records logged to it, not its children's; hence every logger by name.
_REDACTED_LOGGERS = ("httpx", "telegram.Bot", "telegram.ext.ExtBot", "telegram.ext.Application", "telegram.ext",
                     __package__)


def redact_token_in_logs(token: str) -> None:
    for name in _REDACTED_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _RedactToken) and f.token == token for f in logger.filters):
            logger.addFilter(_RedactToken(token))
