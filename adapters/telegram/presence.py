"""Is the bot in a Telegram chat named by id or `@username`, and may it post there? `getChat` finds the chat (a
username resolved to its id), `getChatMember` of the bot says its standing: in a group a member (not
restricted from sending), in a channel an administrator allowed to post. A chat Telegram does not show the bot
(not found, or the bot was removed) is absent; a network failure is raised, to be asked again later."""

from __future__ import annotations

from typing import Any

from adapters.telegram.botapi import TelegramCallError, call_api
from hermes_engine.ports.inbound import ChatKind
from hermes_engine.ports.reply import ChatPresence

_KINDS = {"private": ChatKind.DM, "group": ChatKind.GROUP, "supergroup": ChatKind.GROUP, "channel": ChatKind.CHANNEL}


async def chat_presence(bot: Any, reference: str) -> ChatPresence:
    """The bot's presence in the chat `reference` names (`-100…` or `@name`), through python-telegram-bot."""
    try:
        chat = await call_api(bot.get_chat(reference))
    except TelegramCallError as exc:
        if exc.transient or exc.retry_after is not None:
            raise
        return ChatPresence(False, why="Telegram shows me no such chat")
    kind = _KINDS.get(chat.type, ChatKind.GROUP)
    if kind is ChatKind.DM:
        return ChatPresence(True, str(chat.id), kind)
    try:
        member = await call_api(bot.get_chat_member(chat.id, bot.id))
    except TelegramCallError as exc:
        if exc.transient or exc.retry_after is not None:
            raise
        return ChatPresence(False, str(chat.id), kind, why="I am not a member of that chat")
    return ChatPresence(_may_post(member, kind), str(chat.id), kind, why=_why_not(member, kind))


def _may_post(member: Any, kind: ChatKind) -> bool:
    status = str(member.status)
    if kind is ChatKind.CHANNEL:
        return status == "creator" or (status == "administrator" and getattr(member, "can_post_messages", True)
                                       is not False)
    if status == "restricted":
        return bool(getattr(member, "is_member", False)) and getattr(member, "can_send_messages", True) is not False
    return status in ("creator", "administrator", "member")


def _why_not(member: Any, kind: ChatKind) -> str:
    if _may_post(member, kind):
        return ""
    if str(member.status) in ("left", "kicked"):
        return "I am not a member of that chat"
    return "I may not post there" if kind is not ChatKind.CHANNEL else "I am not an administrator allowed to post there"
