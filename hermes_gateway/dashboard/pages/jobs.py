"""Jobs: the clock's scheduled jobs of every bot this gateway serves, as `hermes-gateway jobs list` lists them
(those not done), and pausing, resuming, removing or running one now through the operator's own actions
(`hermes_engine.clock.operating`, which the command line uses)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from aiohttp import web

from hermes_engine.clock import operating
from hermes_engine.clock.schedule import ScheduleError, local_time, zone_named
from hermes_engine.ports.jobs import JobRecord
from hermes_engine.ports.storage import Store
from hermes_gateway.dashboard.guard import PREFIX, visitor
from hermes_gateway.dashboard.pages import Page
from hermes_gateway.dashboard.rendering import SOURCES, number, render

PER_PAGE = 50


@dataclass(frozen=True)
class JobRow:
    job: JobRecord
    next_local: str  # next due in the job's own zone
    target: str  # where it is delivered, as its owner named it or the chat it was made in


def in_zone(at: datetime | None, zone: str) -> str:
    if at is None:
        return ""
    try:
        return local_time(at, zone_named(zone))
    except ScheduleError:  # a zone the tz database here no longer knows
        return f"(zone {zone!r} unknown here)"


def target_text(job: JobRecord) -> str:
    named = job.target.get("named")
    if named:
        return str(named)
    where = ":".join(str(job.target.get(k)) for k in ("platform", "chat_id") if job.target.get(k) is not None)
    thread = job.target.get("thread_id")
    return f"{where} thread {thread}" if thread else where


async def jobs(request: web.Request, *, status: int = 200, said: str | None = None, ok: bool = True
               ) -> web.Response:
    sources = request.app[SOURCES]
    found = [job for bot in sources.bots for job in await sources.store.list_jobs(bot)]
    pages = max(1, -(-len(found) // PER_PAGE))
    page = min(number(request.query.get("page")), pages)
    rows = [JobRow(job, in_zone(job.next_due, job.timezone), target_text(job))
            for job in found[(page - 1) * PER_PAGE:page * PER_PAGE]]
    if said is None and (changed := request.query.get("changed", "")).isdigit():
        said = await _said(request, int(changed))
    return render(request, "jobs.html", status=status, page="jobs", rows=rows, said=said, ok=ok, at=page,
                  pages=pages, total=len(found))


def _now() -> datetime:
    return datetime.now(UTC)


CHANGES: dict[str, Callable[[Store, JobRecord], Awaitable[str]]] = {
    "pause": operating.pause,
    "resume": lambda store, job: operating.resume(store, job, _now()),
    "remove": operating.remove,
    "run": lambda store, job: operating.run_now(store, job, _now()),
}


async def change(request: web.Request) -> web.StreamResponse:
    """One of the operator's changes; what it says is shown on the list, and a refusal changes nothing and
    is not recorded."""
    sources, who = request.app[SOURCES], visitor(request)
    action = request.match_info["action"]
    job = await sources.store.get_job(int(request.match_info["job"]))
    if job is None or job.bot not in sources.bots:
        raise web.HTTPNotFound(text="No such job.\n")
    try:
        said = await CHANGES[action](sources.store, job)
    except operating.Refused as exc:
        return await jobs(request, status=409, said=str(exc)[:1].upper() + str(exc)[1:], ok=False)
    await sources.store.record_dashboard_change(who.admin, f"job.{action}", f"job #{job.id}", said)
    page = number(str((await request.post()).get("page", "")))
    raise web.HTTPSeeOther(f"{PREFIX}/jobs?changed={job.id}" + (f"&page={page}" if page > 1 else ""))


async def _said(request: web.Request, job_id: int) -> str | None:
    """What this admin's last change of the job said, read back from the audit (a link cannot put words on
    the page)."""
    admin = visitor(request).admin
    for entry in await request.app[SOURCES].store.dashboard_changes(limit=20):
        if entry.admin == admin and entry.subject == f"job #{job_id}":
            return entry.detail
    return None


def routes(router: web.UrlDispatcher) -> None:
    router.add_get("/jobs", jobs)
    router.add_post("/jobs/{job:\\d+}/{action:pause|resume|remove|run}", change)


PAGE = Page("jobs", routes, "Jobs", "/jobs")
