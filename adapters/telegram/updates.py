"""Telegram updates decoded one at a time, so that one the library cannot read is rejected alone.

python-telegram-bot decodes a getUpdates batch as a whole (``Update.de_list``): one malformed update fails
the batch, the offset never moves past it, and every later poll fails the same way, after a restart too —
the bot would be deaf to everyone. `TolerantBot.get_updates` takes the batch as JSON and decodes each
update by itself (``Update.de_json``). One that cannot be read is reported to `on_rejected` and stands in
the batch as a bare ``Update(update_id)`` (no message, so nothing to answer): the offset moves past it and
the updates around it are answered. The webhook decodes its one update with the same `decode_update`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from telegram import Bot, Update
from telegram.request import BaseRequest

RAW_KEPT = 4_000  # characters of a rejected update kept for the log


@dataclass(frozen=True)
class RejectedUpdate:
    """An update that could not be read: its id (None without an integer one), why, and what it held."""

    update_id: int | None
    reason: str
    raw: str
    sender: str | None = None  # the user id of whoever sent it, where the update still shows one

    def event_id(self, account: str) -> str:
        """Its key among the bot's inbound events: by update id, or by its content when it has none."""
        if self.update_id is not None:
            return f"{account}:rejected:{self.update_id}"
        digest = hashlib.sha256(self.raw.encode(errors="surrogatepass")).hexdigest()[:16]  # a lone surrogate too
        return f"{account}:rejected:{digest}"


def decode_update(data: Any, bot: Bot | None) -> Update | RejectedUpdate:
    update_id = data.get("update_id") if isinstance(data, dict) else None
    if not _is_int(update_id):
        return RejectedUpdate(None, "no integer update_id", _raw(data), _sender(data))
    try:
        return Update.de_json(data, bot)
    except Exception as exc:  # noqa: BLE001 - whatever the library trips on, this update alone is refused
        return RejectedUpdate(update_id, f"{type(exc).__name__}: {exc}", _raw(data), _sender(data))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _sender(data: Any) -> str | None:
    """`from.id` of the update's one payload (message, callback query, …), when it is still readable: what
    lets `/forget` find the rejected update with the person's other messages."""
    for value in data.values() if isinstance(data, dict) else ():
        sender = value.get("from") if isinstance(value, dict) else None
        if isinstance(sender, dict) and _is_int(sender.get("id")):
            return str(sender["id"])
    return None


def _raw(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=False, default=str)
    return text if len(text) <= RAW_KEPT else text[:RAW_KEPT] + "…"


class TolerantBot(Bot):
    """A `telegram.Bot` whose `get_updates` rejects malformed updates one by one instead of failing the
    batch. It makes the call `Bot.get_updates` makes (``_post``, which applies the library's defaults and
    request set-up); only the decoding differs. Its getUpdates request and its other requests share one
    read timeout (the long-poll ``timeout`` is added to it, as the library does)."""

    def __init__(self, token: str, *, on_rejected: Callable[[RejectedUpdate], None], **kwargs: Any) -> None:
        super().__init__(token, **kwargs)
        self._on_rejected = on_rejected

    async def get_updates(self, offset: int | None = None, limit: int | None = None,
                          timeout: float | timedelta | None = None, allowed_updates: Sequence[str] | None = None,
                          *, read_timeout: Any = BaseRequest.DEFAULT_NONE,
                          write_timeout: Any = BaseRequest.DEFAULT_NONE,
                          connect_timeout: Any = BaseRequest.DEFAULT_NONE,
                          pool_timeout: Any = BaseRequest.DEFAULT_NONE,
                          api_kwargs: dict[str, Any] | None = None) -> tuple[Update, ...]:
        wait = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout or 0)
        base = self.request.read_timeout if read_timeout is BaseRequest.DEFAULT_NONE else read_timeout
        data = {"timeout": timeout, "offset": offset, "limit": limit, "allowed_updates": allowed_updates}
        result = await self._post("getUpdates", data, read_timeout=(base or 0) + wait, write_timeout=write_timeout,
                                  connect_timeout=connect_timeout, pool_timeout=pool_timeout, api_kwargs=api_kwargs)
        updates = []
        for item in result or ():
            decoded = decode_update(item, self)
            if isinstance(decoded, RejectedUpdate):
                self._on_rejected(decoded)
                if decoded.update_id is None:
                    continue
                decoded = Update(decoded.update_id)  # holds the offset's place; nothing in it to answer
            updates.append(decoded)
        return tuple(updates)
