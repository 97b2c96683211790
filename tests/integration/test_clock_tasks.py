"""Scheduled tasks through the real engine on the fake LLM: the prompt runs as an agent turn in a session of
its own with a restricted toolset, its answer is delivered once and written into the chat, `[SILENT]`
delivers nothing, a failing model is told once and the job paused after three failures, a run a stop cut is
recorded as interrupted and never run again, and task runs count against the usage limits."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from engine_harness import RecordingOutlet, make_profile
from fakes.fake_llm import Reply

from hermes_engine.clock import ClockFeature
from hermes_engine.memory.feature import MemoryFeature
from hermes_engine.memory.store import FileMemoryStore, MemoryOwner
from hermes_gateway.metrics import PrometheusMetrics

TASK = "[Scheduled task #"
PROMPT = "check the news for anything about the bank"

OWNER_ALLOWED = {"allowed_users": ["u1"]}  # the jobs' owner may write in their chats


class Now:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.t = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.t


def is_task(request: Any) -> bool:
    return TASK in request.last_user_text


def scheduling(arguments: dict[str, Any], task: Any) -> Any:
    """A responder: a person's message makes one `cronjob` call with `arguments` and the model then says what
    the tool answered; a task's run is answered by `task(request)`."""
    def respond(request: Any) -> Any:
        if is_task(request):
            return task(request)
        if request.turn_tool_results:
            return Reply(text=request.turn_tool_results[-1])
        return Reply(tool_calls=[("cronjob", json.dumps(arguments))])
    return respond


