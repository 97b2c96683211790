"""Is the bot in a Slack channel named by id or `#name`, and may it post there? A name is found with
`conversations.list` (public and private channels the token sees, page by page); `conversations.info` then says
whether the bot is a member (`is_member`) and the channel is open (not archived). A channel Slack does not show
the token (a private one the bot is not in reads as not found) is absent; a failure worth retrying is raised,
to be asked again later."""

from __future__ import annotations

import re
from typing import Any

from adapters.slack.web_api import SlackCallError, SlackWebApi, is_transient
from hermes_engine.ports.inbound import ChatKind
from hermes_engine.ports.reply import ChatPresence

MAX_PAGES = 20  # of 200 channels each, looking for a name
_NAMED = re.compile(r"^(?:<#([CG][A-Z0-9]{6,})(?:\|[^>]*)?>|([CG][A-Z0-9]{6,})|(#[a-z0-9][a-z0-9._-]{0,79}))$")
SPELLING = "a Slack channel is named by its id, such as C0123ABCD, or its name, such as #general"


def reference(named: str) -> str | None:
    """The channel id or `#name` in what a person wrote: an id, a name, or a channel mention pasted from Slack."""
    match = _NAMED.match(named.strip())
    return next(group for group in match.groups() if group) if match else None


async def chat_presence(api: SlackWebApi, named: str) -> ChatPresence:
    """The bot's presence in the channel `named` names (`C…`, `#name` or a pasted mention), through slack-sdk."""
    found_name = reference(named)
    if found_name is None:
        return ChatPresence(False, why=SPELLING)
    channel_id: str | None = found_name
    try:
        if found_name.startswith("#"):
            channel_id = await _by_name(api, found_name[1:])
            if channel_id is None:
                return ChatPresence(False, why="Slack shows me no channel of that name")
        info = await api.call("conversations.info", channel=channel_id)
    except SlackCallError as exc:
        if is_transient(exc) or exc.retry_after is not None:
            raise
        return ChatPresence(False, why="Slack shows me no such channel" if exc.error == "channel_not_found"
                            else f"Slack refused to show it ({exc.error or exc.status})")
    channel: dict[str, Any] = info.get("channel") or {}
    found = str(channel.get("id") or channel_id)
    if channel.get("is_im") or channel.get("is_mpim"):
        return ChatPresence(True, found, ChatKind.DM)
    if channel.get("is_archived"):
        return ChatPresence(False, found, ChatKind.CHANNEL, why="that channel is archived")
    if not channel.get("is_member"):
        return ChatPresence(False, found, ChatKind.CHANNEL, why="I am not a member of that channel (invite me first)")
    return ChatPresence(True, found, ChatKind.CHANNEL)


async def _by_name(api: SlackWebApi, name: str) -> str | None:
    cursor = ""
    for _ in range(MAX_PAGES):
        page = await api.call("conversations.list", types="public_channel,private_channel", exclude_archived=True,
                              limit=200, **({"cursor": cursor} if cursor else {}))
        for channel in page.get("channels") or ():
            if channel.get("name") == name:
                return str(channel["id"])
        cursor = str((page.get("response_metadata") or {}).get("next_cursor") or "")
        if not cursor:
            return None
    return None
