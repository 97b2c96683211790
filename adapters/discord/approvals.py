"""Approval requests as a Discord message with buttons (approve once, for this session, deny).

A press arrives as a component interaction; its custom_id names the request and the choice, and the engine
decides whether the person who pressed may answer. Every press is answered within Discord's 3 seconds with
a reply only the presser sees, so a stranger learns the press changed nothing and the channel stays quiet.
When the request ends, the message is edited to say how, and its buttons go away. A press on a question
another replica showed is taken by the engine all the same, and that replica edits the question.

Presses are taken by the client's interaction listener rather than by a stored `discord.ui.View`: the
listener also answers presses on questions shown before a restart (their request has ended), which a view
kept in memory could not. The view only lays the buttons out, so it is stopped before it is sent and
discord.py does not keep it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import discord

from adapters.discord.outbound import Bounded, call
from adapters.outbound import PacedCall
from hermes_engine.errors import PlatformError
from hermes_engine.ports.approval import ApprovalAnswers, ApprovalRequest, Decision, Pressed

log = logging.getLogger(__name__)
PREFIX = "approve:"
_BUTTONS = ((("Approve once", discord.ButtonStyle.success), Decision.ONCE),
            (("For this session", discord.ButtonStyle.primary), Decision.SESSION),
            (("Deny", discord.ButtonStyle.danger), Decision.DENY))
_REPLIES = {Pressed.TAKEN: "Done.", Pressed.NOT_AN_APPROVER: "Only an approver can answer this.",
            Pressed.ENDED: "This request has ended."}
MAX_COMMAND_SHOWN = 1500  # the question stays under Discord's 2,000 characters with its note


@dataclass
class _Shown:
    channel_id: int
    message_id: int


class DiscordApprovals:
    """The `ApprovalAsker` of one Discord bot."""

    def __init__(self, client: Callable[[], discord.Client | None], paced: PacedCall) -> None:
        self._client = client
        self._paced = paced  # the question and its ending wait out a 429 in the channel's lane
        self._shown: Bounded[str, _Shown] = Bounded(1_000)
        self._answers: ApprovalAnswers | None = None

    def take_presses(self, answers: ApprovalAnswers) -> None:
        self._answers = answers

    def _channel(self, channel_id: int) -> discord.PartialMessageable:
        client = self._client()
        assert client is not None, "the Discord client is not started"
        return client.get_partial_messageable(channel_id)

    async def ask(self, request: ApprovalRequest, answers: ApprovalAnswers) -> None:
        channel_id = int(request.target.thread_id or request.target.chat_id)
        try:
            message = await self._paced(request.target, lambda: call(
                self._channel(channel_id).send(_question(request), view=buttons(request.id))))
        except PlatformError as exc:
            answers.deny(request.id, f"the question could not be shown in Discord ({exc})")
            return
        self._shown[request.id] = _Shown(channel_id, message.id)

    async def settled(self, request: ApprovalRequest, decision: Decision, note: str) -> None:
        shown = self._shown.pop(request.id, None)
        if shown is None:
            return
        message = self._channel(shown.channel_id).get_partial_message(shown.message_id)
        try:
            await self._paced(request.target, lambda: call(message.edit(content=f"{_question(request)}\n\n→ {note}",
                                                                         view=None)))
        except PlatformError as exc:
            log.warning("could not update the approval message in channel %s: %s", shown.channel_id, exc)

    @staticmethod
    def owns(interaction: discord.Interaction) -> bool:
        """A press on one of the approval buttons (any other component is someone else's)."""
        return interaction.type is discord.InteractionType.component and _custom_id(interaction).startswith(PREFIX)

    async def on_press(self, interaction: discord.Interaction) -> None:
        """Hand the choice to the engine, then answer the presser alone. That answer is the interaction's
        own response, due within 3 s and no message in the channel, so it does not queue in its lane."""
        request_id, _, choice = _custom_id(interaction).removeprefix(PREFIX).partition(":")
        pressed = Pressed.ENDED
        if self._answers is not None and choice in set(Decision):
            pressed = await self._answers.press(request_id, str(interaction.user.id), Decision(choice))
        reply = _REPLIES[pressed]
        try:
            await call(interaction.response.send_message(reply, ephemeral=True))
        except PlatformError as exc:
            log.warning("could not answer a Discord button press: %s", exc)


def buttons(request_id: str) -> discord.ui.View:
    """The three buttons; their custom_ids are `approve:<request id>:<decision>`, stable across restarts."""
    view = discord.ui.View(timeout=None)
    for (label, style), choice in _BUTTONS:
        view.add_item(discord.ui.Button(label=label, style=style, custom_id=f"{PREFIX}{request_id}:{choice}"))
    view.stop()  # layout only: presses go to the interaction listener (see the module docstring)
    return view


def _custom_id(interaction: discord.Interaction) -> str:
    data: Mapping[str, Any] = interaction.data or {}
    return str(data.get("custom_id", ""))


def _question(request: ApprovalRequest) -> str:
    return f"{request.question} ({request.risk}: {request.reason})\n\n{request.command[:MAX_COMMAND_SHOWN]}"
