"""How a run of a job ends, for reminders and tasks alike: the slot after it, the record (compare-and-set on
the slot, reported to the metrics), and a failure's back-off, ending in a pause the owner is told about once.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from hermes_engine.clock.schedule import ScheduleError, local_time, parse_schedule, zone_named
from hermes_engine.ports.conversation import Message
from hermes_engine.ports.host import Host
from hermes_engine.ports.inbound import ChatKind, InboundMessage, ReplyTarget
from hermes_engine.ports.jobs import JobRecord

log = logging.getLogger(__name__)

MAX_FAILURES = 3  # failed runs in a row before a job is paused
RETRY_AFTER = timedelta(seconds=30)  # the first retry of a failed run; doubled each time


def run_key(job: JobRecord, due: datetime) -> str:
    """The idempotency key of one slot's delivery."""
    return f"job:{job.id}:{due.isoformat()}"


def following(job: JobRecord, due: datetime, now: datetime) -> datetime | None:
    """The slot after this one, from now (slots missed while down are not replayed); None when it is done:
    it fires once, or this was the last of the runs its `repeat` allowed."""
    if job.once or (job.runs_left is not None and job.runs_left <= 1):
        return None
    zone = zone_named(job.timezone)
    try:
        schedule = parse_schedule(job.schedule, zone, now, min_interval=timedelta(0))
    except ScheduleError:
        return None
    return schedule.after(max(due, now), zone)


async def record(host: Host, job: JobRecord, due: datetime, now: datetime, *, outcome: str, label: str,
                 next_due: datetime | None, failed: bool = False, tokens: int = 0,
                 undelivered: tuple[str, datetime] | None = None) -> bool:
    """Record the run of slot `due` (False: another run recorded it first); `label` is the metrics' outcome;
    `undelivered`: a task's answer (and its slot) kept for its delivery to be retried."""
    recorded = await host.store.finish_run(job.id, due, next_due=next_due, outcome=outcome, failed=failed,
                                           tokens=tokens, undelivered=undelivered)
    if recorded:
        host.metrics.job_run(host.bot, job.kind, label, (now - due).total_seconds())
    return recorded


async def failed(host: Host, job: JobRecord, due: datetime, now: datetime, *, outcome: str, label: str,
                 tokens: int = 0, undelivered: tuple[str, datetime] | None = None) -> bool:
    """A failed run, retried with back-off; the third in a row pauses the job and tells its owner once."""
    failures = job.failures + 1
    retry = now + RETRY_AFTER * (2 ** (failures - 1))
    recorded = await record(host, job, due, now, outcome=outcome, label=label, next_due=retry, failed=True,
                            tokens=tokens, undelivered=undelivered)
    if recorded and failures >= MAX_FAILURES:
        await host.store.set_job_state(job.id, "paused")
        log.warning("job %s paused after %d failed runs in a row", job.id, failures)
        await tell(host, job, f"⏸ I paused #{job.id} {job.name!r} after {failures} failed runs in a row (the last: "
                              f"{outcome}). Say `/jobs resume {job.id}` to start it again.",
                   key=f"job:{job.id}:paused:{job.runs + 1}")
    return recorded


async def tell(host: Host, job: JobRecord, text: str, *, key: str) -> bool:
    """Best effort: a notice about the job in its chat, once per `key`; False when it could not be sent (the
    platform that fails the job's runs may fail this too: the job's state and `/jobs` still say it)."""
    try:
        return await host.notify(ReplyTarget.from_dict(job.target), text, idempotency_key=key)
    except Exception as exc:
        log.warning("job %s: could not tell its chat (%s): %s", job.id, key, exc)
        return False


def late_note(job: JobRecord, due: datetime) -> str:
    return f"\n\n_(late: this was due {local_time(due, zone_named(job.timezone))})_"


async def write_into_chat(host: Host, job: JobRecord, due: datetime, text: str) -> None:
    """What was delivered joins the chat's conversation, so a reply to it has it in context; and, where the
    platform puts replies to it in a conversation of their own (a Slack channel post's thread), that one too."""
    replies = await host.replies_to(ReplyTarget.from_dict(job.target), run_key(job, due))
    for key in dict.fromkeys([job.session_key, *(thread_key(reply) for reply in replies)]):
        session = await host.store.active_session(key, job.bot)
        await host.store.append_message(session.id, Message(role="assistant", content=text,
                                                            meta={"job_id": job.id, "due": due.isoformat()}))


def thread_key(reply: ReplyTarget) -> str:
    """The session of that reply thread (a thread's is one for everyone in it)."""
    return InboundMessage(platform=reply.platform, account=reply.account, chat_kind=ChatKind.THREAD,
                          chat_id=reply.chat_id, thread_id=reply.thread_id, user_id="", text="", message_id="",
                          synthetic=True).session_key()
