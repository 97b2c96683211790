"""A scheduled task's run: the job's prompt as an agent turn in a fresh session of its own, then its answer
delivered like a reminder.

The session (key `job:<id>`, a new one per run) freezes its system prompt through the host as any session
does: the bot's persona, the owner's memory and the skill index. The agent loop is the one sub-agents and
kanban workers run, with the tools of the toolsets the job names (default: the profile's
`clock.task_toolsets`), only those the profile offers, and the clock's own only when the profile allows jobs
from tasks. A run counts as a turn of its owner against the usage limits (with the owner's admin standing, as
a turn has it: an admin is not held to them), and each model call's tokens count on the owner and on the job.

The slot is marked started (compare-and-set) before the model is called. A run a crash cut leaves that mark:
the next run of the slot records it as interrupted and tells the chat once; it never runs it again, since its
tools may have done things already. An answer that cannot be delivered is kept with the job and only its
delivery is retried (under the key of the slot it was made for), with back-off. A failing model is told to the
chat once per streak of failures and retried with back-off (`outcomes.failed`). An answer starting with
`[SILENT]` delivers nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from hermes_engine.agent.loop import AgentLoop
from hermes_engine.clock.admission import owner_is_admin
from hermes_engine.clock.outcomes import failed, following, late_note, record, run_key, tell, write_into_chat
from hermes_engine.clock.schedule import local_time, zone_named
from hermes_engine.errors import HermesError
from hermes_engine.policy.limits import SERVICE as LIMITS
from hermes_engine.policy.limits import charge
from hermes_engine.ports.conversation import Message, Usage
from hermes_engine.ports.host import Host
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.jobs import JobRecord
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.session import SessionHandle, SessionScope
from hermes_engine.ports.tools import ToolContext
from hermes_engine.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

SILENT = "[SILENT]"
CLOCK_TOOLSET = "clock"


@dataclass(frozen=True)
class TaskRun:
    """What the tools of a task run know of it (`TASK_RUN`): the `cronjob` tool refuses to make jobs from
    inside one unless `allow_jobs`, and a job it makes goes to the chat of the job that runs."""

    job: JobRecord
    allow_jobs: bool


TASK_RUN: ServiceKey[TaskRun] = ServiceKey("clock_task_run")


def task_toolsets(host: Host, named: tuple[str, ...] | None) -> list[str]:
    """The toolsets a task run gets: those named (default: `clock.task_toolsets`) that the profile offers,
    without the clock's own unless the profile allows jobs from tasks."""
    settings = host.profile.clock
    offered = {t.toolset for t in host.tools}
    chosen = offered & set(named if named is not None else settings.task_toolsets)
    if not settings.allow_jobs_from_tasks:
        chosen.discard(CLOCK_TOOLSET)
    return sorted(chosen)


def task_prompt(job: JobRecord, due: datetime) -> str:
    when = local_time(due, zone_named(job.timezone))
    return (f"[Scheduled task #{job.id} {job.name!r}, due {when}. Nobody is at the keyboard: work from this "
            "prompt alone; your final answer is posted to the chat the job was made in. When there is nothing "
            f"worth reporting, answer exactly {SILENT} and nothing is posted.]\n\n{job.text}")


async def run_task(host: Host, job: JobRecord, due: datetime, clock: Callable[[], datetime], *, late: bool) -> bool:
    """Run slot `due` of task `job` (held under its lease); True when this call recorded it."""
    if job.started_due == due:
        return await _interrupted(host, job, due, clock())
    if job.undelivered is not None and job.undelivered_due is not None:
        return await _deliver(host, job, due, clock(), job.undelivered, job.undelivered_due, tokens=0)
    limits = host.services.get(LIMITS)
    admin = await owner_is_admin(host, job)
    refused = await limits.refusal_for(job.owner_id, admin=admin) if limits is not None else None
    if refused is not None:
        now = clock()
        await tell(host, job, f"The scheduled task #{job.id} {job.name!r} did not run: {refused}",
                   key=f"{run_key(job, due)}:limit")
        return await record(host, job, due, now, outcome="refused: usage limit", label="refused",
                            next_due=following(job, due, now))
    if not await host.store.start_run(job.id, due):
        return False
    usage = Usage()
    try:
        answer = await _answer(host, job, due, usage, admin=admin)
    except HermesError as exc:
        return await _model_failed(host, job, due, clock(), _short(exc), usage.total)
    now = clock()
    if answer is None:
        return await _model_failed(host, job, due, now, "the task ended without an answer", usage.total)
    if answer.upper().startswith(SILENT):
        return await record(host, job, due, now, outcome="silent", label="silent", next_due=following(job, due, now),
                            tokens=usage.total)
    text = f"🗓 {job.name}\n\n{answer}" + (late_note(job, due) if late else "")
    return await _deliver(host, job, due, now, text, due, tokens=usage.total)


