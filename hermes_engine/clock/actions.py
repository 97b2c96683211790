"""What a person may do to their own jobs, said the same way by the `cronjob` tool and `/jobs`: list, pause,
resume, remove and run now. Each answer is one sentence for the person."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hermes_engine.clock.schedule import local_time, parse_schedule, zone_named
from hermes_engine.config.clock import ClockSettings
from hermes_engine.ports.host import Host
from hermes_engine.ports.jobs import JobRecord
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.storage import Store

OPEN = ("active", "paused")


@dataclass
class ClockAccess:
    """What the tool and `/jobs` use, reached through `ToolContext.services` (`CLOCK`)."""

    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    wake: Callable[[], None] = field(default=lambda: None)  # a job was made or made due: the ticker looks again
    store: Store | None = None  # the gateway's, from its start
    settings: ClockSettings = field(default_factory=ClockSettings)  # the profile's `clock:`, from its start
    offered: frozenset[str] = frozenset()  # the toolsets the profile offers (a task names only these)
    host: Host | None = None  # the gateway, from its start: who may write where, and where the bot is


CLOCK: ServiceKey[ClockAccess] = ServiceKey("clock")


class NotYours(LookupError):
    """The job named is not one of the person's open jobs; the message is one sentence for them."""


def describe(job: JobRecord) -> str:
    """One line per job, as `list`, `/jobs` and the command line show it: the chat it goes to when its owner named
    one, its next time in its own zone and, for a task, the tokens its runs spent so far (a reminder calls no
    model)."""
    zone = zone_named(job.timezone)
    when = local_time(job.next_due, zone) if job.next_due else "no next run"
    state = "" if job.state == "active" else f" [{job.state}]"
    left = f", {job.runs_left} runs left" if job.runs_left is not None else ""
    spent = f"; task, {job.tokens:,} tokens so far" if job.kind == "task" else ""
    where = f" in {job.target['named']}" if job.target.get("named") else ""  # a chat its owner named (targets.py)
    return f"#{job.id} {job.name!r} ({job.schedule}{left}){state}{where}: next {when}{spent}"


async def listing(store: Store, bot: str, person_id: int) -> str:
    jobs = await store.list_jobs(bot, owner_id=person_id)
    return "\n".join(describe(j) for j in jobs) if jobs else "No scheduled jobs."


async def own_job(store: Store, bot: str, person_id: int, job_id: str) -> JobRecord:
    """The person's open job `job_id` (`#7` or `7`); `NotYours` otherwise (another person's is not theirs)."""
    cleaned = job_id.strip().lstrip("#")
    if not cleaned.isdigit():
        raise NotYours("give the job's number (its #id in the list of jobs).")
    job = await store.get_job(int(cleaned))
    if job is None or job.bot != bot or job.owner_id != person_id or job.state not in OPEN:
        raise NotYours(f"you have no job {job_id.strip()}.")
    return job


async def pause(store: Store, job: JobRecord) -> str:
    await store.set_job_state(job.id, "paused")
    return f"Paused #{job.id} {job.name!r}."


async def remove(store: Store, job: JobRecord) -> str:
    await store.delete_job(job.id)
    return f"Removed #{job.id} {job.name!r}."


async def resume(access: ClockAccess, job: JobRecord) -> str:
    """Active again, from its next slot after now (a once job keeps its time: due now if it passed)."""
    assert access.store is not None
    zone = zone_named(job.timezone)
    now = access.clock()
    # the schedule was accepted when it was made: a minimum raised since does not strand it
    due = job.next_due if job.once else parse_schedule(job.schedule, zone, now, min_interval=timedelta(0)).first(
        now, zone)
    await access.store.set_job_state(job.id, "active", next_due=due)
    access.wake()
    return f"Resumed #{job.id} {job.name!r}; next {local_time(due, zone) if due else 'never'}."


async def run_now(access: ClockAccess, job: JobRecord) -> str:
    """Due now; after this run it follows its schedule again (a once job is done)."""
    assert access.store is not None
    if job.state != "active":
        return f"#{job.id} {job.name!r} is paused: resume it first (`/jobs resume {job.id}`)."
    if job.started_due is not None and job.started_due == job.next_due:
        return f"#{job.id} {job.name!r} is running now."
    await access.store.set_job_state(job.id, "active", next_due=access.clock())
    access.wake()
    return f"#{job.id} {job.name!r} runs now."
