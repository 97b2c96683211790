"""Asking a person to approve what the agent is about to do (a dangerous terminal command, a call of an MCP
tool that acts on the world).

The engine keeps the pending request and decides who may answer; an `ApprovalAsker` only shows the
question where approvers can see it (a console prompt, chat buttons) and reports each answer back through
`ApprovalAnswers`, with the id of whoever gave it. A press by someone not allowed changes nothing.

With several replicas the platform may bring a press to a replica other than the one that asked, so an
asker hands every press to `ApprovalAnswers.press` (given once through `take_presses`, not per question):
the engine takes it where the request waits, here or, through the database, on the replica that asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from hermes_engine.ports.inbound import ReplyTarget


class Decision(StrEnum):
    ONCE = "once"  # this command, this time
    SESSION = "session"  # this class of command, for the rest of the session
    DENY = "deny"


@dataclass(frozen=True)
class ApprovalRequest:
    id: str
    bot: str
    session_key: str
    target: ReplyTarget  # the conversation the command was asked in
    command: str
    risk: str  # the class that needs approval ("dangerous", "writes", ...)
    reason: str  # why, in a few words (a rule that matched)
    expires_at: datetime
    question: str = "Run this command?"  # the line above the buttons; an MCP tool call asks "Call this tool?"
    asked_by: str = ""  # the platform user id of the person whose turn asks (they may answer it if allowed)


class Pressed(StrEnum):
    """What became of a press (so the presser can be told)."""

    TAKEN = "taken"
    NOT_AN_APPROVER = "not an approver"
    ENDED = "ended"  # unknown, answered already, expired or ended by the replica that asked


class ApprovalAnswers(Protocol):
    """The engine side: where an asker reports answers."""

    def answer(self, request_id: str, user_id: str, decision: Decision) -> bool:
        """True when the answer was taken (a pending request, an allowed person)."""
        ...

    async def press(self, request_id: str, user_id: str, decision: Decision) -> Pressed:
        """A button press on any question, shown by this replica or another; the first answer wins."""
        ...

    def deny(self, request_id: str, note: str) -> None:
        """The request cannot be shown (`note` says why): it ends denied."""
        ...


class ApprovalAsker(Protocol):
    """The adapter side: shows a request to the people who may approve it."""

    def take_presses(self, answers: ApprovalAnswers) -> None:
        """Called once when the engine is wired: presses from now on go to `answers.press` (an asker that
        reads its answers only inside `ask`, such as the console, ignores it)."""
        ...

    async def ask(self, request: ApprovalRequest, answers: ApprovalAnswers) -> None:
        """Show the question and return; answers arrive later through `answers`."""
        ...

    async def settled(self, request: ApprovalRequest, decision: Decision, note: str) -> None:
        """The request ended (answered, expired, superseded, its turn cancelled): update or remove the
        question."""
        ...