async def _deliver(host: Host, job: JobRecord, due: datetime, now: datetime, text: str, made_for: datetime, *,
                   tokens: int) -> bool:
    """Post a task's answer, made for slot `made_for`, under that slot's key, and record slot `due`. One that
    cannot be delivered is kept with the job, and only its delivery is retried with back-off: the agent is
    not run again for it (its tools may have acted, its tokens are spent)."""
    try:
        sent = await host.notify(ReplyTarget.from_dict(job.target), text, idempotency_key=run_key(job, made_for))
    except Exception as exc:
        log.warning("job %s: delivery failed: %s", job.id, exc)
        sent, problem = False, str(exc) or type(exc).__name__
    else:
        problem = f"{ReplyTarget.from_dict(job.target).platform} is not attached"
    if not sent:
        return await failed(host, job, due, now, outcome=f"not delivered: {problem}", label="undelivered",
                            tokens=tokens, undelivered=(text, made_for))
    if not await record(host, job, due, now, outcome="delivered", label="delivered",
                        next_due=following(job, due, now), tokens=tokens):
        return False
    await write_into_chat(host, job, made_for, text)
    return True


async def _answer(host: Host, job: JobRecord, due: datetime, usage: Usage, *, admin: bool) -> str | None:
    """The agent's final answer to the task (None: it gave none, or used its budget); `usage` counts what
    each model call spent as it comes back, so a failed run is charged too."""
    key = f"job:{job.id}"
    record_ = await host.store.new_session(key, job.bot)
    target = ReplyTarget.from_dict(job.target)
    scope = SessionScope(bot=job.bot, session_id=record_.id, session_key=key, chat_kind="dm",
                         person_id=job.owner_id)
    session = SessionHandle(key=key, record=record_, scope=scope, target=target)
    await host.ensure_loaded(session, job.owner_id)
    settings = host.profile.clock
    registry = ToolRegistry(list(host.tools)).select(task_toolsets(host, job.toolsets))
    services = host.services.with_entry(TASK_RUN, TaskRun(job, settings.allow_jobs_from_tasks))
    ctx = ToolContext(bot=job.bot, session_id=record_.id, session_key=key, person_id=job.owner_id,
                      services=services, unattended=True, target=target, is_admin=admin)
    agent = AgentLoop(registry, max_iterations=settings.task_max_iterations,
                      max_output_tokens=host.profile.max_output_tokens)

    async def persist(message: Message, step: Usage | None, model: str | None) -> None:
        await host.store.append_message(record_.id, message, person_id=job.owner_id, usage=step, model=model)
        if step is not None:
            usage.add(step)
            host.metrics.tokens_used(host.bot, target.platform, input_tokens=step.input_tokens,
                                     output_tokens=step.output_tokens,
                                     cached_tokens=step.cache_read_tokens + step.cache_write_tokens)
            await charge(host, job.owner_id, step)  # priced by its model

    result = await agent.run(router=host.chain(host.profile.models(host.settings)).route(),
                             system=session.system_prompt or "", history=session.history,
                             user=Message(role="user", content=task_prompt(job, due)), ctx=ctx, persist=persist,
                             purpose="task")
    answer = result.final_text.strip()
    return answer if answer and not result.budget_exhausted else None


async def _model_failed(host: Host, job: JobRecord, due: datetime, now: datetime, problem: str, tokens: int) -> bool:
    log.warning("job %s: the task failed: %s", job.id, problem)
    if job.failures == 0:  # told once per streak; the third in a row pauses it, and that is told too
        await tell(host, job, f"⚠️ The scheduled task #{job.id} {job.name!r} failed ({problem}); I will try again "
                              "shortly.", key=f"{run_key(job, due)}:failed")
    return await failed(host, job, due, now, outcome=f"failed: {problem}", label="failed", tokens=tokens)


async def _interrupted(host: Host, job: JobRecord, due: datetime, now: datetime) -> bool:
    """A run of slot `due` started and was never recorded: a crash cut it. It is not run again."""
    nxt = following(job, due, now)
    then = f" It runs next {local_time(nxt, zone_named(job.timezone))}." if nxt is not None else ""
    await tell(host, job, f"⚠️ The scheduled task #{job.id} {job.name!r} due "
                          f"{local_time(due, zone_named(job.timezone))} was interrupted (the bot stopped while it "
                          f"ran) and is not run again.{then}", key=f"{run_key(job, due)}:interrupted")
    return await record(host, job, due, now, outcome="interrupted", label="interrupted", next_due=nxt)


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]
