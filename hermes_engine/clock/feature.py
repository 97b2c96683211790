"""The clock as a `Feature`: the `cronjob` tool (toolset `clock`), `/timezone`, `/jobs`, and the ticker that
runs due reminders and tasks.

The ticker is a loop of its own rather than `Host.schedule`: it sleeps until the next job is due (at most a
second, so a job another replica made is seen within one), which keeps lateness under a second. Every replica
may tick; each run is taken under the job's lease and recorded by compare-and-set (`runs.py`), so it is
delivered once. Reminders due at the same moment are sent side by side, at most `BATCH_RUNS` at a time (each
run holds its own lease and records by compare-and-set, so running them together doubles nothing); the
outbound pacer still spaces what goes to one chat. A task's run takes as long as its agent does, so it runs
beside the ticker (`Host.spawn`, one at a time per job), and reminders due meanwhile are not held up by it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hermes_engine.clock import actions
from hermes_engine.clock.actions import CLOCK, ClockAccess, NotYours
from hermes_engine.clock.runs import run_due
from hermes_engine.clock.schedule import ScheduleError
from hermes_engine.clock.tool import cronjob, person_zone, set_timezone, zone_chosen
from hermes_engine.ports.commands import CommandContext, CommandRegistry
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.host import Host
from hermes_engine.ports.jobs import JobRecord
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.session import SessionScope
from hermes_engine.ports.tools import Tool

log = logging.getLogger(__name__)

TICK_SECONDS = 1.0  # the longest the ticker sleeps without looking at the store
BATCH_RUNS = 16  # reminders of one tick delivered at the same time
JOBS_USAGE = "`/jobs` lists your jobs; `/jobs pause|resume|remove|run ID` acts on one."


def _utcnow() -> datetime:
    return datetime.now(UTC)


class ClockFeature(Feature):
    name = "clock"

    def __init__(self, clock: Callable[[], datetime] = _utcnow) -> None:
        self.clock = clock
        self._host: Host | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._access = ClockAccess(clock, self._wake.set)
        self._running: dict[int, asyncio.Task[Any]] = {}  # task runs in flight here, by job

    def tools(self) -> list[Tool]:
        return [cronjob, set_timezone]

    def services(self) -> dict[ServiceKey[Any], object]:
        return {CLOCK: self._access}

    def register_commands(self, registry: CommandRegistry) -> None:
        registry.command("timezone", "your time zone for reminders, e.g. /timezone Europe/Berlin")(self.timezone)
        registry.command("jobs", "your reminders and scheduled tasks; /jobs pause|resume|remove|run ID")(self.jobs)

    async def start(self, host: Host) -> None:
        self._host = host
        self._access.store = host.store
        self._access.host = host
        self._access.settings = host.profile.clock
        self._access.offered = frozenset(t.toolset for t in host.tools)
        # Not `Host.spawn`: that is work the gateway waits for before it is idle, and the ticker never ends.
        self._task = asyncio.create_task(self._tick(host), name="clock ticker")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def timezone(self, ctx: CommandContext) -> str:
        store = ctx.host.store
        given = ctx.args.strip()
        if not given:
            zone = await person_zone(store, ctx.person_id)
            chosen = "" if zone != "UTC" else " (nothing chosen yet: UTC)"
            return f"Your time zone is {zone}{chosen}. Change it with /timezone Europe/Berlin."
        try:
            return await zone_chosen(store, ctx.person_id, given, self.clock())
        except ScheduleError as exc:
            return str(exc)

    async def jobs(self, ctx: CommandContext) -> str:
        """`/jobs`: the person's jobs with their next times (local) and tokens; `/jobs ACTION ID`."""
        store, bot = ctx.host.store, ctx.host.bot
        words = ctx.args.split()
        if not words:
            return f"{await actions.listing(store, bot, ctx.person_id)}\n\n{JOBS_USAGE}"
        if len(words) != 2 or words[0].lower() not in ("pause", "resume", "remove", "run"):
            return JOBS_USAGE
        try:
            job = await actions.own_job(store, bot, ctx.person_id, words[1])
        except NotYours as exc:
            return f"{str(exc)[0].upper()}{str(exc)[1:]}"
        verb = words[0].lower()
        if verb == "pause":
            return await actions.pause(store, job)
        if verb == "remove":
            return await actions.remove(store, job)
        if verb == "run":
            return await actions.run_now(self._access, job)
        return await actions.resume(self._access, job)

    async def status_lines(self, scope: SessionScope, person_id: int | None) -> list[str]:
        """`/status`: how many jobs the person keeps and what their tasks spent so far."""
        if self._host is None or person_id is None:
            return []
        jobs = await self._host.store.list_jobs(self._host.bot, owner_id=person_id)
        if not jobs:
            return []
        active = sum(j.state == "active" for j in jobs)
        return [f"Scheduled jobs: {len(jobs)} ({active} active), {sum(j.tokens for j in jobs):,} tokens so far "
                "(/jobs lists them)."]

    async def _tick(self, host: Host) -> None:
        """Run what is due, then sleep until the next due time, a wake-up or a second, whichever is first.
        A job missed while the gateway was down is due at the first tick, and fires once."""
        failing = False  # one warning while the store fails, not one a second
        while True:
            self._wake.clear()
            recorded = False  # nothing recorded: what is still due runs elsewhere (a task here, another replica)
            try:
                due = await host.store.due_jobs(host.bot, self.clock())
                host.metrics.jobs_due(host.bot, len(due))
                for job in due:
                    if job.kind == "task":
                        self._start_task(host, job)
                recorded = await self._remind_all(host, [job for job in due if job.kind != "task"])
                nxt = await host.store.next_due_at(host.bot)
                if not recorded and nxt is not None and nxt <= self.clock():
                    nxt = None  # look again in a second (or when woken), not at once
                failing = False
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not failing:
                    log.warning("the clock cannot run due jobs (%s); trying again every second", exc)
                failing, nxt = True, None
            wait = TICK_SECONDS
            if nxt is not None:
                wait = min(wait, max(0.0, (nxt - self.clock()).total_seconds()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def _remind_all(self, host: Host, due: list[JobRecord]) -> bool:
        """Deliver the due reminders together, `BATCH_RUNS` at a time; True when any was recorded here. One
        that raises does not stop the others; it stays due (its lease and slot make the retry safe) and its
        error is raised once they are done, for the ticker to report once while it lasts."""
        gate = asyncio.Semaphore(BATCH_RUNS)

        async def one(job: JobRecord) -> bool:
            async with gate:
                return await run_due(host, job, self.clock)

        results = await asyncio.gather(*(one(job) for job in due), return_exceptions=True)
        errors = [result for result in results if isinstance(result, BaseException)]
        if errors:
            raise errors[0]
        return any(result is True for result in results)

    def _start_task(self, host: Host, job: JobRecord) -> None:
        """A task's run beside the ticker, unless one of that job runs here already."""
        if job.id in self._running:
            return
        run = host.spawn(self._run_task(host, job), f"clock task {job.id}")
        self._running[job.id] = run
        run.add_done_callback(lambda _: self._running.pop(job.id, None))

    async def _run_task(self, host: Host, job: JobRecord) -> None:
        try:
            await run_due(host, job, self.clock)
        except asyncio.CancelledError:
            raise  # stopped: the slot stays started, recorded as interrupted by the next run
        except Exception:
            log.exception("job %s: the task's run failed", job.id)
        finally:
            self._wake.set()  # its next slot may be soon
