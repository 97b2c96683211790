"""`cronjob update|run`, `repeat` and `deliver`, and `/jobs`, through the real engine on the fake LLM: a job
changed or made due says when it fires next in the person's time, and only its owner may touch it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from engine_harness import make_profile
from fakes.fake_llm import Reply

from hermes_engine.clock import ClockFeature

OWNER_ALLOWED = {"allowed_users": ["u1"]}  # the jobs' owner may write in their chats


class Now:
    def __init__(self) -> None:
        self.t = datetime(2026, 12, 7, 7, 0, tzinfo=UTC)  # Mon 7 Dec, 08:00 in Berlin

    def __call__(self) -> datetime:
        return self.t


def calling(arguments: dict[str, Any]) -> Any:
    """A responder: one `cronjob` call with `arguments`, then the model says what the tool answered."""
    def respond(request: Any) -> Reply:
        if request.turn_tool_results:
            return Reply(text=request.turn_tool_results[-1])
        return Reply(tool_calls=[("cronjob", json.dumps(arguments))])
    return respond


async def clock_engine(engine: Any, now: Now) -> Any:
    e = await engine(profile=make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock"]),
                     features=[ClockFeature(now)])
    assert (await e.say("/timezone Europe/Berlin")).startswith("Your time zone is now Europe/Berlin")
    return e


async def ask(e: Any, fake_llm: Any, text: str = "do it", **arguments: Any) -> str:
    fake_llm.reset()
    fake_llm.responder = calling(arguments)
    return await e.say(text)


async def test_an_update_changes_the_schedule_and_confirms_the_next_time_locally(engine, fake_llm):
    now = Now()
    e = await clock_engine(engine, now)
    made = await ask(e, fake_llm, action="create", message="stretch", schedule="every day at 9am")
    assert made == ("Reminder #1 set: it fires Mon 7 Dec 2026, 09:00 CET (Europe/Berlin), then every day at 9am.")
    updated = await ask(e, fake_llm, action="update", job_id="1", schedule="weekdays at 17:30", message="walk")
    assert updated == "Updated #1 'stretch': it fires next Mon 7 Dec 2026, 17:30 CET (Europe/Berlin)."
    job = await e.store.get_job(1)
    assert job is not None
    assert (job.schedule, job.text, job.next_due) == ("weekdays at 17:30", "walk", datetime(2026, 12, 7, 16, 30,
                                                                                             tzinfo=UTC))
    assert (await ask(e, fake_llm, action="update", job_id="1", prompt="think")).startswith(
        "Error: #1 is a reminder: change its text with message, not prompt.")
    assert (await ask(e, fake_llm, action="update", job_id="1", schedule="every 1m")).startswith(
        "Error: A recurring job can fire at most once every 5 minutes")
    assert (await e.store.get_job(1)).schedule == "weekdays at 17:30"  # type: ignore[union-attr]
    assert (await ask(e, fake_llm, action="update", job_id="1", toolsets=["core"])) == (
        "Error: #1 is a reminder: it runs no tools.")


async def test_an_update_gives_a_task_other_toolsets_the_profile_offers(engine, fake_llm):
    e = await clock_engine(engine, Now())
    await ask(e, fake_llm, action="create", prompt="summarise the news", schedule="every day at 7am")
    assert (await ask(e, fake_llm, action="update", job_id="1", toolsets=["core"])).startswith("Updated #1")
    assert (await e.store.get_job(1)).toolsets == ("core",)  # type: ignore[union-attr]
    assert await ask(e, fake_llm, action="update", job_id="1", toolsets=["terminal"]) == (
        "Error: a task here may use only core; not terminal.")


async def test_run_makes_a_job_due_now_and_it_follows_its_schedule_after(engine, fake_llm):
    now = Now()
    e = await clock_engine(engine, now)
    await ask(e, fake_llm, action="create", message="stretch", schedule="every day at 9am")
    assert await ask(e, fake_llm, action="run", job_id="1") == "#1 'stretch' runs now."
    await e.outlet.wait_for(len(e.outlet.delivered) + 1)
    assert e.outlet.texts[-1] == "⏰ Reminder: stretch"
    job = await e.store.get_job(1)
    assert job is not None and job.runs == 1
    assert job.next_due == datetime(2026, 12, 7, 8, 0, tzinfo=UTC)  # today's 09:00 in Berlin, as before


async def test_repeat_fires_a_recurring_job_that_many_times_then_it_is_done(engine, fake_llm):
    now = Now()
    e = await clock_engine(engine, now)
    made = await ask(e, fake_llm, action="create", message="drink", schedule="every 2h", repeat=2)
    assert made.endswith("then every 2h, 2 times in all.")
    for n in (1, 2):
        now.t += timedelta(hours=2, seconds=1)
        await e.outlet.wait_for(len([d for d in e.outlet.delivered]) + 1)
        assert e.outlet.texts[-1] == "⏰ Reminder: drink"
        job = await e.store.get_job(1)
        assert job is not None and job.runs == n
    assert job.state == "done" and job.next_due is None
    assert (await ask(e, fake_llm, action="create", message="x", schedule="in 1h", repeat=3)).startswith(
        "Error: 'in 1h' fires once")


async def test_a_job_for_another_chat_on_a_platform_naming_no_chats_is_refused_in_one_sentence(engine, fake_llm):
    e = await clock_engine(engine, Now())
    answer = await ask(e, fake_llm, action="create", message="hi all", schedule="in 1h", deliver="telegram:-100")
    assert answer == "Error: I cannot post in telegram:-100: the test adapter cannot tell whether I am in a chat."
    assert await e.store.list_jobs(e.gateway.bot) == []


async def test_slash_jobs_lists_with_local_times_and_tokens_and_acts_on_the_persons_own_jobs(engine, fake_llm):
    now = Now()
    e = await clock_engine(engine, now)
    await ask(e, fake_llm, action="create", message="stretch", schedule="every day at 9am")
    await ask(e, fake_llm, action="create", name="digest", prompt="summarise the news", schedule="every day at 7am")
    listing = await e.say("/jobs")
    assert listing.splitlines()[:2] == [
        "#1 'stretch' (every day at 9am): next Mon 7 Dec 2026, 09:00 CET (Europe/Berlin)",
        "#2 'digest' (every day at 7am): next Tue 8 Dec 2026, 07:00 CET (Europe/Berlin); task, 0 tokens so far"]
    assert "Scheduled jobs: 2 (2 active), 0 tokens so far (/jobs lists them)." in (await e.say("/status")).splitlines()
    assert await e.say("/jobs pause 2") == "Paused #2 'digest'."
    assert "[paused]" in (await e.say("/jobs")).splitlines()[1]
    assert await e.say("/jobs run 2") == "#2 'digest' is paused: resume it first (`/jobs resume 2`)."
    assert await e.say("/jobs resume 2") == "Resumed #2 'digest'; next Tue 8 Dec 2026, 07:00 CET (Europe/Berlin)."
    assert await e.say("/jobs remove 1", user="mallory", chat="mallory-dm") == "You have no job 1."
    assert await e.say("/jobs", user="mallory", chat="mallory-dm") == (
        "No scheduled jobs.\n\n`/jobs` lists your jobs; `/jobs pause|resume|remove|run ID` acts on one.")
    assert await e.say("/jobs remove 1") == "Removed #1 'stretch'."
    assert [j.id for j in await e.store.list_jobs(e.gateway.bot)] == [2]
    assert await e.say("/jobs explode 2") == "`/jobs` lists your jobs; `/jobs pause|resume|remove|run ID` acts on one."
