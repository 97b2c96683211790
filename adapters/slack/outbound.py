"""Slack's `Transport`: one Web API call per primitive; pacing, splitting, rendering and idempotency are
the shared `adapters.delivery.Outbound`'s.

- Post-then-edit (`chat.postMessage` / `chat.update`) everywhere, paced per channel by the shared layer
  (`edit_interval_seconds`, 1.2 s: `chat.update` is Tier 3, ~50 a minute).
- Finals are mrkdwn (`adapters.render.render_slack`) split at 40,000 characters; only `text` is sent, no
  blocks, so the 3,000-character section limit never applies and nothing is cut. Interim frames are plain
  text with `& < >` escaped, so model output can never ping anyone. Link unfurling is off.
- In threads, native streams (`chat.startStream` / `appendStream` / `stopStream`) carry Markdown that
  Slack renders itself, with every mention the model wrote (`<@U…>`, `<!here>`, `<!subteam^…>`, …)
  defused, including one split between two calls. A stream holds one message's worth: a reply
  that outgrows it is refused here before Slack refuses it, and the shared layer falls back to
  post-then-edit and splits. A Slack that refuses streams (`missing_scope`, `unknown_method`, …) switches
  them off for the process.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Mapping
from typing import Any

from adapters.slack.recent import Recent
from adapters.slack.threads import ThreadBook
from adapters.slack.web_api import SlackCallError, SlackWebApi
from adapters.transport import NativeStream
from hermes_engine.ports.inbound import ReplyTarget

log = logging.getLogger(__name__)

NATIVE_CHUNK = 12_000  # markdown_text per chat.startStream/appendStream/stopStream call
NATIVE_UNAVAILABLE = {"unknown_method", "missing_scope", "not_allowed_token_type", "method_deprecated",
                      "feature_not_enabled", "not_supported", "team_not_allowed"}


def escape(text: str) -> str:
    """Slack's three control characters, escaped as Slack requires in any `text`."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_MENTION = re.compile(r"<(?=[@!])")


def defuse(markdown: str, *, after: str = "") -> str:
    """Stream Markdown is not escaped (Slack renders it), so a mention in model output (``<@U…>``,
    ``<@W…>``, ``<!channel>``, ``<!here>``, ``<!subteam^…>``) would ping people; a zero-width space after
    the ``<`` keeps it from forming and reads the same. `after` is what the stream already shows: Slack
    joins a stream's pieces, so a ``<`` ending one call and ``@U…>`` starting the next would form one."""
    defused = _MENTION.sub("<\u200b", markdown)
    if after.endswith("<") and defused.startswith(("@", "!")):
        return "\u200b" + defused
    return defused


class SlackMessages:
    def __init__(self, api: SlackWebApi) -> None:
        self.api = api

    async def post(self, target: ReplyTarget, text: str, *, mrkdwn: bool) -> str:
        data = await self.api.call("chat.postMessage", channel=target.chat_id, text=text,
                                   thread_ts=target.thread_id, mrkdwn=mrkdwn, unfurl_links=False,
                                   unfurl_media=False)
        return str(data["ts"])

    async def update(self, target: ReplyTarget, ts: str, text: str, *, mrkdwn: bool) -> None:
        await self.api.call("chat.update", channel=target.chat_id, ts=ts, text=text, mrkdwn=mrkdwn)

    async def delete(self, target: ReplyTarget, ts: str) -> None:
        """A message someone already deleted is as good as deleted."""
        try:
            await self.api.call("chat.delete", channel=target.chat_id, ts=ts)
        except SlackCallError as exc:
            if exc.error != "message_not_found":
                raise


