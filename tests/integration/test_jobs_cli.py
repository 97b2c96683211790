"""`hermes-gateway jobs list|show|pause|resume|remove|run` on the gateway's database, in process through typer's
runner (the command line's own code, its store and its sentences), and `run` picked up by a live gateway."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from click.testing import Result
from engine_harness import make_profile
from postgres import PG_URL, fresh_schema
from typer.testing import CliRunner

from hermes_engine.ports.jobs import JobRecord, JobSpec
from hermes_gateway.cli.main import app
from storage.store import SqlStore

BOT = "default"  # the profile `run` serves without --bot
TARGET = {"platform": "test", "account": "acct", "chat_id": "c1"}
MONDAY_9_BERLIN = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)


def jobs(*args: str, stdin: str | None = None, **env: str) -> Result:
    return CliRunner().invoke(app, ["jobs", *args], input=stdin, env={"COLUMNS": "200", **env})


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def refused(result: Result, code: int = 1) -> str:
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stdout == ""
    return result.stderr.strip()


def spec(owner: int, *, name: str = "plan the week", schedule: str = "every monday 9am", zone: str = "Europe/Berlin",
         due: datetime = MONDAY_9_BERLIN, once: bool = False, bot: str = BOT, text: str = "plan the week") -> JobSpec:
    return JobSpec(owner_id=owner, bot=bot, target=TARGET, session_key="test:acct:dm:c1", name=name,
                   schedule=schedule, timezone=zone, kind="reminder", text=text, next_due=due, once=once)


class Home:
    """The gateway's SQLite database under HERMES_HOME, as the service made it, seeded through the port."""

    def __init__(self, home: Path) -> None:
        self.url = f"sqlite+aiosqlite:///{home / 'hermes.db'}"

    def call(self, work: Any) -> Any:
        async def run() -> Any:
            store = SqlStore(self.url)
            await store.init()
            try:
                return await work(store)
            finally:
                await store.close()

        return asyncio.run(run())

    def person(self, user_id: str) -> int:
        async def work(store: SqlStore) -> int:
            return (await store.resolve_account("telegram", "acct", user_id)).person_id

        return int(self.call(work))

    def add(self, job: JobSpec) -> JobRecord:
        async def work(store: SqlStore) -> JobRecord:
            return await store.create_job(job)

        return self.call(work)  # type: ignore[no-any-return]

    def get(self, job_id: int) -> JobRecord | None:
        async def work(store: SqlStore) -> JobRecord | None:
            return await store.get_job(job_id)

        return self.call(work)  # type: ignore[no-any-return]


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    yield Home(tmp_path)  # HERMES_HOME is tmp_path (the suite's isolation)


def test_list_shows_the_bots_jobs_with_their_next_local_time_and_only_an_owners_with_owner(home):
    alice, bob = home.person("42"), home.person("43")
    week = home.add(spec(alice))
    tea = home.add(spec(bob, name="tea", schedule="in 30m", zone="UTC", due=datetime(2026, 12, 3, 16, 0, tzinfo=UTC),
                        once=True))
    home.add(spec(alice, name="another bot's", bot="slack-channel-bot"))

    listed = ok(jobs("list")).splitlines()
    assert listed == [
        f"#{week.id} 'plan the week' (every monday 9am): next Mon 7 Dec 2026, 09:00 CET (Europe/Berlin) · reminder, "
        f"owner {alice}",
        f"#{tea.id} 'tea' (in 30m): next Thu 3 Dec 2026, 16:00 UTC (UTC) · reminder, owner {bob}"]
    assert ok(jobs("list", "--owner", "telegram:43")).splitlines() == listed[1:]
    assert ok(jobs("list", "--owner", str(alice))).splitlines() == listed[:1]
    assert "another bot's" in ok(jobs("list", "--bot", "slack-channel-bot"))  # the profile under ./bots


def test_list_says_when_there_is_nothing_and_names_an_unknown_owner_in_one_sentence(home):
    alice = home.person("42")
    assert ok(jobs("list")).strip() == "Bot 'default' has no jobs."
    assert ok(jobs("list", "--owner", str(alice))).strip() == f"Bot 'default' has no jobs of person {alice}."
    assert refused(jobs("list", "--owner", "telegram:999")).startswith(
        "Error: No telegram account with user id 999 is known")


