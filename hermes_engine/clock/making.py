"""`cronjob create` and `cronjob update`: what a job may be (a reminder's text or a task's prompt, a schedule
within the profile's bounds, toolsets the profile offers, a target it may post to), checked before anything
is saved; each refusal is one sentence. A job goes to the chat it is made in unless `deliver` names another
(`targets.py`)."""

from __future__ import annotations

from dataclasses import dataclass

from hermes_engine.clock.actions import OPEN, ClockAccess
from hermes_engine.clock.schedule import Schedule, ScheduleError, local_time, parse_schedule, zone_named
from hermes_engine.clock.targets import BadTarget, Destination, destination
from hermes_engine.clock.tasks import CLOCK_TOOLSET
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.jobs import JobChanges, JobKind, JobRecord, JobSpec
from hermes_engine.ports.tools import ToolContext

MAX_TEXT = 2000  # characters of a reminder's text or a task's prompt


class Refused(ValueError):
    """A job that cannot be made or changed so; the message is one sentence for the person."""


@dataclass(frozen=True)
class Request:
    """What the model asked `cronjob` for, as its arguments said it."""

    name: str = ""
    message: str = ""
    prompt: str = ""
    schedule: str = ""
    deliver: str = ""  # `origin` when empty at creation; unchanged when empty at an update
    repeat: int | None = None
    toolsets: list[str] | None = None
    catch_up: str = "once"


def _kind_and_text(req: Request) -> tuple[JobKind, str]:
    message, prompt = req.message.strip(), req.prompt.strip()
    if message and prompt:
        raise Refused("give either message (a reminder's fixed text) or prompt (a task the agent runs), not both.")
    if not message and not prompt:
        raise Refused("give the reminder's text in message, or the task to run in prompt.")
    text = message or prompt
    if len(text) > MAX_TEXT:
        raise Refused(f"a job's text can be at most {MAX_TEXT} characters.")
    return ("reminder", text) if message else ("task", text)


def _toolsets(offered: set[str], named: list[str] | None, *, clock: bool) -> tuple[str, ...] | None:
    """The toolsets a task names, each one the profile offers (the clock's own only when tasks may make jobs)."""
    if named is None:
        return None
    usable = offered if clock else offered - {CLOCK_TOOLSET}
    wanted = sorted({n.strip() for n in named if n.strip()})
    missing = [n for n in wanted if n not in usable]
    if missing:
        raise Refused(f"a task here may use only {', '.join(sorted(usable)) or 'no toolsets'}; "
                      f"not {', '.join(missing)}.")
    return tuple(wanted)


def _repeat(repeat: int | None, schedule: Schedule) -> int | None:
    if repeat is None:
        return None
    if repeat < 1:
        raise Refused("repeat is how many times the job fires: 1 or more.")
    if schedule.once and repeat > 1:
        raise Refused(f"{schedule.text!r} fires once; to repeat, give a schedule such as `every 2h`.")
    return repeat


def _schedule(access: ClockAccess, text: str, zone_name: str) -> Schedule:
    zone = zone_named(zone_name)
    try:
        return parse_schedule(text, zone, access.clock(), min_interval=access.settings.min_interval)
    except ScheduleError as exc:
        raise Refused(str(exc)) from None


async def _destination(access: ClockAccess, origin: ReplyTarget, user_id: str | None,
                       deliver: str) -> Destination | None:
    """The chat `deliver` names, checked now (None: the origin); a refusal is one sentence."""
    assert access.host is not None
    try:
        return await destination(access.host, origin, user_id, deliver)
    except BadTarget as exc:
        raise Refused(str(exc)) from None


