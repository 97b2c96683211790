"""Which threads the bot is part of, and who it talks to in them.

A reply in a thread the bot is part of is answered without a mention, so the adapter has to know its
threads: the ones it was mentioned in or posted to (in memory) and, for a thread it has not seen in this
process (after a restart), whatever `conversations.replies` says (the first 200 messages). The answer is
cached; a negative one only for `thread_check_ttl_seconds`, since the bot may be mentioned there later.

The same book remembers, per thread, the last person who spoke (Slack's native streams want a
`recipient_user_id` outside DMs) and, per person and channel, the thread they last talked to the bot in
(where `/hermes` answers). None of that survives a restart; it only decides where an answer goes.
"""

from __future__ import annotations

import asyncio
import logging
import time

import aiohttp

from adapters.slack.recent import Recent
from adapters.slack.web_api import SlackCallError, SlackWebApi

log = logging.getLogger(__name__)

THREAD_SCAN_LIMIT = 200

Thread = tuple[str, str]  # (channel, thread ts)


class ThreadBook:
    def __init__(self, api: SlackWebApi, *, negative_ttl: float) -> None:
        self.api = api
        self.negative_ttl = negative_ttl
        self.members: Recent[Thread, None] = Recent()
        self._not_members: dict[Thread, float] = {}
        self._checks: dict[Thread, asyncio.Future[bool]] = {}
        self._recipients: Recent[Thread, str] = Recent()
        self._latest: Recent[tuple[str, str, str], str] = Recent()

    def join(self, channel: str, thread_ts: str, recipient: str | None = None) -> None:
        self.members.remember((channel, thread_ts), None)
        self._not_members.pop((channel, thread_ts), None)
        if recipient:
            self._recipients.remember((channel, thread_ts), recipient)

    def forget(self) -> None:
        """What a restart forgets."""
        self.members.clear()
        self._not_members.clear()

    def recipient(self, channel: str, thread_ts: str | None) -> str | None:
        return self._recipients.get((channel, thread_ts or ""))

    def spoke(self, team: str, channel: str, user: str, thread_ts: str) -> None:
        self._latest.remember((team, channel, user), thread_ts)

    def latest(self, team: str, channel: str, user: str) -> str | None:
        """The thread where this person last talked to the bot in this channel."""
        return self._latest.get((team, channel, user))

    async def has_bot(self, channel: str, thread_ts: str) -> bool:
        key = (channel, thread_ts)
        if key in self.members:
            return True
        until = self._not_members.get(key)
        if until is not None and until > time.monotonic():
            return False
        check = self._checks.get(key)
        if check is None:  # one conversations.replies call per thread, however many replies arrive at once
            check = asyncio.ensure_future(self._check(channel, thread_ts))
            self._checks[key] = check
            check.add_done_callback(lambda _: self._checks.pop(key, None))
        return await asyncio.shield(check)

    async def _check(self, channel: str, thread_ts: str) -> bool:
        try:
            data = await self.api.call("conversations.replies", channel=channel, ts=thread_ts,
                                       limit=THREAD_SCAN_LIMIT)
            found = any(self.api.me.wrote(m) for m in data.get("messages") or [])
        except (SlackCallError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("could not read Slack thread %s/%s: %s", channel, thread_ts, exc)
            found = False
        if found:
            self.join(channel, thread_ts)
        else:
            if len(self._not_members) > 10_000:
                self._not_members.clear()
            self._not_members[(channel, thread_ts)] = time.monotonic() + self.negative_ttl
        return found