def test_show_prints_every_field_of_the_job_with_times_in_its_zone_and_in_utc(home):
    job = home.add(spec(home.person("42")))
    shown = ok(jobs("show", str(job.id)))
    names = [line.split(":", 1)[0] for line in shown.splitlines()]
    assert names == [f.name for f in dataclasses.fields(JobRecord)]  # a field added later shows up too
    assert re.search(r"^next_due: +Mon 7 Dec 2026, 09:00 CET \(Europe/Berlin\) · 2026-12-07 08:00:00 UTC$", shown,
                     re.M), shown
    assert re.search(r"^last_run_at: +-$", shown, re.M) and re.search(r"^once: +no$", shown, re.M)
    assert '"chat_id": "c1"' in shown and re.search(r"^state: +active$", shown, re.M)


def test_text_people_chose_is_shown_escaped_never_acted_on(home):
    job = home.add(spec(home.person("42"), name="\x1b[2Jwiped", text="\u202etxt.exe"))
    shown = ok(jobs("show", str(job.id)))
    assert "\x1b" not in shown and "\u202e" not in shown
    assert "\\x1b[2Jwiped" in shown and "\\u202etxt.exe" in shown
    assert "\x1b" not in ok(jobs("list"))


def test_pause_and_resume_change_the_job_and_resume_takes_the_next_slot_from_now(home):
    past_monday = datetime(2020, 1, 6, 8, 0, tzinfo=UTC)  # paused long ago: its slots since are not replayed
    job = home.add(spec(home.person("42"), due=past_monday))
    assert ok(jobs("pause", str(job.id))).strip() == f"Paused job #{job.id} 'plan the week'."
    assert home.get(job.id).state == "paused"
    assert ok(jobs("pause", str(job.id))).strip() == f"Job #{job.id} 'plan the week' is paused already."

    before = datetime.now(UTC)
    said = ok(jobs("resume", str(job.id))).strip()
    resumed = home.get(job.id)
    assert resumed.state == "active" and resumed.next_due is not None
    local = resumed.next_due.astimezone(ZoneInfo("Europe/Berlin"))
    assert (local.strftime("%A %H:%M"), local.second) == ("Monday 09:00", 0)
    assert before < resumed.next_due <= before + timedelta(days=7)
    assert said == f"Resumed job #{job.id} 'plan the week'; next {local:%a} {local.day} {local:%b %Y}, 09:00 " \
                   f"{local:%Z} (Europe/Berlin)."
    assert "is active already" in ok(jobs("resume", str(job.id)))


def test_a_resumed_one_time_job_keeps_its_time_or_fires_now_when_it_has_passed(home):
    alice = home.person("42")
    later = datetime.now(UTC) + timedelta(hours=5)
    upcoming = home.add(spec(alice, schedule="in 5h", zone="UTC", due=later, once=True))
    missed = home.add(spec(alice, schedule="in 1m", zone="UTC", due=datetime(2020, 1, 1, tzinfo=UTC), once=True))
    for job in (upcoming, missed):
        ok(jobs("pause", str(job.id)))
    before = datetime.now(UTC)
    ok(jobs("resume", str(upcoming.id)))
    ok(jobs("resume", str(missed.id)))
    assert home.get(upcoming.id).next_due == later
    fired = home.get(missed.id).next_due
    assert fired is not None and before <= fired <= datetime.now(UTC)


def test_remove_asks_first_and_deletes_the_job(home):
    job = home.add(spec(home.person("42")))
    kept = jobs("remove", str(job.id), stdin="n\n")
    assert kept.exit_code == 1 and f"Remove #{job.id} 'plan the week'" in kept.stdout
    assert home.get(job.id) is not None
    assert ok(jobs("remove", str(job.id), stdin="y\n")).strip().endswith(f"Removed job #{job.id} 'plan the week'.")
    assert home.get(job.id) is None
    assert refused(jobs("remove", str(job.id), "--yes")) == \
        f"Error: no job {job.id} (`hermes-gateway jobs list` shows them)."


def test_run_makes_a_paused_job_due_now_and_active(home):
    job = home.add(spec(home.person("42")))
    ok(jobs("pause", str(job.id)))
    before = datetime.now(UTC)
    said = ok(jobs("run", str(job.id))).strip()
    assert said == f"Job #{job.id} 'plan the week' is due now: a running gateway sends it within a second, then " \
                   f"by its schedule."
    due = home.get(job.id)
    assert due.state == "active" and due.next_due is not None and before <= due.next_due <= datetime.now(UTC)