async def create(access: ClockAccess, ctx: ToolContext, req: Request, *, offered: set[str], zone_name: str,
                 session_key: str) -> str:
    """Save a new job for `ctx`'s person in `ctx`'s chat; the confirmation names its next time locally."""
    store = access.store
    assert store is not None and ctx.person_id is not None
    kind, text = _kind_and_text(req)
    if ctx.target is None:
        raise Refused("there is no chat to deliver this job to.")
    toolsets = (_toolsets(offered, req.toolsets, clock=access.settings.allow_jobs_from_tasks) if kind == "task"
                else None)
    kept = [j for j in await store.list_jobs(ctx.bot, owner_id=ctx.person_id) if j.state in OPEN]
    if len(kept) >= access.settings.max_jobs_per_person:
        raise Refused(f"you have {len(kept)} jobs already, the most one person may keep; remove one first "
                      "(cronjob with action=list shows them).")
    parsed = _schedule(access, req.schedule, zone_name)
    runs_left = _repeat(req.repeat, parsed)
    zone = zone_named(zone_name)
    due = parsed.first(access.clock(), zone)
    target = ctx.target.to_dict()
    target["reply_to_id"] = None
    if (named := await _destination(access, ctx.target, ctx.user_id, req.deliver)) is not None:
        target, session_key = named.target, named.session_key
    job = await store.create_job(JobSpec(
        owner_id=ctx.person_id, bot=ctx.bot, target=target, session_key=session_key,
        name=(req.name.strip() or text)[:80], schedule=parsed.text, timezone=zone_name, kind=kind, text=text,
        next_due=due, once=parsed.once, catch_up="skip" if req.catch_up == "skip" else "once",
        runs_left=runs_left, toolsets=toolsets))
    access.wake()
    note = "" if zone_name != "UTC" else " Times are in UTC; say /timezone Europe/Berlin (your zone) to change it."
    then = "" if parsed.once else f", then {parsed.text}" + (f", {runs_left} times in all" if runs_left else "")
    what = "Reminder" if kind == "reminder" else "Task"
    where = f" in {named.target['named']}" if named is not None else ""
    return f"{what} #{job.id} set: it fires{where} {local_time(due, zone)}{then}.{note}"


async def update(access: ClockAccess, job: JobRecord, req: Request, *, origin: ReplyTarget | None,
                 user_id: str | None, session_key: str) -> str:
    """Change the name, text, schedule (its next time recomputed from now), repeat, a task's toolsets or where it
    is delivered (`deliver`: another chat, checked now, or `origin`: the chat this is asked in)."""
    store = access.store
    assert store is not None
    if req.message.strip() and job.kind == "task":
        raise Refused(f"#{job.id} is a task: change what it does with prompt, not message.")
    if req.prompt.strip() and job.kind == "reminder":
        raise Refused(f"#{job.id} is a reminder: change its text with message, not prompt.")
    moved = await _moved(access, req.deliver, origin=origin, user_id=user_id, session_key=session_key)
    text = (req.message or req.prompt).strip() or None
    if text is not None and len(text) > MAX_TEXT:
        raise Refused(f"a job's text can be at most {MAX_TEXT} characters.")
    parsed = _schedule(access, req.schedule, job.timezone) if req.schedule.strip() else None
    zone = zone_named(job.timezone)
    runs_left = _repeat(req.repeat, parsed or Schedule(job.schedule, at=job.next_due if job.once else None))
    if req.toolsets is not None and job.kind == "reminder":
        raise Refused(f"#{job.id} is a reminder: it runs no tools.")
    toolsets = _toolsets(set(access.offered), req.toolsets, clock=access.settings.allow_jobs_from_tasks)
    if (text is None and parsed is None and runs_left is None and toolsets is None and not req.name.strip()
            and moved is None):
        raise Refused("say what to change: name, message or prompt, schedule, repeat, toolsets or deliver.")
    changes = JobChanges(name=req.name.strip() or None, text=text, schedule=parsed.text if parsed else None,
                         next_due=parsed.first(access.clock(), zone) if parsed else None,
                         once=parsed.once if parsed else None, runs_left=runs_left, toolsets=toolsets,
                         target=moved.target if moved else None, session_key=moved.session_key if moved else None)
    changed = await store.update_job(job.id, changes)
    assert changed is not None
    access.wake()
    when = local_time(changed.next_due, zone) if changed.next_due else "never"
    state = " It is paused: resume it to run it." if changed.state == "paused" else ""
    return f"Updated #{changed.id} {changed.name!r}: it fires next {when}.{state}"


async def _moved(access: ClockAccess, deliver: str, *, origin: ReplyTarget | None,
                 user_id: str | None, session_key: str) -> Destination | None:
    """Where an update sends the job: None when `deliver` is not given (the job stays where it is); `origin`: the
    chat the update is asked in; another chat: checked now, as at creation."""
    if not deliver.strip():
        return None
    if origin is None:
        raise Refused("there is no chat to deliver this job to.")
    if (named := await _destination(access, origin, user_id, deliver)) is not None:
        return named
    target = origin.to_dict()
    target["reply_to_id"] = None
    return Destination(target, session_key)
