"""Telegram's `Transport`: the four outbound calls as Bot API calls, one call each, no retry and no pacing
(the shared pacer in `adapters.delivery` does both, per chat), and how Telegram paces and renders.

Finals are sent as text plus entities with no parse mode (`adapters.render.render_telegram`), so model text
never needs escaping; interim frames and the plain fallback carry neither. Answers in groups quote the
person's message unless ``reply_to`` says otherwise, and land in the forum topic they came from.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from adapters.delivery import Lanes
from adapters.part_rendering import PartRenderer
from adapters.parts import OutPart
from adapters.telegram.botapi import TelegramCallError, call_api, is_group_chat
from adapters.telegram.options import TelegramOptions
from adapters.transport import NativeStream
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import OutgoingFile

MB = 1024 * 1024
PHOTO_TYPES = frozenset({"image/jpeg", "image/png", "image/webp"})  # what sendPhoto shows as a photo
PHOTO_LIMIT = 10 * MB  # the Bot API's limit for photos; a larger image goes as a document
DOCUMENT_LIMIT = 50 * MB  # the cloud Bot API's upload limit
LOCAL_LIMIT = 2000 * MB  # a local `telegram-bot-api --local` server's
CAPTION_LIMIT = 1024  # characters of a caption


class TelegramLanes(Lanes):
    """Per chat, as everywhere; groups allow 20 messages a minute, so their calls go further apart."""

    def __init__(self, options: TelegramOptions) -> None:
        super().__init__(options.edit_interval_seconds)
        self.options = options

    def interval_for(self, target: ReplyTarget) -> float:
        if is_group_chat(target.chat_id):
            return self.options.group_interval_seconds
        return self.options.edit_interval_seconds


class TelegramPartRenderer(PartRenderer):
    def parts(self, markdown: str) -> list[OutPart]:
        """A part without entities goes out as plain text, which is what Telegram shows for it either way:
        a message already showing it (the last streamed frame, as a rule) is then not edited into itself,
        an edit Telegram refuses as "message is not modified" after it has cost the chat's paced slot."""
        return [OutPart(part.rendered.text, None) if part.rendered is not None and not part.rendered.extras else part
                for part in super().parts(markdown)]


class TelegramSender:
    """The `Transport` of one bot."""

    def __init__(self, bot: Any, options: TelegramOptions) -> None:
        self.bot = bot
        self.options = options

    async def send(self, target: ReplyTarget, text: str, *, rendered: bool, extras: Mapping[str, Any]) -> str:
        message = await call_api(self.bot.send_message(text=text, entities=self._entities(extras, rendered),
                                                       parse_mode=None, **self._target_kwargs(target)))
        return str(message.message_id)

    async def edit(self, target: ReplyTarget, message_id: str, text: str, *, rendered: bool,
                   extras: Mapping[str, Any]) -> None:
        try:
            await call_api(self.bot.edit_message_text(text=text, chat_id=int(target.chat_id),
                                                      message_id=int(message_id),
                                                      entities=self._entities(extras, rendered), parse_mode=None))
        except TelegramCallError as exc:
            if "message is not modified" in str(exc).lower():
                return  # the chat already shows it: the goal of the edit is met
            raise

    async def delete(self, target: ReplyTarget, message_id: str) -> None:
        try:
            await call_api(self.bot.delete_message(chat_id=int(target.chat_id), message_id=int(message_id)))
        except TelegramCallError as exc:
            if "not found" in str(exc).lower():
                return  # already gone
            raise

    async def typing(self, target: ReplyTarget) -> None:
        kwargs: dict[str, Any] = {"chat_id": int(target.chat_id), "action": "typing"}
        if target.thread_id:
            kwargs["message_thread_id"] = int(target.thread_id)
        await call_api(self.bot.send_chat_action(**kwargs))

    def native_stream(self, target: ReplyTarget) -> NativeStream | None:
        return None  # the Bot API has no streaming: replies are posted and edited

    def max_file_bytes(self, media_type: str) -> int:
        return LOCAL_LIMIT if self.options.local_mode else DOCUMENT_LIMIT

    async def send_file(self, target: ReplyTarget, file: OutgoingFile) -> str:
        """`sendVoice` for a spoken answer, `sendPhoto` for an image Telegram shows as a photo (by its bytes'
        type, within the photo limit), `sendDocument` for everything else and for a photo Telegram refuses
        (its dimensions); multipart, through python-telegram-bot."""
        from telegram import InputFile

        upload = InputFile(file.data, filename=file.name, attach=False)
        caption = file.caption[:CAPTION_LIMIT] or None
        kwargs = self._target_kwargs(target)
        if file.voice:  # an answer spoken: OGG/Opus, shown as a voice bubble
            message = await call_api(self.bot.send_voice(voice=upload, caption=caption, **kwargs))
            return str(message.message_id)
        if file.media_type in PHOTO_TYPES and file.size <= PHOTO_LIMIT:
            try:
                message = await call_api(self.bot.send_photo(photo=upload, caption=caption, **kwargs))
                return str(message.message_id)
            except TelegramCallError as exc:
                if exc.retry_after is not None or exc.transient:
                    raise  # waited out, or the photo may have landed: never a document beside it
                # e.g. PHOTO_INVALID_DIMENSIONS (a long, thin chart): refused, nothing was posted
                upload = InputFile(file.data, filename=file.name, attach=False)
        message = await call_api(self.bot.send_document(document=upload, caption=caption, **kwargs))
        return str(message.message_id)

    def _target_kwargs(self, target: ReplyTarget) -> dict[str, Any]:
        from telegram import ReplyParameters

        kwargs: dict[str, Any] = {"chat_id": int(target.chat_id)}
        if target.thread_id:
            kwargs["message_thread_id"] = int(target.thread_id)
        mode = self.options.reply_to
        if target.reply_to_id and (mode == "always" or (mode == "groups" and is_group_chat(target.chat_id))):
            with contextlib.suppress(ValueError):  # the message id part of "<message id>:<update id>"
                kwargs["reply_parameters"] = ReplyParameters(
                    message_id=int(str(target.reply_to_id).split(":", 1)[0]), allow_sending_without_reply=True)
        return kwargs

    def _entities(self, extras: Mapping[str, Any], rendered: bool) -> Any:
        from telegram import MessageEntity

        if not rendered or not extras.get("entities"):
            return None
        return MessageEntity.de_list([dict(e) for e in extras["entities"]], self.bot) or None
