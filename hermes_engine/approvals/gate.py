"""The engine side of approvals: pending requests, who may answer, expiry and supersession.

A turn that needs approval waits on its own future (other sessions go on). It ends denied when the time
runs out, when a new message arrives in the same conversation (the person moved on; `/stop` too), or when
the turn is cancelled (`/stop`, the gateway stopping). Every ending is settled with the asker, so the
question on screen says how it ended and loses its buttons, also when the turn was cancelled. The future
lives in this replica's memory, so after a restart none is pending, and the turn they belonged to is replayed
with its unfinished tool call marked interrupted, which counts as denied. Given a store (`share_through`),
each request is also recorded there, so a press that the platform brings to another replica is taken
there and reaches the waiting turn (`shared.py`); the question is then updated here, where it
was shown. A press on a request whose waiting turn is gone (its process died) is told it has ended, on
any replica and after a restart.
"Approve for this session" remembers the risk class for that session until it leaves memory or `/new`.
Who may answer: the approvers (by default the profile's admins) and, when the profile says so
(`person_approves`), the person whose turn asks.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hermes_engine.approvals.shared import ApprovalStores, SharedRequests, answered_note
from hermes_engine.ports.approval import ApprovalAnswers, ApprovalAsker, ApprovalRequest, Decision, Pressed
from hermes_engine.ports.inbound import ReplyTarget

log = logging.getLogger(__name__)


@dataclass
class _Pending:
    request: ApprovalRequest
    future: asyncio.Future[Decision]
    note: str = ""
    answered_by: str | None = None  # who pressed, when the press was taken on this replica


@dataclass
class ApprovalGate:
    asker: ApprovalAsker | None
    may_approve: Callable[[str], bool]
    timeout_seconds: float = 300.0
    person_approves: bool = False  # the person whose turn asks may answer too
    _pending: dict[str, _Pending] = field(default_factory=dict)
    _for_session: dict[str, set[str]] = field(default_factory=dict)
    _ending: set[asyncio.Task[tuple[Decision, str]]] = field(default_factory=set)
    _shared: SharedRequests | None = None

    def __post_init__(self) -> None:
        if self.asker is not None:
            self.asker.take_presses(self)

    def share_through(self, store: ApprovalStores, bot: str) -> None:
        """Record requests in `store`, and take presses on requests other replicas of `bot` asked."""
        self._shared = SharedRequests(store, bot)

    async def decide(self, *, bot: str, session_key: str, target: ReplyTarget, command: str, risk: str,
                     reason: str, question: str = "Run this command?", asked_by: str = "") -> tuple[Decision, str]:
        """Wait for an answer; (decision, a sentence saying why for a denial)."""
        if risk in self._for_session.get(session_key, set()):
            return Decision.SESSION, ""
        if self.asker is None:
            return Decision.DENY, "no way to ask for approval is configured"
        expires = datetime.now(UTC) + timedelta(seconds=self.timeout_seconds)
        request = ApprovalRequest(secrets.token_hex(6), bot, session_key, target, command, risk, reason, expires,
                                  question, asked_by)
        pending = _Pending(request, asyncio.get_running_loop().create_future())
        self._pending[request.id] = pending
        shared = self._shared if self._shared is not None and await self._shared.open(request) else None
        watching: asyncio.Task[None] | None = None
        try:
            await self.asker.ask(request, self)
            if shared is not None:
                watching = asyncio.get_running_loop().create_task(
                    shared.watch(request.id, lambda answer, note: self._resolve(pending, answer, note)))
            async with asyncio.timeout(self.timeout_seconds):
                decision = await asyncio.shield(pending.future)
        except TimeoutError:
            decision, pending.note = Decision.DENY, "nobody approved it in time"
        except asyncio.CancelledError:
            self._pending.pop(request.id, None)
            await self._end(request, shared, Decision.DENY, pending.note or "the turn stopped before anyone answered",
                            None, cancelled=True)
            raise
        finally:
            self._pending.pop(request.id, None)
            if watching is not None:
                watching.cancel()
        note = pending.note or ("denied" if decision is Decision.DENY else "approved")
        decision, note = await self._end(request, shared, decision, note, pending.answered_by)
        if decision is Decision.SESSION:
            self._for_session.setdefault(session_key, set()).add(risk)
        return decision, note

    async def _end(self, request: ApprovalRequest, shared: SharedRequests | None, decision: Decision, note: str,
                   answered_by: str | None, *, cancelled: bool = False) -> tuple[Decision, str]:
        """Record how the request ended (an answer recorded first elsewhere wins, unless the turn was
        cancelled) and tell the asker, as one task of its own: a turn cancelled meanwhile (`/stop` right
        after the answer) leaves neither the record pending nor the question showing live buttons."""

        async def end() -> tuple[Decision, str]:
            ended = decision, note
            if shared is not None:
                recorded = await shared.close(request.id, decision, note, answered_by)
                ended = ended if cancelled else recorded
            await self._settle(request, *ended)
            return ended

        task = asyncio.get_running_loop().create_task(end())
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)
        return await asyncio.shield(task)

    @staticmethod
    def _resolve(pending: _Pending, decision: Decision, note: str) -> None:
        if not pending.future.done():
            pending.note = note
            pending.future.set_result(decision)

    async def _settle(self, request: ApprovalRequest, decision: Decision, note: str) -> None:
        """Tell the asker how the request ended."""
        assert self.asker is not None
        try:
            await self.asker.settled(request, decision, note)
        except Exception:  # noqa: BLE001 - the question stays as shown; the decision stands
            log.warning("could not update approval request %s", request.id, exc_info=True)

    def answer(self, request_id: str, user_id: str, decision: Decision) -> bool:
        return self._press_here(request_id, user_id, decision) is Pressed.TAKEN

    async def press(self, request_id: str, user_id: str, decision: Decision) -> Pressed:
        """Taken here if the request is this replica's, else through the database for the replica that
        asked (a question another replica showed, when the platform brought the press here)."""
        if request_id in self._pending or self._shared is None:
            return self._press_here(request_id, user_id, decision)
        return await self._shared.take(request_id, user_id, decision, self._may_answer)

    def _press_here(self, request_id: str, user_id: str, decision: Decision) -> Pressed:
        pending = self._pending.get(request_id)
        if pending is None or pending.future.done():
            return Pressed.ENDED
        if not self._may_answer(user_id, pending.request.asked_by):
            log.info("approval %s: %s may not answer it; ignored", request_id, user_id)
            return Pressed.NOT_AN_APPROVER
        pending.note, pending.answered_by = answered_note(decision, user_id), user_id
        pending.future.set_result(decision)
        return Pressed.TAKEN

    def _may_answer(self, user_id: str, asked_by: str) -> bool:
        return self.may_approve(user_id) or (self.person_approves and bool(asked_by) and user_id == asked_by)

    def deny(self, request_id: str, note: str) -> None:
        """End a request denied on the engine's own account (nobody can be asked)."""
        pending = self._pending.get(request_id)
        if pending is not None and not pending.future.done():
            pending.note = note
            pending.future.set_result(Decision.DENY)

    def supersede(self, session_key: str, note: str = "a new message arrived before it was approved") -> None:
        """A new message in the conversation (or `/stop`): its pending requests are denied."""
        for pending in list(self._pending.values()):
            if pending.request.session_key == session_key and not pending.future.done():
                pending.note = note
                pending.future.set_result(Decision.DENY)

    def forget(self, session_key: str) -> None:
        self._for_session.pop(session_key, None)

    def pending(self) -> list[ApprovalRequest]:
        return [p.request for p in self._pending.values()]


class ApprovalRouter:
    """One asker per platform: a request is shown on the platform of the conversation it came from (the
    gateway's adapters register theirs once they are built). A platform without one denies. The gate's
    `ApprovalAnswers` reaches every asker, also one added after the gate was made."""

    def __init__(self) -> None:
        self._askers: dict[str, ApprovalAsker] = {}
        self._answers: ApprovalAnswers | None = None

    def add(self, platform: str, asker: ApprovalAsker) -> None:
        self._askers[platform] = asker
        if self._answers is not None:
            asker.take_presses(self._answers)

    def take_presses(self, answers: ApprovalAnswers) -> None:
        self._answers = answers
        for asker in self._askers.values():
            asker.take_presses(answers)

    async def ask(self, request: ApprovalRequest, answers: ApprovalAnswers) -> None:
        asker = self._askers.get(request.target.platform)
        if asker is None:
            answers.deny(request.id, f"{request.target.platform} cannot show approval requests")
            return
        await asker.ask(request, answers)

    async def settled(self, request: ApprovalRequest, decision: Decision, note: str) -> None:
        asker = self._askers.get(request.target.platform)
        if asker is not None:
            await asker.settled(request, decision, note)
