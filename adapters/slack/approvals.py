"""Approval requests as a Slack message with Block Kit buttons (approve once, for this session, deny).

A press arrives as a `block_actions` interactivity request, which Bolt verifies like any event (a forged
signature is refused before anything here runs). The button's value names the request and its action id
the choice; the engine decides whether the person who pressed may answer. A press that is not taken (a
stranger's, or one on a request that has ended) is answered with an ephemeral message only that person
sees, and changes nothing. When the request ends, the message is updated to say how and loses its buttons.
A press on a question another replica showed (Slack posts to any replica) is taken by the engine all the
same, and that replica updates the question.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt.async_app import AsyncApp

from adapters.outbound import PacedCall
from adapters.slack.outbound import escape
from adapters.slack.web_api import SlackCallError, SlackWebApi
from hermes_engine.ports.approval import ApprovalAnswers, ApprovalRequest, Decision, Pressed
from hermes_engine.ports.inbound import ReplyTarget

log = logging.getLogger(__name__)
PREFIX = "hermes_approval:"
ACTION_ID = re.compile(rf"^{PREFIX}")
_BUTTONS = (("Approve once", Decision.ONCE, "primary"), ("Approve for this session", Decision.SESSION, None),
            ("Deny", Decision.DENY, "danger"))
NOT_AN_APPROVER = "Only an approver can answer this."
ENDED = "This request has ended."
_DECIDER = re.compile(r"\bby ([UW][A-Z0-9]+)$")

Ack = Callable[..., Awaitable[Any]]


class SlackApprovals:
    """The `ApprovalAsker` of one Slack bot; `listen` wires its button presses into the Bolt app."""

    def __init__(self, api: SlackWebApi, paced: PacedCall) -> None:
        self.api = api
        self._paced = paced  # the question, its ending and private answers wait out a 429 in the channel's lane
        self._shown: dict[str, _Shown] = {}
        self._answers: ApprovalAnswers | None = None

    def take_presses(self, answers: ApprovalAnswers) -> None:
        self._answers = answers

    def listen(self, app: AsyncApp) -> None:
        # Bolt injects listener arguments by parameter name, so it gets a plain function.
        async def on_action(ack: Ack, body: dict[str, Any]) -> None:
            await ack()
            await self.on_press(body)

        app.action(ACTION_ID)(on_action)

    async def ask(self, request: ApprovalRequest, answers: ApprovalAnswers) -> None:
        buttons = [_button(label, request.id, choice, style) for label, choice, style in _BUTTONS]
        blocks = [_section(request), {"type": "actions", "block_id": f"approval-{request.id}", "elements": buttons}]
        try:
            data = await self._paced(request.target, lambda: self.api.call(
                "chat.postMessage", channel=request.target.chat_id, text=escape(_question(request)), blocks=blocks,
                thread_ts=request.target.thread_id, unfurl_links=False))
        except SlackCallError as exc:
            answers.deny(request.id, f"the question could not be shown in Slack ({exc.error or exc})")
            return
        channel = str(data.get("channel") or request.target.chat_id)
        self._shown[request.id] = _Shown(channel, str(data.get("ts", "")))

    async def settled(self, request: ApprovalRequest, decision: Decision, note: str) -> None:
        shown = self._shown.pop(request.id, None)
        if shown is None:
            return
        ending = {"type": "context", "elements": [{"type": "mrkdwn", "text": f"→ {_mention_decider(note)}"}]}
        try:
            await self._paced(request.target, lambda: self.api.call(
                "chat.update", channel=shown.channel, ts=shown.ts, text=escape(f"{_question(request)}\n\n→ {note}"),
                blocks=[_section(request), ending]))
        except SlackCallError as exc:
            log.warning("could not update the approval message in %s: %s", shown.channel, exc)

    async def on_press(self, body: dict[str, Any]) -> None:
        """A `block_actions` payload: hand the choice to the engine; a press not taken is answered privately."""
        action: dict[str, Any] = next(iter(body.get("actions") or []), {})
        choice = str(action.get("action_id", "")).removeprefix(PREFIX)
        request_id = str(action.get("value", ""))
        user = str((body.get("user") or {}).get("id", ""))
        pressed = Pressed.ENDED
        if self._answers is not None and choice in set(Decision) and user:
            pressed = await self._answers.press(request_id, user, Decision(choice))
        if pressed is Pressed.TAKEN:
            return  # the engine settles the request, and `settled` updates the message for everyone
        shown = self._shown.get(request_id)
        channel = str((body.get("channel") or {}).get("id", "")) or (shown.channel if shown else "")
        thread_ts = (body.get("message") or {}).get("thread_ts")
        team = str((body.get("team") or {}).get("id", "") or (body.get("user") or {}).get("team_id", ""))
        text = NOT_AN_APPROVER if pressed is Pressed.NOT_AN_APPROVER else ENDED
        try:
            await self._paced(ReplyTarget("slack", team, channel), lambda: self.api.call(
                "chat.postEphemeral", channel=channel, user=user, text=text, thread_ts=thread_ts))
        except SlackCallError as exc:
            log.warning("could not answer a Slack button press privately: %s", exc)


@dataclass
class _Shown:
    """A question on screen: where it is."""

    channel: str
    ts: str


def _button(label: str, request_id: str, choice: Decision, style: str | None) -> dict[str, Any]:
    button: dict[str, Any] = {"type": "button", "text": {"type": "plain_text", "text": label},
                              "action_id": f"{PREFIX}{choice}", "value": request_id}
    if style:
        button["style"] = style
    return button


def _section(request: ApprovalRequest) -> dict[str, Any]:
    """Block Kit text holds 3,000 characters; the command is cut to fit beside the question."""
    question = f"{request.question} ({escape(request.risk)}: {escape(request.reason)})"
    text = f"{question}\n```{escape(request.command[:2500])}```"
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}


def _mention_decider(note: str) -> str:
    """A note ending "by U123" names the person as Slack shows them: a mention renders as their name."""
    return _DECIDER.sub(r"by <@\1>", escape(note))


def _question(request: ApprovalRequest) -> str:
    """The notification text (and what clients without blocks show)."""
    return f"{request.question} ({request.risk}: {request.reason})\n\n{request.command[:3000]}"
