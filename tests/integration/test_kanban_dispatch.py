"""The kanban dispatcher and its workers through the real gateway, the real SDKs and the fake LLM, on SQLite
and PostgreSQL. Requests are routed by their system prompt: a worker's starts with the worker prompt."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from engine_harness import RecordingOutlet, fake_llm_environment, goal_script, make_profile, verdict
from fakes.fake_llm import Reply
from kanban_kit import QUIET_BOARD, database
from postgres import BACKENDS

from hermes_engine.config import KanbanSettings, Settings, UsageLimitSettings
from hermes_engine.core.gateway import Gateway
from hermes_engine.kanban.feature import SERVICE as KANBAN
from hermes_engine.kanban.worker import WORKER_SYSTEM
from hermes_engine.ports.inbound import ChatKind, InboundMessage, ReplyTarget
from hermes_engine.ports.storage import CardRecord, CardSpec, CardUsage
from hermes_gateway.wiring import build_gateway
from storage.store import SqlStore

pytestmark = pytest.mark.parametrize("backend", BACKENDS)

FAST = KanbanSettings(tick_seconds=0.2, lease_seconds=2.0)
TARGET = ReplyTarget("test", "acct", "c1")


def is_worker(request) -> bool:
    return request.system.startswith(WORKER_SYSTEM.splitlines()[0])


def tool_results(request) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


def card_of(request) -> int:
    text = next(m["content"] for m in request.messages if m["role"] == "user")
    return int(text.split("Card #", 1)[1].split(":", 1)[0])


class Board:
    """A started gateway with the kanban feature on the backend's database, and its recording outlet."""

    def __init__(self, gateway: Gateway, store: SqlStore, outlet: RecordingOutlet) -> None:
        self.gateway, self.store, self.outlet = gateway, store, outlet

    async def add(self, *specs: CardSpec) -> list[CardRecord]:
        cards = await self.store.create_cards(list(specs), actor="test")
        feature = self.gateway.services.get(KANBAN)
        feature.dispatcher.poke()
        return cards

    async def until(self, card_id: int, done: Callable[[CardRecord], bool], timeout: float = 30.0) -> CardRecord:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            card = await self.store.get_card(card_id)
            if card is not None and done(card):
                return card
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"card {card_id} is still {card.status if card else 'missing'}")
            await asyncio.sleep(0.05)

    async def told(self, start: str, timeout: float = 20.0) -> str:
        """The first message the conversation was told that starts with `start` (waits for it)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not (found := [d.text for d in self.outlet.delivered if d.text.startswith(start)]):
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"never told {start!r}: {[d.text for d in self.outlet.delivered]}")
            await asyncio.sleep(0.05)
        return found[0]

    async def say(self, text: str) -> str:
        before = len(self.outlet.delivered)
        await self.gateway.handle(InboundMessage(platform="test", account="acct", chat_kind=ChatKind.DM,
                                                 chat_id="c1", user_id="u1", user_name="u1", text=text,
                                                 message_id=f"m-{text[:20]}-{before}"))
        await self.outlet.wait_for(before + 1, 20)
        return self.outlet.delivered[before].text


@pytest.fixture
async def open_board(backend, tmp_path, fake_llm, monkeypatch):
    """Start a gateway on the test's database; several calls = several processes sharing the board."""
    for name, value in fake_llm_environment(fake_llm).items():
        monkeypatch.setenv(name, value)
    started: list[Board] = []
    async with database(backend, tmp_path) as make:
        async def start(settings: KanbanSettings = FAST, **profile_fields: Any) -> Board:
            store = make()
            await store.init()
            profile = make_profile(toolsets=["core", "test", "kanban"], kanban=settings, **profile_fields)
            gateway = build_gateway(Settings(home=tmp_path), profile, store)
            outlet = RecordingOutlet("test")
            gateway.attach(outlet)
            await gateway.start()
            started.append(Board(gateway, store, outlet))
            return started[-1]

        try:
            yield start
        finally:
            for b in reversed(started):
                await b.gateway.stop()
                await b.store.close()


@pytest.fixture
async def board(open_board):
    return await open_board()


