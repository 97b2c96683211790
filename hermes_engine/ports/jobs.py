"""The clock's storage role: scheduled jobs (reminders, tasks) and each person's time zone. Part of
`ports.storage.Store`; kept in a module of its own as `cards.py` is."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

JobKind = Literal["reminder", "task"]
JobState = Literal["active", "paused", "done", "failed"]
CatchUp = Literal["once", "skip"]


@dataclass(frozen=True)
class JobSpec:
    """A scheduled job as its owner made it (`cronjob create`)."""

    owner_id: int  # the person who made it: they may list, pause and remove it, and /forget removes it
    bot: str
    target: dict[str, Any]  # where it is delivered (`ReplyTarget.to_dict`)
    session_key: str  # the conversation of that target, where what was delivered is written
    name: str
    schedule: str  # as the owner wrote it, e.g. "every monday 9am"
    timezone: str  # the IANA zone its recurrence is computed in
    kind: JobKind
    text: str  # a reminder's fixed text, a task's prompt
    next_due: datetime
    once: bool  # fires once, then is done
    catch_up: CatchUp = "once"  # a slot missed while down: fire once at the next start, or skip it
    runs_left: int | None = None  # `repeat`: fire this many times, then done (None: as the schedule says)
    toolsets: tuple[str, ...] | None = None  # a task's toolsets (None: the profile's `clock.task_toolsets`)


@dataclass(frozen=True)
class JobChanges:
    """What `cronjob update` changes; None leaves a field as it is."""

    name: str | None = None
    text: str | None = None
    schedule: str | None = None
    next_due: datetime | None = None  # set with `schedule` (recomputed from it)
    once: bool | None = None
    runs_left: int | None = None
    toolsets: tuple[str, ...] | None = None
    target: dict[str, Any] | None = None  # set with `session_key`: where it is delivered now
    session_key: str | None = None


@dataclass(frozen=True)
class JobRecord:
    id: int
    owner_id: int
    bot: str
    target: dict[str, Any]
    session_key: str
    name: str
    schedule: str
    timezone: str
    kind: JobKind
    text: str
    state: JobState
    next_due: datetime | None  # None once done
    once: bool
    catch_up: CatchUp
    failures: int  # failed runs in a row
    runs: int
    last_due: datetime | None  # the slot of the last run
    last_run_at: datetime | None
    last_outcome: str | None  # "delivered" | "silent" | "interrupted" | "failed: ..." | "not delivered: ..." | ...
    created_at: datetime
    tokens: int = 0  # what its task runs spent so far, input and output
    started_due: datetime | None = None  # the slot a task run started and has not recorded (a crash cut it)
    runs_left: int | None = None
    toolsets: tuple[str, ...] | None = None
    undelivered: str | None = None  # a task's answer produced and not delivered: its delivery is retried alone
    undelivered_due: datetime | None = None  # the slot it was produced for (its idempotency key)


class ScheduledJobs(Protocol):
    """Reminders and scheduled tasks (the clock), and each person's time zone. A run is taken by whoever
    holds the job's lease (`ports.leases.job_lease`) and recorded by `finish_run`, which compares and sets
    `next_due`: a run recorded once is never recorded, nor delivered, again."""

    async def create_job(self, spec: JobSpec) -> JobRecord: ...

    async def get_job(self, job_id: int) -> JobRecord | None: ...

    async def list_jobs(self, bot: str, *, owner_id: int | None = None) -> list[JobRecord]:
        """The bot's jobs that are not done (an owner's only, with `owner_id`), oldest first."""

    async def due_jobs(self, bot: str, now: datetime, *, limit: int = 100) -> list[JobRecord]:
        """Active jobs whose `next_due` is at or before `now`, soonest first."""

    async def next_due_at(self, bot: str) -> datetime | None:
        """When the bot's next active job is due (None: none is)."""

    async def set_job_state(self, job_id: int, state: JobState, *, next_due: datetime | None = None) -> bool:
        """Pause, resume (with the `next_due` computed from now; a kept undelivered answer is dropped, stale by
        then) or end a job; False for an unknown one."""

    async def delete_job(self, job_id: int) -> bool: ...

    async def update_job(self, job_id: int, changes: JobChanges) -> JobRecord | None:
        """Change what `changes` sets; the job as it is now, None for an unknown one."""

    async def start_run(self, job_id: int, due: datetime) -> bool:
        """Mark slot `due` as started, before a task's model is called, if the job is active at that slot
        and no run started it: False otherwise (nothing changes). A start never recorded (`started_due`
        still that slot) was cut by a crash: the next run records it as interrupted instead of running it."""

    async def finish_run(self, job_id: int, due: datetime, *, next_due: datetime | None, outcome: str,
                         failed: bool = False, tokens: int = 0,
                         undelivered: tuple[str, datetime] | None = None) -> bool:
        """Record the run of slot `due` if the job is still at that slot: `next_due` becomes the next slot
        (None: the job is done), failures count up (`failed`) or start again, a run that did not fail uses
        one of `runs_left`, `tokens` are added to the job's and the start mark is cleared; `undelivered`
        (an answer and the slot it was produced for) is kept for its delivery to be retried, and cleared
        otherwise. False when another run recorded it first (nothing changes)."""

    async def person_timezone(self, person_id: int) -> str | None:
        """The IANA zone the person chose (`/timezone`), None when they did not."""

    async def set_person_timezone(self, person_id: int, zone: str) -> None: ...

