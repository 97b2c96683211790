"""Slack message events → `InboundMessage`: which events are meant for the bot, who wrote them and what they
meant. Whether that person is answered is the engine's decision.

- Meant for the bot: DMs (`message.im`); a mention anywhere (`app_mention`), which opens a thread under the
  mentioning message; any reply in a thread the bot is part of, no mention needed (`threads`).
- Dropped here: every message of the bot itself (Slack echoes its posts with its `bot_id`; answering them
  would loop), and edits, deletes, joins and the other message subtypes.
- Asked of the engine (`EnginePort.admit`): everyone else, other bots flagged as bots. The token's own
  workspace is a membership boundary, so the engine lets every member in unless its allowlist names people,
  and offers no pairing. People of another organisation writing in a channel shared with it (Slack Connect)
  are not its members: they are answered only when listed (or paired, in a DM).
- Sessions: one per thread (`ChatKind.THREAD`, `thread_id` = the thread's root `ts`) and one per DM. The
  Slack user id is the platform user id, the workspace (`team_id`) the account; display names come from
  `users.info` (cached) and the engine labels the speakers.
- `message_id` is the message `ts`, so the engine's durable inbox answers a message once: across Events
  API retries, across the `app_mention` + `message` pair Slack sends for one mention, across restarts.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import aiohttp

from adapters.slack.files import SlackFiles
from adapters.slack.recent import Recent
from adapters.slack.threads import ThreadBook
from adapters.slack.web_api import SlackCallError, SlackWebApi
from hermes_engine.ports.engine import EnginePort
from hermes_engine.ports.inbound import ChatKind, InboundMessage, ReplyTarget

log = logging.getLogger(__name__)

PLATFORM = "slack"
HANDLED_SUBTYPES = {None, "thread_broadcast", "file_share", "bot_message"}

_USER_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|([^>]*))?>")
_CHANNEL_MENTION = re.compile(r"<#([CG][A-Z0-9]+)(?:\|([^>]*))?>")
_SPECIAL_MENTION = re.compile(r"<!(here|channel|everyone)(?:\|[^>]*)?>")
_LINK = re.compile(r"<((?:https?|mailto|tel):[^>|]+)(?:\|([^>]*))?>")


class UserNames:
    """Display names, so the engine can tell the speakers of a shared thread apart; cached, because every
    message would otherwise cost a users.info call."""

    def __init__(self, api: SlackWebApi, *, ttl: float) -> None:
        self.api = api
        self.ttl = ttl
        self._names: dict[str, tuple[str, float]] = {}

    async def of(self, user_id: str) -> str:
        cached = self._names.get(user_id)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        try:
            data = await self.api.call("users.info", user=user_id)
        except (SlackCallError, aiohttp.ClientError, TimeoutError) as exc:
            log.info("users.info %s failed: %s", user_id, exc)
            return cached[0] if cached else user_id
        info = data.get("user") or {}
        profile = info.get("profile") or {}
        name = (profile.get("display_name") or profile.get("real_name") or info.get("real_name")
                or info.get("name") or user_id)
        if len(self._names) > 10_000:
            self._names.clear()
        self._names[user_id] = (name, time.monotonic() + self.ttl)
        return name


class MessageReader:
    def __init__(self, engine: EnginePort, api: SlackWebApi, threads: ThreadBook, names: UserNames, *,
                 tell: Callable[[ReplyTarget, str], Awaitable[None]], files: SlackFiles | None = None) -> None:
        self.engine = engine
        self.api = api
        self.threads = threads
        self.names = names
        self.files = files  # None: files are not fetched (only their messages' text is read)
        self.tell = tell  # delivers what the engine says to someone it does not admit
        self._seen: Recent[tuple[str, str], None] = Recent()
        self._teams_seen: set[str] = set()  # other workspaces whose people wrote in a shared channel

    async def read(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        arrived = time.monotonic()  # before the look-ups below, which are the gateway's time too
        me = await self.api.identify()
        subtype = event.get("subtype")
        if event.get("type") == "message" and subtype not in HANDLED_SUBTYPES:
            return
        if me.wrote(event):
            return
        is_bot = bool(event.get("bot_id")) or subtype == "bot_message"
        user = event.get("user") or (event.get("bot_id") if is_bot else "") or ""
        channel, ts = event.get("channel"), event.get("ts")
        if not user or not channel or not ts:
            return
        team = body.get("team_id") or event.get("team") or me.team_id or ""
        text = event.get("text") or ""
        thread_ts = event.get("thread_ts")
        direct = (event.get("channel_type") or ("im" if channel.startswith("D") else "channel")) == "im"
        mentioned = event.get("type") == "app_mention" or bool(me.user_id and f"<@{me.user_id}>" in text)
        if direct:
            kind, thread_id = ChatKind.DM, thread_ts
        elif mentioned:
            kind, thread_id = ChatKind.THREAD, thread_ts or ts
        elif thread_ts and await self.threads.has_bot(channel, thread_ts):
            kind, thread_id = ChatKind.THREAD, thread_ts
        else:
            return
        if (channel, ts) in self._seen:  # the app_mention + message pair of one message
            return
        self._seen.remember((channel, ts), None)
        user_name = await self.names.of(user)
        member = me.of_this_workspace(event)
        if not member:
            self._outside(event, user)
        decision = await self.engine.admit(PLATFORM, user, user_name=user_name, chat_id=channel, direct=direct,
                                           is_bot=is_bot, membership_boundary=member)
        if not decision.allowed:
            if decision.reply:
                await self.tell(ReplyTarget(PLATFORM, team, channel, thread_id), decision.reply)
            return
        if kind is ChatKind.THREAD and thread_id:
            self.threads.join(channel, thread_id, user)
            self.threads.spoke(team, channel, user, thread_id)
        msg = InboundMessage(
            platform=PLATFORM, account=team, chat_kind=kind, chat_id=channel, user_id=user, user_name=user_name,
            text=await self.plain_text(text), message_id=ts, thread_id=thread_id, mentioned=mentioned, raw=event,
            arrived=arrived)
        if event.get("files") and self.files is not None:  # fetched in the turn, once the inbox recorded them
            msg = replace(msg, attachments=self.files.offered(event))
        if not msg.text.strip() and not msg.attachments:
            return
        await self.engine.handle(msg)

    def _outside(self, event: dict[str, Any], user: str) -> None:
        """Named once per workspace in the log: its people are answered only when the profile lists them."""
        team = str(event.get("user_team") or event.get("team"))
        if team not in self._teams_seen:
            self._teams_seen.add(team)
            log.info("Slack user %s is of workspace %s, not the token's own: people of %s are answered only "
                     "when access.allowed_users or access.admins lists them", user, team, team)

    async def plain_text(self, text: str) -> str:
        """Slack markup → what the person meant: the leading @bot dropped, other mentions as @name, links
        as "text (url)", escapes undone. The model reads this, not Slack's wire format."""
        me = self.api.me
        if me.user_id:
            text = re.sub(rf"^\s*<@{me.user_id}(?:\|[^>]*)?>[\s,:]*", "", text)
        names: dict[str, str] = {}
        for user_id in list(dict.fromkeys(m.group(1) for m in _USER_MENTION.finditer(text)))[:10]:
            names[user_id] = me.name if user_id == me.user_id else await self.names.of(user_id)
        text = _USER_MENTION.sub(lambda m: "@" + (m.group(2) or names.get(m.group(1), m.group(1))), text)
        text = _CHANNEL_MENTION.sub(lambda m: "#" + (m.group(2) or m.group(1)), text)
        text = _SPECIAL_MENTION.sub(lambda m: "@" + m.group(1), text)
        text = _LINK.sub(lambda m: f"{m.group(2)} ({m.group(1)})" if m.group(2) else m.group(1), text)
        return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()