def completing(result: str = "finished it") -> Callable[[Any], Reply]:
    def respond(request: Any) -> Reply:
        if not tool_results(request):
            return Reply(tool_calls=[("kanban_complete", {"card_id": card_of(request), "result": result})])
        return Reply(text="Done.")
    return respond


async def test_a_ready_card_is_run_by_a_worker_and_its_conversation_is_told(board, fake_llm):
    fake_llm.responder = completing("the answer is 42")
    [card] = await board.add(CardSpec("compute the answer", status="ready", profile="testbot",
                                      origin={"reply": TARGET.to_dict()}))
    done = await board.until(card.id, lambda c: c.status == "done")
    assert done.result == "the answer is 42"
    told = await board.told(f"✅ Card #{card.id} done")
    assert "the answer is 42" in told and await board.told("▶️ Started: compute the answer")
    worker_requests = [r for r in fake_llm.requests if is_worker(r)]
    assert "compute the answer" in worker_requests[0].last_user_text


async def test_a_worker_trying_to_change_another_card_is_refused(board, fake_llm):
    other, mine = await board.add(CardSpec("someone else's", status="blocked", profile="testbot"),
                                  CardSpec("mine", status="ready", profile="testbot"))

    def respond(request):
        results = tool_results(request)
        if not results:
            return Reply(tool_calls=[("kanban_complete", {"card_id": other.id, "result": "hijacked"}),
                                     ("kanban_heartbeat", {"card_id": other.id, "note": "x"})])
        if len(results) == 2:
            return Reply(tool_calls=[("kanban_complete", {"card_id": mine.id, "result": "mine is done"})])
        return Reply(text="ok")

    fake_llm.responder = respond
    await board.until(mine.id, lambda c: c.status == "done")
    refusal = f"worker is scoped to task {mine.id}; refusing to mutate {other.id}"
    second = [r for r in fake_llm.requests if is_worker(r) and len(tool_results(r)) == 2][0]
    assert all(refusal in text for text in tool_results(second))
    untouched = await board.store.get_card(other.id)
    assert untouched.status == "blocked" and untouched.result is None
    assert [e.kind for e in await board.store.card_events(other.id)] == ["created"]


async def test_a_worker_reads_the_card_it_depends_on_but_not_an_unrelated_one(board, fake_llm):
    fake_llm.responder = completing("three parts")
    [outline] = await board.add(CardSpec("the outline", status="ready", profile="testbot", origin={"person": 2}))
    await board.until(outline.id, lambda c: c.status == "done")
    [private] = await board.store.create_cards([CardSpec("Alice's private plan", body="leave in May",
                                                         status="blocked", profile="testbot",
                                                         origin={"person": 1})],
                                               actor="test")

    def respond(request):
        if not tool_results(request):
            return Reply(tool_calls=[("kanban_show", {"card_id": private.id}), ("kanban_show", {"card_id": outline.id})])
        if len(tool_results(request)) == 2:
            return Reply(tool_calls=[("kanban_complete", {"card_id": card_of(request), "result": "written"})])
        return Reply(text="ok")

    fake_llm.responder = respond
    [chapters] = await board.add(CardSpec("the chapters", status="ready", profile="testbot", origin={"person": 2},
                                          depends_on=(outline.id,)))
    await board.until(chapters.id, lambda c: c.status == "done")
    refused, read = tool_results([r for r in fake_llm.requests if is_worker(r) and len(tool_results(r)) == 2][0])
    assert refused == (f"Error: no card {private.id} among those this worker may read: its own (#{chapters.id}), "
                       "the cards it depends on and its parts.")
    assert (json.loads(read)["id"], json.loads(read)["result"]) == (outline.id, "three parts")


