"""The files of a recorded message fetched in its turn, before the voice notes are heard and the images read.

The message is already in the durable inbox with its files pending, so this runs on every replay too: what a
crash cut short is fetched again, and what was fetched before it is found on disk by the platform's fetcher.
A file refused for its size is told to the person once per event (the notice's idempotency key), so a replay
does not repeat it. With no fetcher for the platform (its adapter is gone) the files are described to the
model as not downloaded, and the message is still answered.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from hermes_engine.ports.fetching import AttachmentFetcher
from hermes_engine.ports.inbound import Attachment, InboundMessage, ReplyTarget

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
        fetched = {id(a): replace(a, kind=a.kind or "document", refused_reason=NOT_DOWNLOADED) for a in pending}
        return replace(msg, attachments=tuple(fetched.get(id(a), a) for a in msg.attachments))
    results = await fetcher.fetch_pending(pending, session_key, msg.message_id)
    if len(results) != len(pending):
        raise RuntimeError(f"the {msg.platform} fetcher answered {len(results)} files for {len(pending)}")
    done: dict[int, Attachment] = {}
    for n, (offered, result) in enumerate(zip(pending, results, strict=True)):
        done[id(offered)] = replace(result.attachment, source=offered.source)
        if result.notice:
            try:
                await notify(msg.reply_target(), result.notice, f"{msg.event_id}:file:{n}")
            except Exception as exc:  # noqa: BLE001 - the answer still comes; the model knows it was refused
                log.warning("could not tell %s about a refused file: %s", msg.chat_id, exc)
    return replace(msg, attachments=tuple(done.get(id(a), a) for a in msg.attachments))


__all__ = ["NOT_DOWNLOADED", "fetch_pending"]
