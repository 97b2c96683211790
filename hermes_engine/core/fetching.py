"""The files of a recorded message fetched in its turn, before the voice notes are heard and the images read.

The message is already in the durable inbox with its files pending, so this runs on every replay too: what a
crash cut short is fetched again, and what was fetched before it is found on disk by the platform's fetcher.
A file refused for its size is told to the person once per event (the notice's idempotency key), so a replay
does not repeat it. With no fetcher for the platform (its adapter is gone), or one that fails outright, the
files are described to the model as not downloaded, and the message is still answered.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from hermes_engine.ports.fetching import AttachmentFetcher
from hermes_engine.ports.inbound import InboundMessage, ReplyTarget

log = logging.getLogger(__name__)

NOT_DOWNLOADED = "could not be downloaded"

Notify = Callable[[ReplyTarget, str, str], Awaitable[None]]  # (target, text, idempotency key)


async def fetch_pending(msg: InboundMessage, session_key: str, fetcher: AttachmentFetcher | None,
                        notify: Notify) -> InboundMessage:
    """`msg` with each pending attachment fetched or refused; the others as they were."""
    pending = tuple(a for a in msg.attachments if a.pending)
    if not pending:
        return msg
    if fetcher is None:
        log.warning("no fetcher for %s files: %d of message %s not downloaded", msg.platform, len(pending),
                    msg.message_id)
        return _not_downloaded(msg)
    try:
        results = await fetcher.fetch_pending(pending, session_key, msg.message_id)
    except Exception:  # a full disk, a fault of the fetcher: the message is still answered
        log.exception("could not fetch the files of %s message %s", msg.platform, msg.message_id)
        return _not_downloaded(msg)
    if len(results) != len(pending):
        log.error("the %s fetcher answered %d files for %d", msg.platform, len(results), len(pending))
        return _not_downloaded(msg)
    for n, result in enumerate(results):
        if result.notice:
            try:
                await notify(msg.reply_target(), result.notice, f"{msg.event_id}:file:{n}")
            except Exception as exc:  # noqa: BLE001 - the answer still comes; the model knows it was refused
                log.warning("could not tell %s about a refused file: %s", msg.chat_id, exc)
    answered = iter(results)
    return replace(msg, attachments=tuple(replace(next(answered).attachment, source=a.source) if a.pending else a
                                          for a in msg.attachments))


def _not_downloaded(msg: InboundMessage) -> InboundMessage:
    """`msg` with each pending file described as not downloaded."""
    return replace(msg, attachments=tuple(replace(a, kind=a.kind or "document", refused_reason=NOT_DOWNLOADED)
                                          if a.pending else a for a in msg.attachments))


__all__ = ["NOT_DOWNLOADED", "fetch_pending"]