async def test_a_worker_that_split_its_card_reads_its_parts(board, fake_llm):
    def respond(request):
        results, card_id, prompt = tool_results(request), card_of(request), request.last_user_text
        if results and (card_id != parent.id or "Result of your part" not in prompt or len(results) > 1):
            return Reply(text="ok")
        if card_id != parent.id:
            return Reply(tool_calls=[("kanban_complete", {"card_id": card_id, "result": f"did {card_id}"})])
        if "Result of your part" not in prompt:
            return Reply(tool_calls=[("kanban_complete", {"card_id": card_id, "result": "split",
                                                           "children": ["part one"]})])
        if not results:
            part = int(prompt.split("Result of your part #", 1)[1].split(" ", 1)[0])
            return Reply(tool_calls=[("kanban_show", {"card_id": part})])
        return Reply(tool_calls=[("kanban_complete", {"card_id": card_id, "result": "combined"})])

    fake_llm.responder = respond
    [parent] = await board.add(CardSpec("big job", status="ready", profile="testbot"))
    await board.until(parent.id, lambda c: c.status == "done")
    [part] = await board.store.list_cards(parent_id=parent.id)
    [shown] = [tool_results(r)[0] for r in fake_llm.requests
               if is_worker(r) and card_of(r) == parent.id and "Result of your part" in r.last_user_text
               and len(tool_results(r)) == 1]
    assert (json.loads(shown)["id"], json.loads(shown)["result"]) == (part.id, f"did {part.id}")


async def test_a_card_id_given_as_a_string_finishes_the_card_with_the_result_passed(board, fake_llm):
    def respond(request):
        if not tool_results(request):
            return Reply(tool_calls=[("kanban_complete", {"card_id": str(card_of(request)), "result": "the real result"})])
        return Reply(text="Finished the card.")

    fake_llm.responder = respond
    [card] = await board.add(CardSpec("answer", status="ready", profile="testbot"))
    done = await board.until(card.id, lambda c: c.status == "done")
    assert done.result == "the real result"


@pytest.mark.parametrize(("arguments", "named"), [
    ({"card_id": "one", "result": "r"},
     '- card_id: should be a valid integer, unable to parse string as an integer (given "one")'),
    ({}, "- result: required, but missing"),
    ({"result": "r", "status": "done"}, "- status: not an argument of kanban_complete (it takes card_id, result, "
                                        "children)"),
])
async def test_a_kanban_complete_whose_arguments_do_not_fit_is_refused_naming_them_and_the_card_is_unchanged(
        board, fake_llm, arguments, named):
    seen: dict[str, Any] = {}

    async def respond(request):
        if not tool_results(request):
            return Reply(tool_calls=[("kanban_complete", {"card_id": card_of(request), **arguments})])
        if "error" not in seen:
            card = await board.store.get_card(card_of(request))
            seen.update(error=tool_results(request)[0], card=card, events=await board.store.card_events(card.id))
            return Reply(tool_calls=[("kanban_complete", {"card_id": card.id, "result": "second try"})])
        return Reply(text="Finished the card.")

    fake_llm.responder = respond
    [card] = await board.add(CardSpec("answer", status="ready", profile="testbot"))
    done = await board.until(card.id, lambda c: c.status == "done")
    assert seen["error"] == f"Error: kanban_complete was not called, as its arguments do not fit its schema:\n{named}"
    assert seen["card"].status == "running" and seen["card"].result is None
    assert "completed" not in [e.kind for e in seen["events"]]
    assert done.result == "second try"


async def test_a_worker_failing_twice_blocks_its_card_and_the_retry_saw_the_first_error(board, fake_llm):
    fake_llm.responder = lambda request: Reply(error=400, error_message="the model refused this card")
    [card] = await board.add(CardSpec("doomed", status="ready", profile="testbot",
                                      origin={"reply": TARGET.to_dict()}))
    blocked = await board.until(card.id, lambda c: c.status == "blocked")
    assert blocked.attempts == 2
    assert "2 failed attempts" in blocked.reason and "the model refused this card" in blocked.reason
    prompts = [r.last_user_text for r in fake_llm.requests if is_worker(r)]
    assert "Earlier attempts failed" not in prompts[0]
    assert "Earlier attempts failed" in prompts[-1] and "the model refused this card" in prompts[-1]
    await board.told(f"⛔ Card #{card.id} blocked")


async def test_a_card_whose_conversation_is_gone_still_finishes_and_shows_on_the_board(board, fake_llm):
    fake_llm.responder = completing("done without anyone watching")
    gone = ReplyTarget("vanished-platform", "acct", "deleted-chat")
    person = (await board.store.resolve_account("test", "acct", "u1")).person_id  # the one who asks for /kanban
    [card] = await board.add(CardSpec("orphan", status="ready", profile="testbot", origin={"reply": gone.to_dict()},
                                      owner_id=person))
    done = await board.until(card.id, lambda c: c.status == "done")
    assert done.result == "done without anyone watching"
    listing = await board.say("/kanban list")
    assert f"#{card.id} orphan" in listing.split("done", 1)[1]


