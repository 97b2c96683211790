"""A due run, taken once: under the job's lease, checked against the slot it was found at, delivered through
the outbound path with an idempotency key per slot, recorded by compare-and-set, then written into the chat's
conversation.

A crash after the send and before the record leaves the slot due; the next holder (this process after a
restart, or another replica) sends it again under the same key, and the delivery ledger shows it was sent.
What is written into the conversation follows the record, so it is written at most once; a crash in the
moment between the two leaves the chat without it (the person still got the message).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from hermes_engine.clock.schedule import ScheduleError, local_time, parse_schedule, zone_named
from hermes_engine.ports.conversation import Message
from hermes_engine.ports.host import Host
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.jobs import JobRecord
from hermes_engine.ports.leases import job_lease

log = logging.getLogger(__name__)

LATE_AFTER = timedelta(seconds=60)  # a run this late was missed (the gateway was down): said so, or skipped
MAX_FAILURES = 3  # failed deliveries in a row before a job is paused
RETRY_AFTER = timedelta(seconds=30)  # the first retry of a failed delivery; doubled each time


def run_key(job: JobRecord, due: datetime) -> str:
    """The idempotency key of one slot's delivery."""
    return f"job:{job.id}:{due.isoformat()}"


def reminder_text(job: JobRecord, due: datetime, now: datetime) -> str:
    text = f"⏰ Reminder: {job.text}"
    if now - due > LATE_AFTER:
        text += f"\n\n_(late: this was due {local_time(due, zone_named(job.timezone))})_"
    return text


async def run_due(host: Host, job: JobRecord, clock: Callable[[], datetime]) -> bool:
    """Run the slot `job.next_due` unless another run took it; True when this call recorded it."""
    async with host.leases.held(job_lease(job.id)) as ours:
        if not ours:
            return False
        fresh = await host.store.get_job(job.id)
        if fresh is None or fresh.state != "active" or fresh.next_due is None or fresh.next_due != job.next_due:
            return False  # recorded, paused or removed since it was found due
        return await _run(host, fresh, fresh.next_due, clock)


async def _run(host: Host, job: JobRecord, due: datetime, clock: Callable[[], datetime]) -> bool:
    now = clock()
    following = _following(job, due, now)
    if now - due > LATE_AFTER and job.catch_up == "skip":
        return await host.store.finish_run(job.id, due, next_due=following, outcome="skipped: missed while down")
    text = reminder_text(job, due, now)
    target = ReplyTarget.from_dict(job.target)
    try:
        if not await host.notify(target, text, idempotency_key=run_key(job, due)):
            log.debug("job %s: %s is not attached yet; the slot stays due", job.id, target.platform)
            return False  # an adapter still starting: the next tick tries again, nothing is counted
    except Exception as exc:  # a platform error: tracked apart from the schedule, retried with back-off
        log.warning("job %s: delivery failed: %s", job.id, exc)
        return await _failed(host, job, due, now, str(exc) or type(exc).__name__)
    if not await host.store.finish_run(job.id, due, next_due=following, outcome="delivered"):
        return False
    session = await host.store.active_session(job.session_key, job.bot)
    await host.store.append_message(session.id, Message(role="assistant", content=text,
                                                        meta={"job_id": job.id, "due": due.isoformat()}))
    return True


async def _failed(host: Host, job: JobRecord, due: datetime, now: datetime, problem: str) -> bool:
    failures = job.failures + 1
    retry = now + RETRY_AFTER * (2 ** (failures - 1))
    recorded = await host.store.finish_run(job.id, due, next_due=retry, outcome=f"not delivered: {problem}",
                                           failed=True)
    if recorded and failures >= MAX_FAILURES:
        await host.store.set_job_state(job.id, "paused")
        log.warning("job %s paused after %d failed deliveries", job.id, failures)
    return recorded


def _following(job: JobRecord, due: datetime, now: datetime) -> datetime | None:
    """The slot after this one, from now (slots missed while down are not replayed); None when it is done."""
    if job.once:
        return None
    zone = zone_named(job.timezone)
    try:
        schedule = parse_schedule(job.schedule, zone, now)
    except ScheduleError:
        return None
    return schedule.after(max(due, now), zone)
