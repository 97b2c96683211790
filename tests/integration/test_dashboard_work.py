"""The dashboard's Kanban, Jobs and Approvals pages on the real aiohttp server and a real SqlStore (SQLite, and
PostgreSQL with `-m postgres`): what each shows, and each change going through the board's and the clock's own
rules (the ones `/kanban` and `hermes-gateway jobs` use), refused with their sentence and recorded in the audit."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from test_dashboard import SCRIPT_NAME, Site, db, open_site  # noqa: F401 - `db` is the backends' fixture

from hermes_engine.clock import operating
from hermes_engine.ports.cards import CardSpec
from hermes_engine.ports.jobs import JobSpec
from storage.store import SqlStore

BIDI = "evil\u202egnp.exe"
BOT = "bot"  # the bot the site serves (`open_site`)
TARGET = {"platform": "telegram", "account": "bot", "chat_id": "4242", "chat_kind": "dm"}


@pytest.fixture
async def site(tmp_path: Path, db: str) -> AsyncIterator[Site]:  # noqa: F811 - the backends' fixture, used
    async for opened in open_site(tmp_path, db=db):
        yield opened


async def card(store: SqlStore, title: str, status: str = "todo") -> int:
    [made] = await store.create_cards([CardSpec(title=title, body="Details of " + title, profile=BOT,
                                                status=status)], actor="cli")  # type: ignore[arg-type]
    return made.id


async def failed_card(store: SqlStore, title: str) -> int:
    """A card whose only attempt failed and blocked it (the circuit breaker at one failure), with a handoff."""
    card_id = await card(store, title, "ready")
    [claimed] = await store.claim_cards(BOT, "worker-1", lease_seconds=60, max_running=5)
    assert claimed.id == card_id and claimed.claim
    await store.finish_attempt(card_id, claimed.claim, ok=False, result="the build broke",
                               handoff={"summary": "compiled twice; the linker ran out of memory"}, max_failures=1)
    return card_id


async def job(store: SqlStore, owner: int, *, name: str = "plan the week", kind: str = "reminder") -> int:
    made = await store.create_job(JobSpec(
        owner_id=owner, bot=BOT, target=TARGET, session_key="telegram:bot:dm:4242", name=name,
        schedule="every monday 9am", timezone="Europe/Berlin", kind=kind, text="plan the week",  # type: ignore[arg-type]
        next_due=datetime(2030, 1, 7, 8, 0, tzinfo=UTC), once=False))
    return made.id


async def post(site: Site, path: str, csrf: str, **form: str) -> tuple[int, str, str]:
    response = await site.client.post(path, data={"csrf": csrf, **form}, allow_redirects=False,
                                      headers={"Origin": site.origin})
    return response.status, response.headers.get("Location", ""), await response.text()


def text_of(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


# ---------------------------------------------------------------------------------------------------- Kanban


async def test_the_board_shows_every_card_in_the_column_of_its_status(site: Site) -> None:
    first = await card(site.store, "write the summary")
    second = await failed_card(site.store, "build the release")
    await site.sign_in()
    page = await (await site.client.get("/admin/kanban")).text()
    todo = page.split('id="col-todo"', 1)[1].split("</section>", 1)[0]
    blocked = page.split('id="col-blocked"', 1)[1].split("</section>", 1)[0]
    assert f"#{first} write the summary" in todo and "build the release" not in todo
    assert f"#{second} build the release" in blocked and "the build broke" in blocked
    assert [h for h in re.findall(r'id="col-(\w+)"', page)] == ["triage", "todo", "ready", "running", "blocked",
                                                              "done"]


async def test_a_card_shows_its_history_and_the_handoff_of_its_attempt(site: Site) -> None:
    card_id = await failed_card(site.store, "build the release")
    await site.sign_in()
    page = text_of(await (await site.client.get(f"/admin/kanban/{card_id}")).text())
    assert f"#{card_id} build the release blocked" in page
    assert "Details of build the release" in page and "the build broke" in page
    assert "the linker ran out of memory" in page  # the handoff
    assert "worker-1" in page and "cli created" in page  # who did what, oldest first
    assert "Retry card" in page


async def test_moving_a_card_goes_through_the_board_and_is_recorded(site: Site) -> None:
    card_id = await card(site.store, "write the summary")
    csrf = await site.sign_in()
    status, location, _ = await post(site, f"/admin/kanban/{card_id}/move", csrf, status="done", reason="did it myself")
    assert (status, location) == (303, f"/admin/kanban/{card_id}?moved")
    moved = await site.store.get_card(card_id)
    assert moved is not None and moved.status == "done" and moved.reason == "did it myself"
    last = (await site.store.card_events(card_id))[-1]
    assert (last.actor, last.kind, last.from_status, last.to_status) == ("dashboard:telegram:1", "moved", "todo", "done")
    [change] = [c for c in await site.store.dashboard_changes() if c.action == "kanban.move"]
    assert (change.admin, change.subject, change.detail) == ("telegram:1", f"card #{card_id}",
                                                             "todo → done: did it myself")
    shown = text_of(await (await site.client.get(location)).text())
    assert f"Card #{card_id} is now done." in shown  # the sentence `/kanban move` answers


async def test_a_status_the_board_does_not_know_is_refused_with_its_sentence(site: Site) -> None:
    card_id = await card(site.store, "write the summary")
    csrf = await site.sign_in()
    status, _, page = await post(site, f"/admin/kanban/{card_id}/move", csrf, status="finished")
    assert status == 422
    assert "unknown status &#39;finished&#39;; use one of triage, todo, ready, running, blocked, done, archived" in page
    unchanged = await site.store.get_card(card_id)
    assert unchanged is not None and unchanged.status == "todo"
    assert [c for c in await site.store.dashboard_changes() if c.action.startswith("kanban")] == []


async def test_retrying_a_failed_card_puts_it_back_in_ready_with_its_failures_reset(site: Site) -> None:
    card_id = await failed_card(site.store, "build the release")
    before = await site.store.get_card(card_id)
    assert before is not None and (before.status, before.failures) == ("blocked", 1)
    csrf = await site.sign_in()
    status, _, _ = await post(site, f"/admin/kanban/{card_id}/retry", csrf)
    assert status == 303
    after = await site.store.get_card(card_id)
    assert after is not None and (after.status, after.failures, after.reason) == ("ready", 0,
                                                                                  "retried from the dashboard")
    [change] = [c for c in await site.store.dashboard_changes() if c.action == "kanban.retry"]
    assert change.detail == "blocked → ready: retried from the dashboard"


async def test_a_card_title_holding_markup_and_bidi_overrides_is_shown_as_text(site: Site) -> None:
    card_id = await card(site.store, SCRIPT_NAME + BIDI)
    await site.sign_in()
    for path in ("/admin/kanban", f"/admin/kanban/{card_id}"):
        page = await (await site.client.get(path)).text()
        assert "<script>alert" not in page and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;Mallory" in page
        assert "\u202e" not in page and "evil&lt;U+202E&gt;gnp.exe" in page


async def test_an_unknown_card_is_not_found(site: Site) -> None:
    csrf = await site.sign_in()
    assert (await site.client.get("/admin/kanban/999")).status == 404
    assert (await post(site, "/admin/kanban/999/move", csrf, status="done"))[0] == 404


# ---------------------------------------------------------------------------------------------------- Jobs


async def test_jobs_show_owner_target_schedule_zone_next_due_outcome_and_tokens(site: Site) -> None:
    job_id = await job(site.store, site.person_id, name="weekly digest", kind="task")
    due = datetime(2030, 1, 7, 8, 0, tzinfo=UTC)
    await site.store.finish_run(job_id, due, next_due=due + timedelta(days=7), outcome="delivered", tokens=1234)
    await site.sign_in()
    page = text_of(await (await site.client.get("/admin/jobs")).text())
    assert f"#{job_id} weekly digest active" in page
    assert f"Owner person #{site.person_id} · bot" in page and "Target telegram:4242" in page
    assert "Schedule every monday 9am" in page and "Time zone Europe/Berlin" in page
    assert "Next due Mon 14 Jan 2030, 09:00 CET (Europe/Berlin) · 2030-01-14 08:00 UTC" in page  # the job's zone and UTC
    assert "Last outcome delivered" in page and "1,234 tokens so far" in page


async def test_pausing_and_resuming_a_job_says_what_the_command_line_says_and_is_recorded(site: Site) -> None:
    job_id = await job(site.store, site.person_id)
    csrf = await site.sign_in()
    status, location, _ = await post(site, f"/admin/jobs/{job_id}/pause", csrf)
    assert (status, location) == (303, f"/admin/jobs?changed={job_id}")
    paused = await site.store.get_job(job_id)
    assert paused is not None and paused.state == "paused"
    shown = text_of(await (await site.client.get(location)).text())
    assert f"Paused job #{job_id} 'plan the week'." in shown and "Resume job" in shown
    assert (await post(site, f"/admin/jobs/{job_id}/resume", csrf))[0] == 303
    resumed = await site.store.get_job(job_id)
    assert resumed is not None and resumed.state == "active" and resumed.next_due is not None
    assert resumed.next_due > datetime.now(UTC) and resumed.next_due.astimezone(UTC).hour in (7, 8)  # 09:00 Berlin
    changes = [(c.action, c.subject, c.detail) for c in await site.store.dashboard_changes()
               if c.action.startswith("job.")]
    assert changes == [("job.resume", f"job #{job_id}", f"Resumed job #{job_id} 'plan the week'; next "
                        f"{operating.next_text(resumed)}."),
                       ("job.pause", f"job #{job_id}", f"Paused job #{job_id} 'plan the week'.")]


async def test_running_a_job_now_makes_it_due_and_removing_it_deletes_it(site: Site) -> None:
    job_id = await job(site.store, site.person_id)
    csrf = await site.sign_in()
    assert (await post(site, f"/admin/jobs/{job_id}/run", csrf))[0] == 303
    due = await site.store.get_job(job_id)
    assert due is not None and due.next_due is not None and due.next_due <= datetime.now(UTC)
    assert (await post(site, f"/admin/jobs/{job_id}/remove", csrf))[0] == 303
    assert await site.store.get_job(job_id) is None
    assert [c.action for c in await site.store.dashboard_changes() if c.action.startswith("job.")] == \
        ["job.remove", "job.run"]


async def test_a_done_job_is_refused_with_the_command_lines_sentence_and_nothing_is_recorded(site: Site) -> None:
    job_id = await job(site.store, site.person_id)
    await site.store.set_job_state(job_id, "done")
    csrf = await site.sign_in()
    status, _, page = await post(site, f"/admin/jobs/{job_id}/run", csrf)
    assert status == 409
    assert f"Job #{job_id} is done (it ran its last time), so there is nothing to run." in text_of(page)
    assert [c for c in await site.store.dashboard_changes() if c.action.startswith("job.")] == []


async def test_a_job_of_a_bot_this_gateway_does_not_serve_is_not_found(site: Site) -> None:
    made = await site.store.create_job(JobSpec(
        owner_id=site.person_id, bot="other", target=TARGET, session_key="k", name="x", schedule="every day 9am",
        timezone="UTC", kind="reminder", text="x", next_due=datetime(2030, 1, 1, tzinfo=UTC), once=False))
    csrf = await site.sign_in()
    assert (await post(site, f"/admin/jobs/{made.id}/pause", csrf))[0] == 404
    assert (await site.store.get_job(made.id)).state == "active"  # type: ignore[union-attr]


async def test_a_job_name_holding_markup_and_bidi_overrides_is_shown_as_text(site: Site) -> None:
    await job(site.store, site.person_id, name=SCRIPT_NAME + BIDI)
    await site.sign_in()
    page = await (await site.client.get("/admin/jobs")).text()
    assert "<script>alert" not in page and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;Mallory" in page
    assert "\u202e" not in page and "evil&lt;U+202E&gt;gnp.exe" in page


# ---------------------------------------------------------------------------------------------------- Approvals


async def test_approvals_show_the_waiting_requests_and_who_answered_the_others(site: Site) -> None:
    soon = datetime.now(UTC) + timedelta(minutes=5)
    await site.store.record_approval("aaa111", BOT, "telegram:bot:dm:4242", soon, asked_by="666",
                                     command="rm -rf /srv/cache", risk="dangerous")
    await site.store.record_approval("bbb222", BOT, "telegram:bot:group:77", soon, asked_by="667",
                                     command="git push --force", risk="writes")
    assert await site.store.answer_approval("bbb222", BOT, "once", "4001")
    await site.store.record_approval("ccc333", BOT, "telegram:bot:dm:4243", soon, asked_by=SCRIPT_NAME + BIDI)
    await site.store.end_approval("ccc333")
    await site.store.record_approval("ddd444", "other", "slack:x:dm:1", soon)  # another gateway's bot
    await site.sign_in()
    raw = await (await site.client.get("/admin/approvals")).text()
    waiting = text_of(raw.split('id="waiting"', 1)[1].split("</section>", 1)[0])
    answered = text_of(raw.split('id="answered"', 1)[1].split("</section>", 1)[0])
    assert "rm -rf /srv/cache (dangerous) telegram:bot:dm:4242 (bot, request aaa111) 666" in waiting
    assert "bbb222" not in waiting
    assert "git push --force (writes) telegram:bot:group:77 (bot, request bbb222) 667" in answered
    assert re.search(r"approved once 4001 \d{4}-\d\d-\d\d \d\d:\d\d UTC", answered)  # who, and when
    assert "not recorded" in answered  # ccc333 was recorded without what it asked
    assert "ccc333" in answered and "ended without an answer" in answered
    assert "ddd444" not in raw
    assert "<script>alert" not in raw and "\u202e" not in raw and "evil&lt;U+202E&gt;gnp.exe" in raw


async def test_jobs_are_shown_fifty_to_a_page(site: Site) -> None:
    made = [await job(site.store, site.person_id, name=f"job {n}") for n in range(51)]
    await site.sign_in()
    first = text_of(await (await site.client.get("/admin/jobs")).text())
    assert f"#{made[49]} job 49 " in first and f"#{made[50]} job 50 " not in first
    assert "Page 1 of 2 (51 jobs)" in first
    second = text_of(await (await site.client.get("/admin/jobs?page=2")).text())
    assert f"#{made[50]} job 50 " in second and f"#{made[0]} job 0 " not in second
    assert text_of(await (await site.client.get("/admin/jobs?page=9")).text()).count("Page 2 of 2") == 1
    csrf = await site.sign_in()
    status, location, _ = await post(site, f"/admin/jobs/{made[50]}/pause", csrf, page="2")
    assert (status, location) == (303, f"/admin/jobs?changed={made[50]}&page=2")  # back where it was pressed
    assert f"Paused job #{made[50]} 'job 50'." in text_of(await (await site.client.get(location)).text())