async def test_the_agent_splits_a_task_into_cards_and_the_dependant_runs_after_its_dependency(board, fake_llm):
    order: list[int] = []

    def respond(request):
        if is_worker(request):
            if not tool_results(request):
                order.append(card_of(request))
                return Reply(tool_calls=[("kanban_complete", {"card_id": card_of(request),
                                                               "result": f"result {card_of(request)}"})])
            return Reply(text="ok")
        if not tool_results(request):
            return Reply(tool_calls=[("kanban", {"tasks": ["write the outline", "write the chapters"],
                                                  "dependencies": ["2:1"]})])
        return Reply(text="I put it on the board.")

    fake_llm.responder = respond
    await board.say("write me a book")  # the first card may be told before the turn's own answer
    first, second = await board.store.list_cards(profile="testbot")
    assert second.depends_on == (first.id,)
    await board.until(second.id, lambda c: c.status == "done")
    assert order == [first.id, second.id]
    second_prompt = [r.last_user_text for r in fake_llm.requests if is_worker(r) and card_of(r) == second.id][0]
    assert f"result {first.id}" in second_prompt  # the dependency's result is in the dependant's context
    await board.told("🏁 All 2 cards")
    told = [d.text for d in board.outlet.delivered]
    assert "I put it on the board." in told
    finished = [i for i, t in enumerate(told) if t.startswith(f"✅ Card #{second.id} done")]
    everything = [i for i, t in enumerate(told) if t == "🏁 All 2 cards of this request are done."]
    assert len(finished) == 1 and everything == [finished[0] + 1]  # once, after the last card's own message


async def test_a_second_batch_in_the_same_chat_is_told_when_its_own_cards_are_done(board, fake_llm):
    asked = {"an old errand": ["an old errand"], "two new errands": ["first new errand", "second new errand"]}

    def respond(request):
        if is_worker(request):
            if "an old errand" in request.last_user_text:
                return Reply(error=400, error_message="the model refused this card")
            return completing()(request)
        if request.messages[-1]["role"] == "user":  # not the tool's answer, which ends the turn
            tasks = asked[request.last_user_text]
            return Reply(tool_calls=[("kanban", {"tasks": tasks, "dependencies": ["2:1"] if len(tasks) > 1 else []})])
        return Reply(text="On the board.")

    fake_llm.responder = respond
    await board.say("an old errand")
    [old] = await board.store.list_cards(profile="testbot")
    await board.until(old.id, lambda c: c.status == "blocked")  # left there: the chat never clears it
    await board.say("two new errands")
    first, second = [c for c in await board.store.list_cards(profile="testbot") if c.id != old.id]
    await board.until(second.id, lambda c: c.status == "done")
    await board.told("🏁")
    await asyncio.sleep(0.5)  # a second 🏁, if any, would have come by now
    assert [t for t in board.outlet.texts if t.startswith("🏁")] == ["🏁 All 2 cards of this request are done."]


async def test_a_cycle_from_the_agent_is_refused_with_a_clear_error(board, fake_llm):
    def respond(request):
        if not tool_results(request):
            return Reply(tool_calls=[("kanban", {"tasks": ["a", "b"], "dependencies": ["1:2", "2:1"]})])
        return Reply(text="noted")

    fake_llm.responder = respond
    await board.say("plan it")
    result = tool_results(fake_llm.requests[-1])[0]
    assert "cycle" in result and result.startswith("Error")
    assert await board.store.list_cards() == []


async def test_kanban_command_adds_shows_moves_and_cancels_cards(open_board):
    board = await open_board(QUIET_BOARD)  # no dispatcher: the card stays where the commands put it
    added = await board.say("/kanban add buy milk: two litres")
    card_id = int(added.split("#")[1].split(":")[0])
    card = await board.store.get_card(card_id)
    assert (card.title, card.body, card.status) == ("buy milk", "two litres", "todo")
    moved = await board.say(f"/kanban block #{card_id} waiting for the shop")
    assert moved == f"Card #{card_id} is now blocked."
    shown = await board.say(f"/kanban show {card_id}")
    assert "waiting for the shop" in shown and "blocked" in shown
    assert "unknown status" in await board.say(f"/kanban move {card_id} sideways")
    await board.say(f"/kanban cancel {card_id}")
    assert (await board.store.get_card(card_id)).status == "archived"
    assert "buy milk" not in await board.say("/kanban")