class NativeStreams:
    def __init__(self, api: SlackWebApi, max_length: int) -> None:
        self.api = api
        self.max_length = max_length
        self.off: str | None = None  # why Slack refused streams, once it did: no stream is tried again
        self._sizes: Recent[str, int] = Recent(limit=1000)  # open stream → characters streamed so far
        self._last: Recent[str, str] = Recent(limit=1000)  # open stream → the last character streamed

    async def start(self, target: ReplyTarget, markdown: str, recipient: str | None) -> str:
        """Open a stream in `target`'s thread; `recipient` is the person streamed to (Slack wants one
        outside DMs). Returns the stream's message ts."""
        self._check_size(0, markdown)
        markdown = defuse(markdown)
        first, rest = markdown[:NATIVE_CHUNK], markdown[NATIVE_CHUNK:]
        kwargs: dict[str, Any] = {"channel": target.chat_id, "thread_ts": target.thread_id, "markdown_text": first}
        if recipient:
            kwargs.update(recipient_user_id=recipient, recipient_team_id=target.account)
        try:
            data = await self.api.call("chat.startStream", **kwargs)
        except SlackCallError as exc:
            if exc.error in NATIVE_UNAVAILABLE or exc.status == 404:
                self.off = exc.error or str(exc.status)
                log.warning("Slack refused chat.startStream (%s): streaming by chat.update from now on", self.off)
            raise
        stream_id = str(data["ts"])
        self._sizes.remember(stream_id, len(first))
        self._last.remember(stream_id, first[-1:])
        if rest:
            try:
                await self.append(target, stream_id, rest)
            except BaseException:
                # The caller never learns this stream's id: take the half-filled message away again.
                with contextlib.suppress(Exception):
                    await self.api.call("chat.delete", channel=target.chat_id, ts=stream_id)
                raise
        return stream_id

    async def append(self, target: ReplyTarget, stream_id: str, markdown: str) -> None:
        self._check_size(self._sizes.get(stream_id, 0), markdown)
        markdown = defuse(markdown, after=self._last.get(stream_id, ""))
        for start in range(0, len(markdown), NATIVE_CHUNK):
            piece = markdown[start:start + NATIVE_CHUNK]
            await self.api.call("chat.appendStream", channel=target.chat_id, ts=stream_id, markdown_text=piece)
            self._sizes[stream_id] = self._sizes.get(stream_id, 0) + len(piece)
            self._last[stream_id] = piece[-1:]

    async def stop(self, target: ReplyTarget, stream_id: str, markdown: str) -> None:
        """Close the stream with `markdown` appended. If that would overflow, it is closed with what it
        shows and the overflow raised, so the shared layer re-sends the whole reply split."""
        try:
            self._check_size(self._sizes.get(stream_id, 0), markdown)
        except SlackCallError:
            await self.stop(target, stream_id, "")
            raise
        markdown = defuse(markdown, after=self._last.get(stream_id, ""))
        head, tail = markdown[:-NATIVE_CHUNK] if len(markdown) > NATIVE_CHUNK else "", markdown[-NATIVE_CHUNK:]
        if head:
            await self.append(target, stream_id, head)
        await self.api.call("chat.stopStream", channel=target.chat_id, ts=stream_id, markdown_text=tail or None)
        self._sizes.pop(stream_id, None)
        self._last.pop(stream_id, None)

    def _check_size(self, streamed: int, more: str) -> None:
        if streamed + len(more) > self.max_length:
            raise SlackCallError("the streamed reply outgrew one Slack message", error="msg_too_long")


class SlackTransport:
    """The `Transport` of one bot: finals as mrkdwn, everything else escaped plain text; a thread the bot
    posts in is one it follows."""

    def __init__(self, messages: SlackMessages, streams: NativeStreams, threads: ThreadBook) -> None:
        self.messages = messages
        self.streams = streams
        self.threads = threads

    async def send(self, target: ReplyTarget, text: str, *, rendered: bool, extras: Mapping[str, Any]) -> str:
        ts = await self.messages.post(target, text if rendered else escape(text), mrkdwn=rendered)
        self.threads.join(target.chat_id, target.thread_id or ts)  # a reply under a top-level post is to the bot
        return ts

    async def edit(self, target: ReplyTarget, message_id: str, text: str, *, rendered: bool,
                   extras: Mapping[str, Any]) -> None:
        await self.messages.update(target, message_id, text if rendered else escape(text), mrkdwn=rendered)

    async def delete(self, target: ReplyTarget, message_id: str) -> None:
        await self.messages.delete(target, message_id)

    async def typing(self, target: ReplyTarget) -> None:
        return None  # bots have no typing indicator in Slack (capabilities.typing_indicator is False)

    def native_stream(self, target: ReplyTarget) -> NativeStream | None:
        """Slack's streams need a thread and, outside DMs, the person streamed to (known once they spoke)."""
        if self.streams.off is not None or target.thread_id is None:
            return None
        if target.chat_id.startswith("D") or self.threads.recipient(target.chat_id, target.thread_id) is not None:
            return ThreadStream(self.streams, self.threads)
        return None


class ThreadStream:
    """A native stream in a thread, streamed to the person who spoke there."""

    def __init__(self, streams: NativeStreams, threads: ThreadBook) -> None:
        self.streams = streams
        self.threads = threads

    async def start(self, target: ReplyTarget, markdown: str) -> str:
        recipient = self.threads.recipient(target.chat_id, target.thread_id)
        stream_id = await self.streams.start(target, markdown, recipient)
        if target.thread_id:
            self.threads.join(target.chat_id, target.thread_id)
        return stream_id

    async def append(self, target: ReplyTarget, stream_id: str, markdown: str) -> None:
        await self.streams.append(target, stream_id, markdown)

    async def stop(self, target: ReplyTarget, stream_id: str, markdown: str) -> None:
        await self.streams.stop(target, stream_id, markdown)
