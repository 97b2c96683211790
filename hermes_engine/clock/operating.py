"""What an operator does to any job of the clock, the same from the command line (`hermes-gateway jobs`) and
the dashboard: pause, resume, remove and run now. Each answer is one sentence; `Refused` says why nothing
changed. A person's own jobs, from chat, are `actions.py`'s.

Each changes the job in the store and nothing else: a running gateway's ticker looks at the store at least
once a second, so it sees the change there, and a run it has already taken finishes as it began.
"""

from __future__ import annotations

from datetime import datetime

from hermes_engine.clock.schedule import ScheduleError, local_time, parse_schedule, zone_named
from hermes_engine.ports.jobs import JobRecord, JobState, ScheduledJobs

OPEN = ("active", "paused", "failed")  # a job that may be paused, resumed or run; "done" ones only shown


class Refused(Exception):
    """Nothing changed; the message is one sentence for the operator."""


def check_open(job: JobRecord, doing: str) -> None:
    if job.state not in OPEN:
        raise Refused(f"job #{job.id} is {job.state} (it ran its last time), so there is nothing to {doing}.")


def next_text(job: JobRecord) -> str:
    return local_time(job.next_due, zone_named(job.timezone)) if job.next_due else "never"


def next_due_on_resume(job: JobRecord, now: datetime) -> datetime:
    """When a resumed job is next due: a one-time job at its own time (now, if that has passed: it fires late,
    once); a recurring one at its schedule's first slot after now, in its zone (slots missed while paused are
    not replayed)."""
    if job.once:
        return job.next_due if job.next_due is not None and job.next_due > now else now
    zone = zone_named(job.timezone)
    return parse_schedule(job.schedule, zone, now).first(now, zone)


async def _set_state(store: ScheduledJobs, job: JobRecord, state: JobState,
                     next_due: datetime | None = None) -> JobRecord:
    changed = await store.get_job(job.id) if await store.set_job_state(job.id, state, next_due=next_due) else None
    if changed is None:
        raise Refused(f"no job {job.id}: it was removed meanwhile.")
    return changed


async def pause(store: ScheduledJobs, job: JobRecord) -> str:
    """Stopped until resumed; a run already under way finishes."""
    check_open(job, "pause")
    if job.state == "paused":
        return f"Job #{job.id} {job.name!r} is paused already."
    await _set_state(store, job, "paused")
    return f"Paused job #{job.id} {job.name!r}."


async def resume(store: ScheduledJobs, job: JobRecord, now: datetime) -> str:
    """A paused (or failed) job active again, next at its schedule's first time from now in its zone; its
    failures start again from zero."""
    check_open(job, "resume")
    if job.state == "active":
        return f"Job #{job.id} {job.name!r} is active already; next {next_text(job)}."
    try:
        due = next_due_on_resume(job, now)
    except ScheduleError as exc:
        raise Refused(f"job #{job.id}'s schedule {job.schedule!r} cannot be used here: {exc}") from None
    changed = await _set_state(store, job, "active", due)
    return f"Resumed job #{job.id} {job.name!r}; next {next_text(changed)}."


async def remove(store: ScheduledJobs, job: JobRecord) -> str:
    """Deleted; its runs so far stay in the conversations they were written into."""
    if not await store.delete_job(job.id):
        raise Refused(f"no job {job.id}: it was removed meanwhile.")
    return f"Removed job #{job.id} {job.name!r}."


async def run_now(store: ScheduledJobs, job: JobRecord, now: datetime) -> str:
    """Due now (a paused one becomes active); its schedule goes on from then, a one-time job is then done."""
    check_open(job, "run")
    await _set_state(store, job, "active", now)
    after = " (a one-time job: it is done after this run)" if job.once else ", then by its schedule"
    return f"Job #{job.id} {job.name!r} is due now: a running gateway sends it within a second{after}."