async def test_two_gateways_on_one_database_run_each_card_once(open_board, fake_llm):
    fake_llm.responder = completing()
    first = await open_board()
    second = await open_board()
    cards = await first.add(*(CardSpec(f"card {i}", status="ready", profile="testbot") for i in range(8)))
    second.gateway.services.get(KANBAN).dispatcher.poke()
    for card in cards:
        await first.until(card.id, lambda c: c.status == "done")
    for card in cards:
        kinds = [e.kind for e in await first.store.card_events(card.id)]
        assert kinds.count("claimed") == 1 and kinds.count("completed") == 1
    runs = [card_of(r) for r in fake_llm.requests if is_worker(r) and not tool_results(r)]
    assert sorted(runs) == sorted(c.id for c in cards)


async def test_a_goal_card_runs_until_the_judge_says_done(board, fake_llm):
    respond, counts = goal_script([verdict("continue", "half way"), verdict("done", "all counted")])
    fake_llm.responder = respond
    [card] = await board.add(CardSpec("count every star", status="ready", profile="testbot", goal_mode=True))
    done = await board.until(card.id, lambda c: c.status == "done")
    assert counts == {"judge": 2, "worker": 2}
    assert done.result == "worked step 2" and done.attempts == 1


async def test_a_goal_card_the_judge_finds_blocked_is_blocked_with_the_reason(board, fake_llm):
    respond, _counts = goal_script([verdict("blocked", "needs the admin password")])
    fake_llm.responder = respond
    [card] = await board.add(CardSpec("rotate the keys", status="ready", profile="testbot", goal_mode=True))
    blocked = await board.until(card.id, lambda c: c.status == "blocked")
    assert "needs the admin password" in blocked.result


async def test_a_triage_card_is_split_by_the_model_into_dependent_cards(board, fake_llm):
    from hermes_engine.kanban.triage import DECOMPOSE_SYSTEM

    plan = {"tasks": [{"title": "gather data", "after": []}, {"title": "write report", "after": [1]}]}

    def respond(request):
        if request.system.startswith(DECOMPOSE_SYSTEM.splitlines()[0]):
            return Reply(text=json.dumps(plan))
        return completing()(request)

    fake_llm.responder = respond
    [card] = await board.add(CardSpec("quarterly report", status="triage", profile="testbot"))
    await board.until(card.id, lambda c: c.status == "archived")
    gather, write = await board.store.list_cards(parent_id=card.id)
    assert (gather.title, write.title, write.depends_on) == ("gather data", "write report", (gather.id,))
    await board.until(write.id, lambda c: c.status == "done")


async def test_a_gateway_stopped_mid_card_gives_the_card_back_without_counting_a_failure(open_board, fake_llm):
    board = await open_board()
    working = asyncio.Event()

    def respond(request):
        if not is_worker(request):
            return None
        working.set()
        return Reply(chunks=["working "] * 100, delay=0.5)

    fake_llm.responder = respond
    [card] = await board.add(CardSpec("long job", status="ready", profile="testbot"))
    await asyncio.wait_for(working.wait(), 30)
    await board.gateway.stop()
    back = await board.store.get_card(card.id)
    assert (back.status, back.failures, back.claim, back.attempts) == ("ready", 0, None, 1)
    last = (await board.store.card_events(card.id))[-1]
    assert (last.kind, last.reason) == ("released", "the gateway stopped")