def test_a_done_job_is_shown_but_neither_paused_resumed_nor_run(home):
    job = home.add(spec(home.person("42"), schedule="in 1m", zone="UTC", once=True))

    async def finish(store: SqlStore) -> None:
        assert await store.finish_run(job.id, MONDAY_9_BERLIN, next_due=None, outcome="delivered")

    home.call(finish)
    assert re.search(r"^state: +done$", ok(jobs("show", str(job.id))), re.M)
    assert re.search(r"^last_outcome: +delivered$", ok(jobs("show", str(job.id))), re.M)
    for command in ("pause", "resume", "run"):
        assert refused(jobs(command, str(job.id))) == \
            f"Error: job #{job.id} is done (it ran its last time), so there is nothing to {command}."
    assert home.get(job.id).state == "done"
    assert "Bot 'default' has no jobs." in ok(jobs("list"))


@pytest.mark.parametrize("command", ["show", "pause", "resume", "run"])
def test_an_unknown_job_is_one_sentence(home, command):
    home.person("42")  # the database is there
    assert refused(jobs(command, "999")) == "Error: no job 999 (`hermes-gateway jobs list` shows them)."


@pytest.mark.parametrize("args", [("list",), ("show", "1"), ("run", "1")], ids=" ".join)
def test_on_a_home_without_the_services_data_it_says_so_and_creates_nothing(args, tmp_path):
    home = tmp_path / "not-the-service-home"
    sentence = refused(jobs(*args, HERMES_HOME=str(home)), code=2)
    assert sentence == f"Error: no data at HERMES_HOME={home} (no hermes.db) — is this the service's home? Run the " \
                       "command as the service does: see deploy/README.md."
    assert not home.exists()


async def test_a_running_gateway_delivers_a_job_run_from_the_command_line_once(engine, tmp_path):
    e = await engine(profile=make_profile(name=BOT, access={"allowed_users": ["u1"]}, toolsets=["core", "clock"]),
                     home=tmp_path)
    person = (await e.store.resolve_account("test", "acct", "u1")).person_id
    job = await e.store.create_job(spec(person, name="water", schedule="every 1h", zone="UTC", text="water the plants",
                                        due=datetime.now(UTC) + timedelta(days=1)))
    before = datetime.now(UTC)
    said = await asyncio.to_thread(jobs, "run", str(job.id))
    assert said.exit_code == 0, said.output
    delivered = await e.outlet.wait_for(1, timeout=10)  # a hang guard: the ticker looks every second
    assert [d.text for d in delivered] == ["⏰ Reminder: water the plants"]
    await asyncio.sleep(1.5)  # a second look of the ticker sends nothing more
    assert e.outlet.texts == ["⏰ Reminder: water the plants"]
    ran = await e.store.get_job(job.id)
    assert ran is not None and ran.runs == 1 and ran.last_outcome == "delivered" and ran.next_due is not None
    assert before + timedelta(hours=1) <= ran.next_due <= datetime.now(UTC) + timedelta(hours=1)  # on from now


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="HERMES_TEST_POSTGRES_URL is not set (run .ci/postgres.sh)")
async def test_the_commands_work_on_the_gateways_postgresql_database(tmp_path):
    async with fresh_schema() as schema:
        store = SqlStore(PG_URL or "", engine_options={"connect_args": {"server_settings": {"search_path": schema}}})
        await store.init()
        try:
            person = (await store.resolve_account("telegram", "acct", "42")).person_id
            job = await store.create_job(spec(person))
            url = f"{PG_URL}?options=-csearch_path%3D{schema}"
            listed = await asyncio.to_thread(jobs, "list", HERMES_DATABASE_URL=url)
            assert ok(listed).startswith(f"#{job.id} 'plan the week' (every monday 9am): next Mon 7 Dec 2026")
            assert ok(await asyncio.to_thread(jobs, "pause", str(job.id), HERMES_DATABASE_URL=url))
            paused = await store.get_job(job.id)
            assert paused is not None and paused.state == "paused"
        finally:
            await store.close()
