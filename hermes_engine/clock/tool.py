"""The `cronjob` tool, with the name and arguments of the agent this project follows, so its prompts and
skills port over. This slice makes reminders (`message`: fixed text, no model call); `prompt` (a task run by
the agent) is answered with one sentence saying it is not available yet."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from hermes_engine.clock.schedule import ScheduleError, local_time, parse_schedule, zone_named
from hermes_engine.ports.jobs import JobRecord, JobSpec
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.storage import Store
from hermes_engine.ports.tools import ToolContext, ToolResult
from hermes_engine.tools.registry import tool

TOOLSET = "clock"
MAX_TEXT = 2000
MAX_JOBS_PER_PERSON = 25  # active or paused: a person cannot fill the clock (or a chat) with reminders


@dataclass
class ClockAccess:
    """What the tool uses, reached through `ToolContext.services` (`CLOCK`)."""

    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    wake: Callable[[], None] = field(default=lambda: None)  # a job was made: the ticker looks again
    store: Store | None = None  # the gateway's, from its start


CLOCK: ServiceKey[ClockAccess] = ServiceKey("clock")


def _error(text: str) -> ToolResult:
    return ToolResult(f"Error: {text}", is_error=True)


async def person_zone(store: Store, person_id: int) -> str:
    """The person's zone (`/timezone`), UTC when they chose none."""
    return await store.person_timezone(person_id) or "UTC"


def describe(job: JobRecord) -> str:
    zone = zone_named(job.timezone)
    when = local_time(job.next_due, zone) if job.next_due else "no next run"
    state = "" if job.state == "active" else f" [{job.state}]"
    return f"#{job.id} {job.name!r} ({job.schedule}){state}: next {when}"


@tool(toolset=TOOLSET, name="cronjob")
async def cronjob(action: Literal["create", "list", "remove", "pause", "resume"], ctx: ToolContext,
                  job_id: str = "", name: str = "", message: str = "", prompt: str = "", schedule: str = "",
                  catch_up: Literal["once", "skip"] = "once") -> ToolResult:
    """Reminders in this chat: create one (fixed text, sent as it is), list, pause, resume or remove them.

    Args:
        action: create | list | remove | pause | resume
        job_id: the job to remove, pause or resume (from list)
        name: a short name for the job
        message: the reminder's text, sent as it is when it fires
        prompt: a task for the agent to run on schedule (not available yet)
        schedule: once `in 30m`, `2026-12-24T18:00+01:00`; or `every 2h`, `every monday 9am`, `0 9 * * 1-5`
        catch_up: a slot missed while the bot was down: `once` fires it at the next start, `skip` drops it
    """
    access = ctx.services.get(CLOCK)
    if access is None or access.store is None or ctx.person_id is None or ctx.in_review:
        return _error("reminders are not available here.")
    store = access.store
    if action == "list":
        jobs = await store.list_jobs(ctx.bot, owner_id=ctx.person_id)
        return ToolResult("\n".join(describe(j) for j in jobs) if jobs else "No reminders.")
    if action == "create":
        return await _create(access, store, ctx, name, message, prompt, schedule, catch_up)
    job = await _own(store, ctx, job_id)
    if isinstance(job, ToolResult):
        return job
    if action == "remove":
        await store.delete_job(job.id)
        return ToolResult(f"Removed {job.name!r}.")
    if action == "pause":
        await store.set_job_state(job.id, "paused")
        return ToolResult(f"Paused {job.name!r}.")
    zone = zone_named(job.timezone)
    now = access.clock()
    due = job.next_due if job.once else parse_schedule(job.schedule, zone, now).first(now, zone)
    await store.set_job_state(job.id, "active", next_due=due)
    access.wake()
    return ToolResult(f"Resumed {job.name!r}; next {local_time(due, zone) if due else 'never'}.")


async def _own(store: Store, ctx: ToolContext, job_id: str) -> JobRecord | ToolResult:
    if not job_id.strip().lstrip("#").isdigit():
        return _error("give the job_id of the job (call cronjob with action=list to see them).")
    job = await store.get_job(int(job_id.strip().lstrip("#")))
    if job is None or job.bot != ctx.bot or job.owner_id != ctx.person_id or job.state not in ("active", "paused"):
        return _error(f"you have no job {job_id}.")
    return job


async def _create(access: ClockAccess, store: Store, ctx: ToolContext, name: str, message: str, prompt: str,
                  schedule: str, catch_up: Literal["once", "skip"]) -> ToolResult:
    assert ctx.person_id is not None
    if prompt.strip() and not message.strip():
        return _error("scheduled tasks (prompt) are not available yet; a reminder with fixed text (message) is.")
    if not message.strip():
        return _error("give the reminder's text in message.")
    if len(message) > MAX_TEXT:
        return _error(f"a reminder's text can be at most {MAX_TEXT} characters.")
    if ctx.target is None:
        return _error("there is no chat to deliver this reminder to.")
    kept = [j for j in await store.list_jobs(ctx.bot, owner_id=ctx.person_id) if j.state in ("active", "paused")]
    if len(kept) >= MAX_JOBS_PER_PERSON:
        return _error(f"you have {len(kept)} reminders already, the most one person may keep; remove one first "
                      "(cronjob with action=list shows them).")
    zone_name = await person_zone(store, ctx.person_id)
    zone = zone_named(zone_name)
    now = access.clock()
    try:
        parsed = parse_schedule(schedule, zone, now)
    except ScheduleError as exc:
        return _error(str(exc))
    due = parsed.first(now, zone)
    target = ctx.target.to_dict()
    target["reply_to_id"] = None
    job = await store.create_job(JobSpec(
        owner_id=ctx.person_id, bot=ctx.bot, target=target, session_key=ctx.session_key,
        name=(name.strip() or message.strip())[:80], schedule=parsed.text, timezone=zone_name, kind="reminder",
        text=message.strip(), next_due=due, once=parsed.once, catch_up=catch_up))
    access.wake()
    note = "" if zone_name != "UTC" else " Times are in UTC; say /timezone Europe/Berlin (your zone) to change it."
    repeat = "" if parsed.once else f", then {parsed.text}"
    return ToolResult(f"Reminder #{job.id} set: it fires {local_time(due, zone)}{repeat}.{note}")