async def test_a_split_card_waits_for_its_parts_then_its_worker_combines_their_results(board, fake_llm):
    def respond(request):
        if tool_results(request):
            return Reply(text="ok")
        card_id, prompt = card_of(request), request.last_user_text
        if "big job" in prompt and "Result of your part" not in prompt:
            return Reply(tool_calls=[("kanban_complete", {"card_id": card_id, "result": "too big for one go",
                                                           "children": ["part one", "part two"]})])
        if "big job" in prompt:
            return Reply(tool_calls=[("kanban_complete", {"card_id": card_id, "result": "combined both parts"})])
        return Reply(tool_calls=[("kanban_complete", {"card_id": card_id, "result": f"did {card_id}"})])

    fake_llm.responder = respond
    [parent] = await board.add(CardSpec("big job", status="ready", profile="testbot"))
    one, two = await board.until(parent.id, lambda c: c.status == "done") and await board.store.list_cards(
        parent_id=parent.id)
    assert (one.title, two.title, one.status, two.status) == ("part one", "part two", "done", "done")
    done = await board.store.get_card(parent.id)
    assert done.result == "combined both parts" and done.attempts == 2
    waited = [e for e in await board.store.card_events(parent.id) if e.kind == "split"]
    assert waited[0].to_status == "todo"  # not done while its parts were open
    last = [r.last_user_text for r in fake_llm.requests if is_worker(r) and card_of(r) == parent.id][-1]
    assert f"did {one.id}" in last and f"did {two.id}" in last


async def test_cards_starting_together_are_announced_in_one_message(board, fake_llm):
    fake_llm.responder = completing()
    origin = {"reply": TARGET.to_dict()}
    cards = await board.add(*(CardSpec(f"task {i}", status="ready", profile="testbot", origin=origin)
                              for i in range(3)))
    for card in cards:
        await board.until(card.id, lambda c: c.status == "done")
    told = [d.text for d in await board.outlet.wait_for(5)]
    assert [t for t in told if t.startswith("▶️")] == ["▶️ Started 3 cards: task 0; task 1; task 2"]


async def test_a_workers_tokens_are_on_its_card_and_count_against_the_persons_daily_limit(open_board, fake_llm):
    from datetime import UTC, datetime

    def respond(request):
        if not tool_results(request):
            return Reply(tool_calls=[("kanban_complete", {"card_id": card_of(request), "result": "ok"})],
                         usage={"input": 300, "output": 40})
        return Reply(text="Done.", usage={"input": 350, "output": 10})

    fake_llm.responder = respond
    board = await open_board(limits=UsageLimitSettings(tokens_per_day=1_000_000))
    added = await board.say("/kanban add tally the votes")
    card_id = int(added.split("#")[1].split(":")[0])
    await board.told(f"✅ Card #{card_id} done")  # told once the attempt's spending is recorded
    card = await board.store.get_card(card_id)
    assert card.spent == CardUsage(tokens_in=650, tokens_out=50, model_calls=2)
    shown = await board.say(f"/kanban show #{card_id}")
    assert "Spent: 650 tokens in, 50 out, 2 model calls" in shown
    person = card.person_id
    assert person is not None
    today = datetime.now(UTC).date()
    used = await board.store.usage_of("testbot", person, today)
    assert used.tokens == 700  # the two /kanban commands are not turns: all of it is the worker's


async def test_splitting_a_triage_card_counts_its_tokens_against_the_cards_maker(open_board, fake_llm):
    from datetime import UTC, datetime

    from hermes_engine.kanban.triage import DECOMPOSE_SYSTEM

    def respond(request):
        if request.system.startswith(DECOMPOSE_SYSTEM.splitlines()[0]):
            return Reply(text=json.dumps({"tasks": []}), usage={"input": 800, "output": 6})
        raise AssertionError("no worker runs: the card waits for the blocked one")

    fake_llm.responder = respond
    board = await open_board(limits=UsageLimitSettings(tokens_per_day=1_000_000))
    person = (await board.store.resolve_account("test", "acct", "u1", "u1")).person_id
    [blocker] = await board.store.create_cards([CardSpec("find the key", status="blocked", profile="testbot")],
                                               actor="test")
    [card] = await board.add(CardSpec("tidy the shed", status="triage", profile="testbot",
                                      depends_on=(blocker.id,),
                                      origin={"person": person, "reply": TARGET.to_dict()}))
    await board.until(card.id, lambda c: c.status != "triage")
    today = datetime.now(UTC).date()
    deadline = asyncio.get_running_loop().time() + 10
    while (used := await board.store.usage_of("testbot", person, today)).tokens == 0:
        assert asyncio.get_running_loop().time() < deadline, "the split's tokens were never counted"
        await asyncio.sleep(0.05)
    assert used.tokens == 806 and used.turns == 0
