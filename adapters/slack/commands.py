"""Slack's slash commands, `/goal`, `/hermes` and `/kanban`. Slack wants the acknowledgement within three seconds, so
each is acknowledged at once (with its ephemeral answer, if any) and the work runs after the ack.

- `/goal <text>` posts an anchor message "🎯 Goal: <text>" in the channel and runs `/goal <text>` in the
  anchor's thread: the goal's turns and progress posts land there.
- `/goal status|pause|resume|clear`: a slash command carries no thread, so it goes to the channel's most
  recent goal thread (an anchor this process posted, else the engine's answer from its goals). Inside a
  thread, "@bot /goal status" reaches that very thread's session as an ordinary message (`inbound`).
- `/hermes new|stop|status|help|…` runs the engine command of that name: in a DM on the DM's session; in a
  channel on the thread where this person last talked to the bot, else the channel's latest goal thread,
  else a channel-level session. `/kanban …` is `/hermes kanban …` (the task board), answered the same way.

Who may use them is the engine's decision, as for messages; a Slack workspace is a membership boundary.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.slack.inbound import PLATFORM, UserNames
from adapters.slack.outbound import escape
from adapters.slack.threads import ThreadBook
from adapters.slack.web_api import SlackWebApi, proxy_for
from hermes_engine.errors import PlatformError
from hermes_engine.ports.engine import EnginePort
from hermes_engine.ports.inbound import ChatKind, InboundMessage, ReplyTarget

log = logging.getLogger(__name__)

Ack = Callable[..., Awaitable[Any]]

GOAL_SUBCOMMANDS = ("status", "pause", "resume", "clear")
GOAL_USAGE = ("Usage: `/goal <what you want done>` — I work on it in a thread until it is done.\n"
              "Also `/goal status`, `/goal pause`, `/goal resume`, `/goal clear` (they act on this channel's "
              "latest goal).")
NO_GOAL = "There is no goal in this channel yet. Start one with `/goal <what you want done>`."


class SlashCommands:
    def __init__(self, engine: EnginePort, api: SlackWebApi, threads: ThreadBook, names: UserNames, *,
                 hermes_command: str, post_anchor: Callable[[ReplyTarget, str], Awaitable[str]],
                 spawn: Callable[[Awaitable[Any], str], object]) -> None:
        self.engine = engine
        self.api = api
        self.threads = threads
        self.names = names
        self.hermes_command = hermes_command
        self.post_anchor = post_anchor  # posts mrkdwn through the channel's paced lane, returns its ts
        self.spawn = spawn
        self._anchors: dict[tuple[str, str], str] = {}  # (team, channel) → the newest goal anchor posted here

    def _where(self, body: dict[str, Any]) -> tuple[str, str, str]:
        return body.get("team_id") or self.api.me.team_id or "", body["channel_id"], body["user_id"]

    async def _admitted(self, ack: Ack, body: dict[str, Any]) -> bool:
        _, channel, user = self._where(body)
        decision = await self.engine.admit(PLATFORM, user, user_name=body.get("user_name") or "", chat_id=channel,
                                           direct=channel.startswith("D"), membership_boundary=True)
        if not decision.allowed:
            await (ack(text=decision.reply) if decision.reply else ack())
        return decision.allowed

    async def on_goal(self, ack: Ack, body: dict[str, Any]) -> None:
        text = (body.get("text") or "").strip()
        if not text:
            await ack(text=GOAL_USAGE)
            return
        if not await self._admitted(ack, body):
            return
        team, channel, _ = self._where(body)
        if text.split(maxsplit=1)[0].lower() in GOAL_SUBCOMMANDS:
            thread = await self.goal_thread(team, channel)
            if thread is None:
                await ack(text=NO_GOAL)
                return
            await ack(text="Answering in the goal's thread.")
            self.spawn(self._run(body, ChatKind.THREAD, thread, f"/goal {text}"), "/goal command")
            return
        await ack()
        self.spawn(self._start_goal(body, text), "/goal")

    async def _start_goal(self, body: dict[str, Any], text: str) -> None:
        team, channel, user = self._where(body)
        target = ReplyTarget(PLATFORM, team, channel)
        anchor_text = f"🎯 Goal: {escape(text)}\n_set by <@{user}>; I work on it in this thread._"
        try:
            anchor = await self.post_anchor(target, anchor_text)
        except PlatformError as exc:
            log.warning("could not post the goal anchor in %s: %s", channel, exc)
            await self._respond(body, "I cannot post in this conversation. Invite me first (`/invite @"
                                      f"{self.api.me.name}`), then run the command again.")
            return
        self.threads.join(channel, anchor, user)
        self.threads.spoke(team, channel, user, anchor)
        self._anchors[(team, channel)] = anchor
        await self.engine.handle(InboundMessage(
            platform=PLATFORM, account=team, chat_kind=ChatKind.THREAD, chat_id=channel, user_id=user,
            user_name=await self.names.of(user), text=f"/goal {text}", message_id=anchor, thread_id=anchor,
            mentioned=True, raw=body))

    async def goal_thread(self, team: str, channel: str) -> str | None:
        """The channel's most recent goal thread. The engine keeps the goals; an anchor posted by this
        process is known here first, before its goal is even recorded."""
        anchor = self._anchors.get((team, channel))
        if anchor is not None:
            return anchor
        return await self.engine.goal_thread(PLATFORM, team, channel)

    async def on_hermes(self, ack: Ack, body: dict[str, Any]) -> None:
        text = (body.get("text") or "").strip() or "help"
        word = text.split(maxsplit=1)[0].lower().lstrip("/")
        if not self.engine.knows_command(word):
            names = ", ".join(c.name for c in self.engine.command_menu())
            await ack(text=f"Usage: `{self.hermes_command} <command>` — one of: {names}.")
            return
        await self._engine_command(ack, body, "/" + text.lstrip("/"))

    async def on_kanban(self, ack: Ack, body: dict[str, Any]) -> None:
        """`/kanban …` is `/hermes kanban …`: the task board has a slash command of its own."""
        await self._engine_command(ack, body, f"/kanban {(body.get('text') or '').strip()}".strip())

    async def _engine_command(self, ack: Ack, body: dict[str, Any], command: str) -> None:
        if not await self._admitted(ack, body):
            return
        team, channel, user = self._where(body)
        if channel.startswith("D"):
            await ack()
            self.spawn(self._run(body, ChatKind.DM, None, command), command.split()[0])
            return
        thread = self.threads.latest(team, channel, user) or await self.goal_thread(team, channel)
        if thread is not None:
            await ack(text="Answering in the thread of our latest conversation here.")
            self.spawn(self._run(body, ChatKind.THREAD, thread, command), command.split()[0])
        else:
            await ack()
            self.spawn(self._run(body, ChatKind.CHANNEL, None, command), command.split()[0])

    async def _run(self, body: dict[str, Any], kind: ChatKind, thread: str | None, text: str) -> None:
        team, channel, user = self._where(body)
        message_id = f"cmd-{body.get('trigger_id') or time.time_ns()}"
        await self.engine.handle(InboundMessage(
            platform=PLATFORM, account=team, chat_kind=kind, chat_id=channel, user_id=user,
            user_name=await self.names.of(user), text=text, message_id=message_id, thread_id=thread,
            mentioned=True, raw=body))

    async def _respond(self, body: dict[str, Any], text: str) -> None:
        """An ephemeral answer through the command's response_url, for when the bot cannot post."""
        url = body.get("response_url")
        if not url:
            return
        client = AsyncWebhookClient(url, proxy=proxy_for(url))
        client.proxy = proxy_for(url)
        try:
            await client.send(text=text, response_type="ephemeral")
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("could not answer through response_url: %s", exc)
