"""Is the bot in a Telegram chat named by id or `@username`, and may it post there? `getChat` finds the chat (a
username resolved to its id), `getChatMember` of the bot says its standing: in a group a member (not
restricted from sending), in a channel an administrator allowed to post. A chat Telegram does not show the bot
(not found, or the bot was removed) is absent; a network failure is raised, to be asked again later. The person
the bot posts for is asked the same way: a member of the group, an administrator allowed to post in a channel."""

from __future__ import annotations

import re
from typing import Any

from adapters.telegram.botapi import TelegramCallError, call_api
from hermes_engine.ports.inbound import ChatKind
from hermes_engine.ports.reply import ChatPresence

_NAMED = re.compile(r"^(-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{3,31})$")
SPELLING = "a Telegram chat is named by its id, such as -1001234567890, or a username, such as @mychannel"
_KINDS = {"private": ChatKind.DM, "group": ChatKind.GROUP, "supergroup": ChatKind.GROUP, "channel": ChatKind.CHANNEL}


async def chat_presence(bot: Any, reference: str, writer: str | None = None) -> ChatPresence:
    """The bot's (and `writer`'s) standing in the chat `reference` names (`-100…` or `@name`), through
    python-telegram-bot. Anything else names no Telegram chat, and says how one is named."""
    if not _NAMED.match(reference.strip()):
        return ChatPresence(False, why=SPELLING)
    try:
        chat = await call_api(bot.get_chat(reference.strip()))
    except TelegramCallError as exc:
        if exc.transient or exc.retry_after is not None:
            raise
        return ChatPresence(False, why="Telegram shows me no such chat")
    kind = _KINDS.get(chat.type, ChatKind.GROUP)
    if kind is ChatKind.DM:
        return ChatPresence(True, str(chat.id), kind)
    for user_id, who in ((bot.id, "I am"), *(((int(writer), "you are"),) if writer and writer.isdigit() else ())):
        try:
            member = await call_api(bot.get_chat_member(chat.id, user_id))
        except TelegramCallError as exc:
            if exc.transient or exc.retry_after is not None:
                raise
            return ChatPresence(False, str(chat.id), kind, why=f"{who} not a member of that chat")
        if not _may_post(member, kind):
            return ChatPresence(False, str(chat.id), kind, why=_why_not(member, kind, who))
    return ChatPresence(True, str(chat.id), kind)


def _may_post(member: Any, kind: ChatKind) -> bool:
    status = str(member.status)
    if kind is ChatKind.CHANNEL:
        return status == "creator" or (status == "administrator" and getattr(member, "can_post_messages", True)
                                       is not False)
    if status == "restricted":
        return bool(getattr(member, "is_member", False)) and getattr(member, "can_send_messages", True) is not False
    return status in ("creator", "administrator", "member")


def _why_not(member: Any, kind: ChatKind, who: str) -> str:
    if str(member.status) in ("left", "kicked"):
        return f"{who} not a member of that chat"
    subject = who.split()[0]
    return f"{subject} may not post there" if kind is not ChatKind.CHANNEL else \
        f"{who} not an administrator allowed to post there"
