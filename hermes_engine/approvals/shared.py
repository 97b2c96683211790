"""Approval requests kept in the database (`ApprovalStore`), so a press that reaches any replica of a bot
is taken: the platform picks the replica (a Telegram webhook, a Slack request, the elected Discord
connection), not the one whose turn waits.

The asking replica records the request before it is shown, reads its record every `POLL_SECONDS` while it
waits (a press taken elsewhere resolves its future), and records how the request ended; a replica that
receives a press for a request it did not ask records the answer if it is the first. Everything here is
best effort around the in-memory gate: while the database cannot be reached, presses on the asking replica
still decide.

While it waits, the asking turn holds the lease `approval:<id>` (renewed every third of `LEASE_SECONDS`), so
a press elsewhere can tell whether anyone still waits for the answer: a lease it can take belonged to a
process that died (`kill -9`, a crash; on the same host this is known at once, from another host once the
lease runs out) or was given back, and the press is told the request has ended, as it would be after an
answer or an expiry. The record is then ended, so nobody is told "done" for a command that never runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from hermes_engine.holders import new_holder
from hermes_engine.ports.approval import ApprovalRequest, Decision, Pressed
from hermes_engine.ports.storage import ApprovalRecord, ApprovalStore, LeaseStore
from hermes_engine.secrets import redact

log = logging.getLogger(__name__)
POLL_SECONDS = 0.25  # how late a press taken on another replica is seen; one small read per poll
LEASE_SECONDS = 15.0  # how long after its process died on another host a request still looks waited for


class ApprovalStores(ApprovalStore, LeaseStore, Protocol):
    """The requests, and the leases that say a turn still waits for one."""


def waiting_lease(request_id: str) -> str:
    return f"approval:{request_id}"


def answered_note(decision: Decision, user_id: str) -> str:
    """How an answer reads on the question and in the denial the model sees."""
    return f"{'denied' if decision is Decision.DENY else 'approved'} by {user_id}"


@dataclass
class SharedRequests:
    store: ApprovalStores
    bot: str
    poll_seconds: float = POLL_SECONDS
    lease_seconds: float = LEASE_SECONDS
    holder: str = field(default_factory=new_holder)  # this gate's turns, as the `approval:` leases name them

    async def open(self, request: ApprovalRequest) -> bool:
        """Record the request and take its waiting lease; False (presses elsewhere will be told it ended)
        when the store cannot."""
        try:
            await self.store.record_approval(request.id, self.bot, request.session_key, request.expires_at,
                                             request.asked_by or None, command=redact(request.command),
                                             risk=request.risk)
            await self.store.acquire_lease(waiting_lease(request.id), self.holder, self.lease_seconds)
        except Exception:  # noqa: BLE001 - the request is still answered on this replica
            log.warning("approval %s: not recorded in the database; only this replica can take it", request.id,
                        exc_info=True)
            return False
        return True

    async def watch(self, request_id: str, decided: Callable[[Decision, str], None]) -> None:
        """Poll the record until it is decided elsewhere (then `decided` is called) or ends, keeping the
        waiting lease; the caller cancels this once the request ends here."""
        loop = asyncio.get_running_loop()
        renewed = loop.time()
        while True:
            await asyncio.sleep(self.poll_seconds)
            try:
                if loop.time() - renewed >= self.lease_seconds / 3:
                    await self.store.acquire_lease(waiting_lease(request_id), self.holder, self.lease_seconds)
                    renewed = loop.time()
                record = await self.store.get_approval(request_id)
            except Exception:  # noqa: BLE001 - a read that failed is tried again at the next poll
                log.debug("approval %s: could not read its record", request_id, exc_info=True)
                continue
            if record is None or record.state == "ended":
                return
            if record.state == "decided" and record.decision:
                decided(Decision(record.decision), _note(record))
                return

    async def close(self, request_id: str, decision: Decision, note: str,
                    answered_by: str | None) -> tuple[Decision, str]:
        """Record how the request ended here (`answered_by`: a press on this replica); an answer recorded
        first on another replica wins over it, as the first press wins on one replica. The waiting lease
        is given back once the record says how it ended."""
        try:
            if answered_by is not None and await self.store.answer_approval(request_id, self.bot, decision.value,
                                                                            answered_by):
                record = None
            else:
                record = await self.store.end_approval(request_id)
            await self.store.release_lease(waiting_lease(request_id), self.holder)
        except Exception:  # noqa: BLE001 - the decision taken here stands
            log.warning("approval %s: could not record how it ended", request_id, exc_info=True)
            return decision, note
        if record is not None and record.state == "decided" and record.decision:
            return Decision(record.decision), _note(record)
        return decision, note

    async def take(self, request_id: str, user_id: str, decision: Decision,
                   may_approve: Callable[[str, str], bool]) -> Pressed:
        """A press on a request another replica asked: checked as a press there would be, then recorded
        unless an answer, an expiry, the end of the request or the end of its waiting turn got there first."""
        try:
            record = await self.store.get_approval(request_id)
            if record is None or record.bot != self.bot or record.state != "pending" \
                    or record.expires_at <= datetime.now(UTC):
                return Pressed.ENDED
            if await self._nobody_waits(request_id):
                log.info("approval %s: the turn that asked is gone; the press is told it ended", request_id)
                return Pressed.ENDED
            if not may_approve(user_id, record.asked_by or ""):
                log.info("approval %s: %s may not answer it; ignored", request_id, user_id)
                return Pressed.NOT_AN_APPROVER
            taken = await self.store.answer_approval(request_id, self.bot, decision.value, user_id)
        except Exception:  # noqa: BLE001 - the presser is told it ended; the asking replica still decides
            log.warning("approval %s: could not take a press through the database", request_id, exc_info=True)
            return Pressed.ENDED
        return Pressed.TAKEN if taken else Pressed.ENDED

    async def _nobody_waits(self, request_id: str) -> bool:
        """Whether the waiting lease is free to take (its process died, or it was given back): then the
        request is ended for every replica."""
        lease = waiting_lease(request_id)
        if not await self.store.acquire_lease(lease, self.holder, self.lease_seconds):
            return False
        await self.store.end_approval(request_id)
        await self.store.release_lease(lease, self.holder)
        return True


def _note(record: ApprovalRecord) -> str:
    return answered_note(Decision(record.decision or Decision.DENY), record.decided_by or "someone")
