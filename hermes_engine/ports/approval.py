"""Asking a person to approve what the agent is about to do (a dangerous terminal command, a call of an MCP
tool that acts on the world).

The engine keeps the pending request and decides who may answer; an `ApprovalAsker` only shows the
question where approvers can see it (a console prompt, chat buttons) and reports each answer back through
`ApprovalAnswers.answer`, with the id of whoever gave it. A press by someone not allowed changes nothing.

With several replicas the platform may bring a press to a replica other than the one that asked: an asker
that can take such presses (`AcceptsRemotePresses`) hands them to `RemoteAnswers`, which answers through
the database the waiting replica reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol, runtime_checkable

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


class Pressed(StrEnum):
    """What became of a press on a question another replica showed (the presser is told as they are today)."""

    TAKEN = "taken"
    NOT_AN_APPROVER = "not an approver"
    ENDED = "ended"  # unknown, answered already, expired or ended by the replica that asked


class ApprovalAnswers(Protocol):
    """The engine side: where an asker reports answers."""

    def answer(self, request_id: str, user_id: str, decision: Decision) -> bool:
        """True when the answer was taken (a pending request, an allowed person)."""
        ...

    def press(self, request_id: str, user_id: str, decision: Decision) -> Pressed:
        """`answer`, saying why a press was not taken (so the presser can be told)."""
        ...

    def deny(self, request_id: str, note: str) -> None:
        """The request cannot be shown (`note` says why): it ends denied."""
        ...


class ApprovalAsker(Protocol):
    """The adapter side: shows a request to the people who may approve it."""

    async def ask(self, request: ApprovalRequest, answers: ApprovalAnswers) -> None:
        """Show the question and return; answers arrive later through `answers`."""
        ...

    async def settled(self, request: ApprovalRequest, decision: Decision, note: str) -> None:
        """The request ended (answered, expired, superseded, its turn cancelled): update or remove the
        question."""
        ...


class RemoteAnswers(Protocol):
    """The engine side for presses on questions this replica did not show."""

    async def answer_remote(self, request_id: str, user_id: str, decision: Decision) -> Pressed:
        """Record the answer for the replica whose turn waits; the first answer wins."""
        ...


@runtime_checkable
class AcceptsRemotePresses(Protocol):
    """An asker that can take presses on questions it did not show (optional: one that cannot only takes its
    own, as with a single replica)."""

    def answer_remote_with(self, answers: RemoteAnswers) -> None:
        """Presses on request ids this asker does not know go to `answers` from now on."""
        ...