async def until(predicate: Any, timeout: float = 10.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if (value := await predicate()) is not None:
            return value
        await asyncio.sleep(0.05)
    raise TimeoutError


async def made_task(e: Any, now: Now, fake_llm: Any, task: Any, **arguments: Any) -> Any:
    """Make a task `in 1h` through the tool, then move the clock to its time; the job as made."""
    create = {"action": "create", "name": "bank news", "prompt": PROMPT, "schedule": "in 1h", **arguments}
    fake_llm.responder = scheduling(create, task)
    confirmation = await e.say("every morning, check the news about my bank")
    assert confirmation.startswith("Task #"), confirmation
    [job] = await e.store.list_jobs(e.gateway.bot)
    now.t += timedelta(hours=1, seconds=1)
    return job


async def finished(e: Any, job_id: int, runs: int = 1) -> Any:
    async def ran() -> Any:
        record = await e.store.get_job(job_id)
        return record if record is not None and record.runs >= runs else None
    return await until(ran)


async def test_a_task_runs_alone_with_its_toolsets_and_its_answer_is_delivered_once_and_kept_in_the_chat(
        engine, fake_llm):
    now = Now()
    metrics = PrometheusMetrics()
    e = await engine(profile=make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock", "memory"]),
                     features=[ClockFeature(now)],
                     metrics=metrics)
    job = await made_task(e, now, fake_llm, lambda _: Reply(text="Your bank announced new opening hours.",
                                                             usage={"input": 120, "output": 30}))
    done = await finished(e, job.id)
    assert (done.state, done.last_outcome) == ("done", "delivered")
    assert done.tokens == 150
    delivered = [t for t in e.outlet.texts if "opening hours" in t]
    assert delivered == ["🗓 bank news\n\nYour bank announced new opening hours."]
    [request] = [r for r in fake_llm.requests if is_task(r)]
    assert PROMPT in request.last_user_text
    assert len([m for m in request.messages if m.get("role") == "user"]) == 1  # not the chat's conversation
    assert {t["function"]["name"] for t in request.tools} == {"current_time", "calculate", "read_document"}  # `core` only
    chat = await e.store.active_session(done.session_key, e.gateway.bot)
    assert delivered[0] in [m.content for m in await e.store.load_messages(chat.id)]
    runs = metrics.registry.get_sample_value("hermes_job_runs_total",
                                             {"bot": "testbot", "kind": "task", "outcome": "delivered"})
    assert runs == 1
    assert metrics.registry.get_sample_value("hermes_job_lateness_seconds_count",
                                             {"bot": "testbot", "kind": "task"}) == 1


async def test_a_task_names_its_toolsets_has_its_owners_memory_and_never_gets_the_clock_unless_allowed(
        engine, fake_llm, tmp_path):
    now = Now()
    memory = MemoryFeature(FileMemoryStore(tmp_path / "memories"))
    e = await engine(profile=make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock", "memory"]),
                     features=[ClockFeature(now), memory])
    job = await made_task(e, now, fake_llm, lambda _: Reply(text="[SILENT]"), toolsets=["memory"])
    await memory.book.add(MemoryOwner.person(job.owner_id), "memory", "Banks with Sparkasse Köln")
    done = await finished(e, job.id)
    [request] = [r for r in fake_llm.requests if is_task(r)]
    assert {t["function"]["name"] for t in request.tools} == {"memory"}
    assert "Banks with Sparkasse Köln" in request.system
    assert done.last_outcome == "silent"
    fake_llm.reset()
    fake_llm.responder = scheduling({"action": "create", "prompt": "x", "schedule": "in 1h", "toolsets": ["clock"]},
                                    lambda _: "")
    answer = await e.say("make a task that makes tasks")
    assert answer == "Error: a task here may use only core, memory; not clock."


async def test_a_task_run_may_not_make_jobs_unless_the_profile_allows_it(engine, fake_llm):
    now = Now()
    allowed = make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock"], clock={"allow_jobs_from_tasks": True})
    e = await engine(profile=allowed, features=[ClockFeature(now)])

    def nested(request: Any) -> Reply:
        if request.turn_tool_results:
            return Reply(text="made one")
        return Reply(tool_calls=[("cronjob", json.dumps({"action": "create", "message": "drink water",
                                                         "schedule": "in 3h"}))])
    job = await made_task(e, now, fake_llm, nested, toolsets=["core", "clock"])
    await finished(e, job.id)
    await e.idle()
    jobs = await e.store.list_jobs(e.gateway.bot)
    [made] = [j for j in jobs if j.id != job.id]
    assert (made.kind, made.target, made.session_key) == ("reminder", job.target, job.session_key)


async def test_a_task_that_answers_silent_delivers_nothing(engine, fake_llm):
    now = Now()
    e = await engine(profile=make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock"]),
                     features=[ClockFeature(now)])
    job = await made_task(e, now, fake_llm, lambda _: Reply(text="[SILENT] nothing new today"))
    before = len(e.outlet.delivered)
    done = await finished(e, job.id)
    await e.idle()
    assert done.last_outcome == "silent" and done.tokens > 0
    assert len(e.outlet.delivered) == before


async def test_a_failing_model_is_told_once_retried_with_back_off_and_paused_after_three_failures(
        engine, fake_llm):
    now = Now()
    e = await engine(profile=make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock"]),
                     features=[ClockFeature(now)])
    job = await e.store.get_job((await made_task(e, now, fake_llm, lambda _: Reply(error=400,
                                                 error_message="model is broken"))).id)
    first = await finished(e, job.id, 1)
    assert (first.state, first.failures, first.last_outcome[:8]) == ("active", 1, "failed: ")
    assert first.next_due == now.t + timedelta(seconds=30)
    now.t += timedelta(seconds=31)
    await finished(e, job.id, 2)
    now.t += timedelta(seconds=61)
    await finished(e, job.id, 3)
    await e.idle()  # the pause follows the third run's record
    third = await e.store.get_job(job.id)
    assert third.state == "paused" and third.failures == 3
    failures = [t for t in e.outlet.texts if t.startswith("⚠️")]
    paused = [t for t in e.outlet.texts if t.startswith("⏸")]
    assert len(failures) == 1 and f"#{job.id} 'bank news' failed" in failures[0]
    assert paused == [f"⏸ I paused #{job.id} 'bank news' after 3 failed runs in a row (the last: "
                      f"{third.last_outcome}). Say `/jobs resume {job.id}` to start it again."]
    asked = len([r for r in fake_llm.requests if is_task(r)])
    now.t += timedelta(hours=2)
    await asyncio.sleep(1.2)
    assert len([r for r in fake_llm.requests if is_task(r)]) == asked  # paused: no more runs


async def test_a_task_run_cut_by_a_stop_is_recorded_as_interrupted_after_the_restart_and_not_run_again(
        engine, fake_llm, tmp_path):
    now = Now()
    asked = asyncio.Event()

    async def hang(_: Any) -> Reply:
        asked.set()
        await asyncio.sleep(3600)
        return Reply(text="never")

    first = await engine(profile=make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock"]),
                         features=[ClockFeature(now)],
                         home=tmp_path)
    job = await made_task(first, now, fake_llm, hang)
    await asyncio.wait_for(asked.wait(), 10)
    started = await first.store.get_job(job.id)
    assert started is not None and started.started_due == started.next_due
    await first.stop()

    fake_llm.reset()
    fake_llm.responder = lambda _: Reply(text="ran again")
    second = await engine(profile=make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock"]),
                          features=[ClockFeature(now)],
                          home=tmp_path)
    done = await finished(second, job.id)
    await second.idle()
    assert (done.state, done.last_outcome, done.started_due) == ("done", "interrupted", None)
    assert not [r for r in fake_llm.requests if is_task(r)]
    told = [t for t in second.outlet.texts if "was interrupted" in t]
    assert len(told) == 1 and told[0].endswith("and is not run again.")


async def test_a_task_run_counts_as_a_turn_and_one_over_the_limit_is_told_and_not_run(engine, fake_llm):
    now = Now()
    profile = make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock"], limits={"turns_per_day": 1})
    e = await engine(profile=profile, features=[ClockFeature(now)])
    job = await made_task(e, now, fake_llm, lambda _: Reply(text="not asked"))  # making it was the one turn
    done = await finished(e, job.id)
    await e.idle()
    assert done.last_outcome == "refused: usage limit"
    assert not [r for r in fake_llm.requests if is_task(r)]
    assert e.outlet.texts[-1].startswith(f"The scheduled task #{job.id} 'bank news' did not run: You have reached "
                                         "your daily limit of 1 turn.")


async def test_an_admins_task_run_is_not_held_to_the_usage_limits_as_their_turns_are_not(engine, fake_llm):
    now = Now()
    profile = make_profile(access={"admins": ["u1"]}, toolsets=["core", "clock"], limits={"turns_per_day": 1})
    e = await engine(profile=profile, features=[ClockFeature(now)])
    job = await made_task(e, now, fake_llm, lambda _: Reply(text="Rates are unchanged."))
    done = await finished(e, job.id)
    assert done.last_outcome == "delivered"
    assert [r for r in fake_llm.requests if is_task(r)]
    assert e.outlet.texts[-1].endswith("Rates are unchanged.")


async def test_forgetting_the_owner_removes_the_sessions_of_their_task_runs_and_what_the_runs_said(
        engine, fake_llm):
    now = Now()
    e = await engine(profile=make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock"]),
                     features=[ClockFeature(now)])
    job = await made_task(e, now, fake_llm, lambda _: Reply(text="Rates are unchanged."))
    await finished(e, job.id)
    await e.idle()
    run = await e.store.active_session(f"job:{job.id}", e.gateway.bot)
    assert any("Rates are unchanged." in str(m.content) for m in await e.store.load_messages(run.id))

    forgotten = await e.store.forget_person(job.owner_id)
    assert forgotten is not None and f"job:{job.id}" in forgotten.session_keys and forgotten.jobs == 1
    assert await e.store.get_session(run.id) is None
    assert await e.store.get_job(job.id) is None


class FlakyOutlet(RecordingOutlet):
    """The test platform, refusing the first `failures` sends of a task's answer (a 502), then accepting."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.keys: list[str | None] = []

    async def send(self, target: Any, text: str, *, idempotency_key: str | None = None) -> None:
        if text.startswith("🗓"):
            self.keys.append(idempotency_key)
            if self.failures:
                self.failures -= 1
                raise RuntimeError("502 Bad Gateway")
        await super().send(target, text, idempotency_key=idempotency_key)


async def test_an_answer_that_could_not_be_delivered_is_retried_alone_without_running_the_agent_again(
        engine, fake_llm):
    now = Now()
    e = await engine(profile=make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock"]),
                     features=[ClockFeature(now)])
    e.outlet = flaky = FlakyOutlet(failures=1)
    e.gateway.attach(flaky)
    job = await made_task(e, now, fake_llm, lambda _: Reply(text="Rates are unchanged.", usage={"input": 10,
                                                                                                 "output": 5}))
    failed = await finished(e, job.id)
    assert failed.last_outcome == "not delivered: 502 Bad Gateway" and failed.state == "active"
    assert failed.undelivered == "🗓 bank news\n\nRates are unchanged." and failed.tokens == 15

    now.t += timedelta(seconds=31)  # its retry
    done = await finished(e, job.id, runs=2)
    assert (done.state, done.last_outcome, done.undelivered) == ("done", "delivered", None)
    assert len([r for r in fake_llm.requests if is_task(r)]) == 1  # the agent ran once
    assert [t for t in flaky.texts if t.startswith("🗓")] == ["🗓 bank news\n\nRates are unchanged."]
    assert len(set(flaky.keys)) == 1  # both attempts under the key of the slot the answer was made for
    assert done.tokens == 15
