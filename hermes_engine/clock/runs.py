"""A due run, taken once: under the job's lease, checked against the slot it was found at, then run as what
it is. A reminder (here) is delivered through the outbound path with an idempotency key per slot, recorded by
compare-and-set, then written into the chat's conversation; a task runs its agent first (`tasks.py`).

A run whose owner may no longer write in its chat, or whose named chat no longer has the bot (`admission.py`), is
refused: recorded, the job paused, nothing sent. A platform that cannot say so now fails the run like a failed
delivery, retried with back-off.

A crash after a reminder's send and before its record leaves the slot due; the next holder (this process
after a restart, or another replica) sends it again under the same key, and the delivery ledger shows it was
sent. What is written into the conversation follows the record, so it is written at most once; a crash in
the moment between the two leaves the chat without it (the person still got the message).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from hermes_engine.clock.admission import refusal
from hermes_engine.clock.outcomes import failed, following, late_note, record, run_key, write_into_chat
from hermes_engine.clock.tasks import run_task
from hermes_engine.ports.host import Host
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.jobs import JobRecord
from hermes_engine.ports.leases import job_lease

log = logging.getLogger(__name__)

LATE_AFTER = timedelta(seconds=60)  # a run this late was missed (the gateway was down): said so, or skipped


def reminder_text(job: JobRecord, due: datetime, now: datetime) -> str:
    text = f"⏰ Reminder: {job.text}"
    if now - due > LATE_AFTER:
        text += late_note(job, due)
    return text


async def run_due(host: Host, job: JobRecord, clock: Callable[[], datetime]) -> bool:
    """Run the slot `job.next_due` unless another run took it; True when this call recorded it."""
    async with host.leases.held(job_lease(job.id)) as ours:
        if not ours:
            return False
        fresh = await host.store.get_job(job.id)
        if fresh is None or fresh.state != "active" or fresh.next_due is None or fresh.next_due != job.next_due:
            return False  # recorded, paused or removed since it was found due
        now = clock()
        try:
            refused = await refusal(host, fresh)
        except Exception as exc:  # the platform could not say where the bot is: a delivery failure, backed off
            log.warning("job %s: could not ask whether its chat takes it: %s", job.id, exc)
            return await failed(host, fresh, fresh.next_due, now, label="undelivered",
                                outcome=f"not delivered: could not ask the platform ({str(exc) or type(exc).__name__})")
        if refused is not None:
            return await _refuse(host, fresh, fresh.next_due, now, refused)
        if now - fresh.next_due > LATE_AFTER and fresh.catch_up == "skip":
            return await record(host, fresh, fresh.next_due, now, outcome="skipped: missed while down",
                                label="skipped", next_due=following(fresh, fresh.next_due, now))
        if fresh.kind == "task":
            return await run_task(host, fresh, fresh.next_due, clock, late=now - fresh.next_due > LATE_AFTER)
        return await _remind(host, fresh, fresh.next_due, now)


async def _refuse(host: Host, job: JobRecord, due: datetime, now: datetime, why: str) -> bool:
    """The owner may not write in the job's chat any more: nothing is delivered there (not even a notice), the
    run is recorded as refused and the job paused at that slot; `/jobs resume` once they are let in again."""
    log.info("job %s: refused, %s; paused", job.id, why)
    if not await record(host, job, due, now, outcome=f"refused: {why}", label="refused", next_due=due, failed=True):
        return False
    await host.store.set_job_state(job.id, "paused")
    return True


async def _remind(host: Host, job: JobRecord, due: datetime, now: datetime) -> bool:
    text = reminder_text(job, due, now)
    target = ReplyTarget.from_dict(job.target)
    try:
        if not await host.notify(target, text, idempotency_key=run_key(job, due)):
            log.debug("job %s: %s is not attached yet; the slot stays due", job.id, target.platform)
            return False  # an adapter still starting: the next tick tries again, nothing is counted
    except Exception as exc:  # a platform error: tracked apart from the schedule, retried with back-off
        log.warning("job %s: delivery failed: %s", job.id, exc)
        return await failed(host, job, due, now, outcome=f"not delivered: {str(exc) or type(exc).__name__}",
                            label="undelivered")
    if not await record(host, job, due, now, outcome="delivered", label="delivered",
                        next_due=following(job, due, now)):
        return False
    await write_into_chat(host, job, due, text)
    return True
