"""A Telegram update becomes an `InboundMessage`, or nothing when it is not for the engine.

Private chats are DMs (one session per chat); groups and supergroups are GROUPs (per person unless sessions
are shared), and a forum topic's ``message_thread_id`` is the thread. In a group the bot answers only when
@mentioned, replied to, or given one of its commands — otherwise it would answer every remark in a busy
room — and the @mention is removed from the text, since it is addressing, not content.
Edits, channel posts, membership changes, anonymous admins and the bot's own messages are skipped.

`message_id` carries the Telegram message id and the update id, so the engine's inbox dedupes per update
(Telegram resends an update until its offset is confirmed).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from adapters.telegram.media import has_media
from hermes_engine.ports.inbound import ChatKind, InboundMessage

_COMMAND = re.compile(r"^/([A-Za-z0-9_]+)(?:@([A-Za-z0-9_]+))?")
NO_TEXT_MENTION = "(mentioned you without a message)"


@dataclass(frozen=True)
class Incoming:
    """An update that is for the engine, before anyone asked whether its sender may be answered."""

    message: Any  # the Telegram message (its files are fetched only once the sender is admitted)
    user: Any
    inbound: InboundMessage


class UpdateReader:
    """Knows who the bot is (its id from the token, its @username once getMe answered) and which
    commands the engine has, which is what telling addressed messages from chatter takes."""

    def __init__(self, platform: str, account: str, *, knows_command: Callable[[str], bool]) -> None:
        self.platform = platform
        self.account = account
        self.bot_id = int(account)
        self.username: str | None = None
        self.knows_command = knows_command

    def read(self, update: Any) -> Incoming | None:
        message = update.message
        if message is None or message.from_user is None:
            return None  # edits, channel posts, membership changes, anonymous admins
        user = message.from_user
        if user.id == self.bot_id:
            return None
        chat_type = message.chat.type
        if chat_type == "private":
            kind = ChatKind.DM
        elif chat_type in ("group", "supergroup"):
            kind = ChatKind.GROUP
        else:
            return None
        text = message.text or message.caption or ""
        entities = (message.entities or ()) if message.text is not None else (message.caption_entities or ())
        mentioned = self._mentions_me(message, text, entities) or self._replies_to_me(message)
        if kind is ChatKind.GROUP and not (mentioned or self._is_my_command(text)):
            return None
        if self.username:
            text = strip_mention(text, self.username)
        if not text.strip() and not has_media(message):
            if kind is ChatKind.GROUP and mentioned:
                text = NO_TEXT_MENTION
            else:
                return None
        return Incoming(message, user, self._inbound(update, message, user, kind, text, mentioned))

    def _inbound(self, update: Any, message: Any, user: Any, kind: ChatKind, text: str,
                 mentioned: bool) -> InboundMessage:
        user_id = str(user.id)
        topic = message.is_topic_message and message.message_thread_id
        thread_id = str(message.message_thread_id) if topic else None
        reply_to = message.reply_to_message
        is_topic_root = (reply_to is not None and message.is_topic_message
                         and reply_to.message_id == message.message_thread_id)
        return InboundMessage(
            platform=self.platform, account=self.account, chat_kind=kind, chat_id=str(message.chat.id),
            user_id=user_id, user_name=user.full_name or user.username or user_id, text=text,
            message_id=f"{message.message_id}:{update.update_id}", thread_id=thread_id, mentioned=mentioned,
            reply_to_id=str(reply_to.message_id) if reply_to is not None and not is_topic_root else None,
            received_at=message.date, raw=update.to_dict())

    def _mentions_me(self, message: Any, text: str, entities: Any) -> bool:
        name = (self.username or "").lower()
        for entity in entities:
            if entity.type == "mention" and name:
                shown = (message.parse_entity(entity) if message.text is not None
                         else message.parse_caption_entity(entity))
                if shown.lower() == "@" + name:
                    return True
            elif entity.type == "text_mention" and entity.user is not None and entity.user.id == self.bot_id:
                return True
        return bool(name) and re.search(rf"(?<![\w@])@{re.escape(name)}\b", text, re.I) is not None

    def _replies_to_me(self, message: Any) -> bool:
        original = message.reply_to_message
        if original is None or original.from_user is None:
            return False
        if message.is_topic_message and original.message_id == message.message_thread_id:
            return False  # the topic's root, not a reply
        return bool(original.from_user.id == self.bot_id)

    def _is_my_command(self, text: str) -> bool:
        """A command addressed to this bot: ``/x@thisbot``, or a bare ``/x`` the engine knows (``/start`` is
        Telegram's own greeting). ``/x@otherbot`` belongs to another bot in the group."""
        match = _COMMAND.match(text.strip())
        if not match:
            return False
        name, addressee = match.group(1).lower(), match.group(2)
        if addressee:
            return bool(self.username) and addressee.lower() == (self.username or "").lower()
        return name == "start" or self.knows_command(name)


def strip_mention(text: str, username: str) -> str:
    stripped = re.sub(rf"@{re.escape(username)}\b", "", text, flags=re.I)
    if stripped == text:
        return text
    return re.sub(r"[ \t]{2,}", " ", stripped).strip()
