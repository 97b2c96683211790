"""The `cronjob` tool, with the name and arguments of the agent this project follows, so its prompts and
skills port over: `message` makes a reminder (fixed text, no model call), `prompt` a task (the agent runs it
on schedule and its answer is posted). Inside a scheduled task's run it makes, changes or removes jobs only
when the profile allows jobs from tasks; the jobs it makes then go to the chat of the task that runs."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from hermes_engine.clock import actions
from hermes_engine.clock.actions import CLOCK, ClockAccess, NotYours
from hermes_engine.clock.making import Refused, Request, create, update
from hermes_engine.clock.schedule import ScheduleError, local_time, zone_named
from hermes_engine.clock.tasks import TASK_RUN
from hermes_engine.ports.jobs import JobRecord
from hermes_engine.ports.storage import Store
from hermes_engine.ports.tools import ToolContext, ToolResult
from hermes_engine.tools.registry import tool

__all__ = ["CLOCK", "TOOLSET", "ClockAccess", "cronjob", "describe", "person_zone", "set_timezone", "zone_chosen"]

TOOLSET = "clock"


def describe(job: JobRecord) -> str:
    """One line for a job: its number, name, kind, schedule, next time in its zone and tokens so far."""
    return actions.describe(job)


def _error(text: str) -> ToolResult:
    return ToolResult(f"Error: {text}", is_error=True)


async def person_zone(store: Store, person_id: int) -> str:
    """The person's zone (`/timezone`), UTC when they chose none."""
    return await store.person_timezone(person_id) or "UTC"


async def zone_chosen(store: Store, person_id: int, given: str, now: datetime) -> str:
    """Keep the zone the person chose, with the person (not in a prompt); the sentence that says so, with the
    time it is there now so a wrong choice shows. A name the IANA database does not know raises ScheduleError."""
    zone = zone_named(given.strip())
    await store.set_person_timezone(person_id, zone.key)
    return f"Your time zone is now {zone.key}: it is {local_time(now, zone)}. Reminders you make from now on use it."


@tool(toolset=TOOLSET, name="set_timezone")
async def set_timezone(zone: str, ctx: ToolContext) -> ToolResult:
    """Keep the person's time zone for their reminders and scheduled tasks, once they confirmed it (ask first
    when you only guessed it from what they said, e.g. "You are in Berlin, so Europe/Berlin?").

    Args:
        zone: an IANA time zone name, e.g. Europe/Berlin, America/New_York, Asia/Tokyo
    """
    access = ctx.services.get(CLOCK)
    if access is None or access.store is None or ctx.person_id is None or ctx.in_review:
        return _error("time zones are not available here.")
    if ctx.services.get(TASK_RUN) is not None:
        return _error("a scheduled task may not change its owner's time zone; they can, with /timezone.")
    try:
        return ToolResult(await zone_chosen(access.store, ctx.person_id, zone, access.clock()))
    except ScheduleError as exc:
        return _error(str(exc))


@tool(toolset=TOOLSET, name="cronjob")
async def cronjob(action: Literal["create", "list", "update", "remove", "pause", "resume", "run"], ctx: ToolContext,
                  job_id: str = "", name: str = "", message: str = "", prompt: str = "", schedule: str = "",
                  deliver: str = "", repeat: int | None = None, toolsets: list[str] | None = None,
                  catch_up: Literal["once", "skip"] = "once") -> ToolResult:
    """Scheduled jobs in this chat: a reminder (message: fixed text, sent as it is) or a task (prompt: you run
    it on schedule, alone, and your answer is posted here; answer [SILENT] to post nothing).

    Args:
        action: create | list | update | remove | pause | resume | run (run: due now)
        job_id: the job to update, remove, pause, resume or run (from list)
        name: a short name for the job
        message: a reminder's text, sent as it is when it fires
        prompt: a task for the agent to run on schedule; its answer is posted
        schedule: once `in 30m`, `2026-12-24T18:00+01:00`; or `every 2h`, `every monday 9am`, `0 9 * * 1-5`
        deliver: where it is posted: origin (this chat, the default), or a group or channel where the person may
            write and the bot is: Telegram -100123... or @channel, Slack C0123ABCD or #name, Discord a channel id
        repeat: fire this many times, then stop (recurring schedules)
        toolsets: the toolsets a task may use (default: the profile's choice for tasks)
        catch_up: a slot missed while the bot was down: `once` fires it at the next start, `skip` drops it
    """
    access = ctx.services.get(CLOCK)
    if access is None or access.store is None or ctx.person_id is None or ctx.in_review:
        return _error("scheduled jobs are not available here.")
    task = ctx.services.get(TASK_RUN)
    if task is not None and not task.allow_jobs:
        return _error("a scheduled task may not make or change jobs (the profile's clock.allow_jobs_from_tasks).")
    store = access.store
    if action == "list":
        return ToolResult(await actions.listing(store, ctx.bot, ctx.person_id))
    req = Request(name=name, message=message, prompt=prompt, schedule=schedule, deliver=deliver, repeat=repeat,
                  toolsets=toolsets, catch_up=catch_up)
    try:
        if action == "create":
            offered = set(access.offered)
            session_key = task.job.session_key if task is not None else ctx.session_key
            return ToolResult(await create(access, ctx, req, offered=offered,
                                           zone_name=await person_zone(store, ctx.person_id),
                                           session_key=session_key))
        job = await actions.own_job(store, ctx.bot, ctx.person_id, job_id)
        if action == "update":
            return ToolResult(await update(access, job, req, origin=ctx.target, user_id=ctx.user_id,
                                           session_key=ctx.session_key))
    except (Refused, NotYours) as exc:
        return _error(str(exc))
    if action == "remove":
        return ToolResult(await actions.remove(store, job))
    if action == "pause":
        return ToolResult(await actions.pause(store, job))
    if action == "run":
        return ToolResult(await actions.run_now(access, job))
    return ToolResult(await actions.resume(access, job))
