"""Approval requests as a Telegram message with inline buttons (approve once, for this session, deny).

A press arrives as a callback query; its data names the request and the choice, and the engine decides
whether the person who pressed may answer (a stranger's press is acknowledged and changes nothing). When
the request ends, the message is edited to say how, and its buttons go away. A press on a question another
replica showed (the webhook reached this one) is taken by the engine all the same; that replica edits it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from adapters.outbound import PacedCall
from adapters.telegram.botapi import TelegramCallError, call_api
from hermes_engine.ports.approval import ApprovalAnswers, ApprovalRequest, Decision, Pressed

log = logging.getLogger(__package__)
PREFIX = "approve:"
_BUTTONS = (("Approve once", Decision.ONCE), ("For this session", Decision.SESSION), ("Deny", Decision.DENY))
_REPLIES = {Pressed.TAKEN: "Done.", Pressed.NOT_AN_APPROVER: "Only an approver can answer this.",
            Pressed.ENDED: "This request has ended."}


@dataclass
class _Shown:
    chat_id: int
    message_id: int


class TelegramApprovals:
    """The `ApprovalAsker` of one Telegram bot."""

    def __init__(self, bot: Any, paced: PacedCall) -> None:
        self.bot = bot
        self._paced = paced  # the question and its ending wait out a 429 in the chat's lane
        self._shown: dict[str, _Shown] = {}
        self._answers: ApprovalAnswers | None = None

    def take_presses(self, answers: ApprovalAnswers) -> None:
        self._answers = answers

    async def ask(self, request: ApprovalRequest, answers: ApprovalAnswers) -> None:
        from telegram import InlineKeyboardButton, InlineKeyboardMarkup

        keyboard = InlineKeyboardMarkup([[InlineKeyboardButton(label, callback_data=f"{PREFIX}{request.id}:{choice}")
                                          for label, choice in _BUTTONS]])
        kwargs: dict[str, Any] = {"chat_id": int(request.target.chat_id), "reply_markup": keyboard}
        if request.target.thread_id:
            kwargs["message_thread_id"] = int(request.target.thread_id)
        try:
            message = await self._paced(request.target,
                                        lambda: call_api(self.bot.send_message(text=_question(request), **kwargs)))
        except TelegramCallError as exc:
            answers.deny(request.id, f"the question could not be shown in Telegram ({exc})")
            return
        self._shown[request.id] = _Shown(int(request.target.chat_id), int(message.message_id))

    async def settled(self, request: ApprovalRequest, decision: Decision, note: str) -> None:
        shown = self._shown.pop(request.id, None)
        if shown is None:
            return
        try:
            await self._paced(request.target, lambda: call_api(self.bot.edit_message_text(
                text=f"{_question(request)}\n\n→ {note}", chat_id=shown.chat_id, message_id=shown.message_id,
                reply_markup=None)))
        except TelegramCallError as exc:
            log.warning("could not update the approval message in chat %s: %s", shown.chat_id, exc)

    async def on_press(self, query: Any) -> None:
        """A callback query: hand the choice to the engine, then acknowledge the press. The acknowledgement
        is the query's own answer, due within seconds and no message in the chat, so it does not queue
        behind the chat's paced calls."""
        data = str(query.data or "")
        request_id, _, choice = data.removeprefix(PREFIX).partition(":")
        pressed = Pressed.ENDED
        if self._answers is not None and data.startswith(PREFIX) and choice in set(Decision):
            pressed = await self._answers.press(request_id, str(query.from_user.id), Decision(choice))
        reply = _REPLIES[pressed]
        try:
            await call_api(query.answer(text=reply))
        except TelegramCallError as exc:
            log.warning("could not answer a Telegram button press: %s", exc)


def _question(request: ApprovalRequest) -> str:
    return f"{request.question} ({request.risk}: {request.reason})\n\n{request.command[:3000]}"
