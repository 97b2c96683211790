"""Context compression through the real gateway, real SDKs and the fake LLM (SQLite).

The bot gets an 8,000-token window (threshold 4,000) and a tool that returns ~1,600 characters, so a few
turns fill half the window. The summary call is told apart from turn calls by its system prompt.
"""

from __future__ import annotations

import json
import re

from engine_harness import make_profile
from fakes.fake_llm import Reply

from hermes_engine.compression.feature import CompressionFeature
from hermes_engine.compression.service import CompactionService
from hermes_engine.compression.summariser import GOAL_LINE, SUMMARY_SECTIONS, SUMMARY_SYSTEM
from hermes_engine.tools.registry import tool
from storage.search import list_compactions

WINDOW = 8_000
LABEL = "[Summary of the earlier conversation"
PLACEHOLDER = "result cleared to save context"


@tool(toolset="test")
def read_page(n: int) -> str:
    """Read one page of the manual."""
    return f"page {n}: " + "lorem ipsum dolor sit amet " * 60


def profile(**overrides):
    base = dict(context_window=WINDOW, compression={"protect_tail_messages": 6},
                review={"memory_every_turns": 0, "skill_every_iterations": 0})
    base.update(overrides)
    return make_profile(**base)


def is_summary_request(request) -> bool:
    return request.system.startswith(SUMMARY_SYSTEM[:60])


def structured(n: int) -> str:
    return (f"## Goal\nRead the manual.\n## Constraints\nNone.\n## Progress\n### Done\n- pages read (summary {n})\n"
            "### In progress\nNone.\n### Blocked\nNone.\n## Key decisions\nNone.\n## Open questions\nNone.\n"
            f"## Next steps\n- keep reading\n## Critical facts\n- summary number {n}")


class Agent:
    """A scripted model: a user message gets a read_page call, a tool result gets a short answer, a summary
    request gets the next of `summaries` (a Reply, text, or a callable), then structured ones."""

    def __init__(self, fake_llm, *summaries):
        self.fake = fake_llm
        self.summaries = list(summaries)
        self.summary_count = 0
        fake_llm.responder = self

    def __call__(self, request):
        if is_summary_request(request):
            self.summary_count += 1
            if self.summaries:
                answer = self.summaries.pop(0)
                return answer(request) if callable(answer) else answer
            return Reply(text=structured(self.summary_count))
        last = request.messages[-1]
        blocks = last["content"] if isinstance(last.get("content"), list) else []
        tool_result = last["role"] == "tool" or any(b.get("type") == "tool_result" for b in blocks)
        if not tool_result:
            return Reply(tool_calls=[("read_page", {"n": self.summary_count})])
        return Reply(text="Read it.")

    @property
    def turn_requests(self):
        return [r for r in self.fake.requests if not is_summary_request(r)]

    @property
    def summary_requests(self):
        return [r for r in self.fake.requests if is_summary_request(r)]


async def start(engine, **overrides):
    e = await engine(profile=profile(**overrides))
    e.gateway.tools.register(read_page)
    return e


def long_question(i: int) -> str:
    return f"Turn {i}: please read the next page and tell me about it. " + "Some context for the question. " * 36


async def chat(e, turns: int, start_at: int = 0) -> None:
    for i in range(start_at, start_at + turns):
        assert await e.say(long_question(i)) == "Read it."


def size(request) -> int:
    """Tokens of a request as the fake counts them (body bytes / 4)."""
    return len(json.dumps(request.body)) // 4


def session_of(e):
    return next(iter(e.gateway.sessions.values()))


def compression_of(e) -> CompactionService:
    return next(f for f in e.gateway.features if isinstance(f, CompressionFeature)).service


def assert_pairs_intact(request) -> None:
    messages = request.messages
    for i, message in enumerate(messages):
        if message["role"] == "tool":
            j = i - 1
            while messages[j]["role"] == "tool":
                j -= 1
            assert message["tool_call_id"] in {c["id"] for c in messages[j].get("tool_calls") or []}
        for call in message.get("tool_calls") or []:
            assert any(m.get("tool_call_id") == call["id"] for m in messages[i + 1:]), "a call lost its result"


# ---------------------------------------------------------------------------------------------- tests

async def test_compression_triggers_at_half_the_window_and_keeps_tool_pairs_intact(engine, fake_llm):
    agent = Agent(fake_llm)
    e = await start(engine)
    await chat(e, 12)
    assert agent.summary_requests, "the history passed half the window but nothing was summarised"
    first = fake_llm.requests.index(agent.summary_requests[0])
    before = fake_llm.requests[first - 1]
    after = next(r for r in fake_llm.requests[first:] if not is_summary_request(r))
    assert size(before) > 0.4 * WINDOW  # it waited until the request neared half the window
    assert LABEL not in json.dumps(before.messages) and LABEL in json.dumps(after.messages)
    assert size(after) < size(before)
    one_turn = 800
    for request in agent.turn_requests:
        assert_pairs_intact(request)
        assert size(request) <= WINDOW // 2 + one_turn
    last = agent.turn_requests[-1].messages
    assert last[1]["content"].startswith("Turn 0:")  # the protected head: the first exchange
    assert any(PLACEHOLDER in str(m.get("content")) for m in agent.turn_requests[first - 2].messages)


async def test_compressed_history_is_valid_on_the_anthropic_wire_format_too(engine, fake_llm):
    agent = Agent(fake_llm)
    e = await start(engine, model="anthropic:claude-test")
    await chat(e, 12)  # the fake rejects invalid role order or orphaned tool results with a 400
    assert agent.summary_requests and all(r.api == "anthropic" for r in fake_llm.requests)
    last = agent.turn_requests[-1].body["messages"]
    assert last[0]["role"] == "user" and LABEL not in json.dumps(last[0])  # the head
    merged = next(m for m in last if LABEL in json.dumps(m))
    assert merged["role"] == "user" and len(merged["content"]) == 2  # summary + the tail's first message


async def test_summary_is_structured_and_a_second_pass_updates_the_first(engine, fake_llm):
    agent = Agent(fake_llm)
    e = await start(engine)
    await chat(e, 24)
    requests = agent.summary_requests
    assert len(requests) >= 2
    first, second = requests[0], requests[1]
    for section in SUMMARY_SECTIONS + ("### Done", "### In progress", "### Blocked"):
        assert section in first.system
    assert "Summarise this conversation" in first.last_user_text
    assert first.body.get("max_completion_tokens") == 2_000  # 20% of the content, at least 2K
    assert "Update the summary" in second.last_user_text
    assert structured(1) in second.last_user_text  # the previous summary is updated, not regenerated
    assert "Turn 0:" not in second.last_user_text  # only messages newly compressed are sent again

    session = session_of(e)
    lineage = await list_compactions(e.store.engine, [session.record.id])
    assert len(lineage) >= 2
    assert lineage[1].parent_id == lineage[0].id
    assert lineage[1].first_message_id == lineage[0].first_message_id  # cumulative coverage
    assert lineage[1].last_message_id > lineage[0].last_message_id
    assert all(c.tokens_after < c.tokens_before and c.reason == "agent" for c in lineage)
    assert lineage[1].summary == structured(2)
    view = json.dumps(agent.turn_requests[-1].messages)
    assert view.count(LABEL) == 1 and not re.search(r"summary number 1(?!\d)", view)  # not "... 10"


async def test_failed_summary_leaves_placeholders_the_turn_proceeds_and_it_is_retried(engine, fake_llm):
    agent = Agent(fake_llm, *[Reply(error=400, error_message="summary model refused")] * 3)
    e = await start(engine)
    await chat(e, 11)  # every answer still arrives
    failures = agent.summary_requests[:3]
    assert len(failures) == 3
    positions = [fake_llm.requests.index(r) for r in failures]
    assert positions[1] > positions[0] + 1  # retried on a later call, not in a loop
    turn_after_failure = fake_llm.requests[positions[0] + 1]
    assert PLACEHOLDER in json.dumps(turn_after_failure.messages)
    assert LABEL not in json.dumps(turn_after_failure.messages)
    assert len(agent.summary_requests) >= 4  # the fourth attempt worked
    assert LABEL in json.dumps(agent.turn_requests[-1].messages)


async def test_empty_summary_is_rejected_and_asked_for_once_more(engine, fake_llm):
    agent = Agent(fake_llm, Reply(text=""))
    e = await start(engine)
    await chat(e, 10)
    first, second = agent.summary_requests[:2]
    assert fake_llm.requests.index(second) == fake_llm.requests.index(first) + 1
    assert first.last_user_text == second.last_user_text
    lineage = await list_compactions(e.store.engine, [session_of(e).record.id])
    assert lineage[0].summary == structured(2)


async def test_over_budget_summaries_twice_count_as_a_failure_and_compression_waits(engine, fake_llm):
    too_long = Reply(text="## Goal\n" + "word " * 4_000)  # ~5,000 tokens for a 2,000-token budget
    agent = Agent(fake_llm, too_long, too_long)
    e = await start(engine)
    await chat(e, 10)
    first, second, third = agent.summary_requests[:3]
    assert fake_llm.requests.index(second) == fake_llm.requests.index(first) + 1
    assert fake_llm.requests.index(third) > fake_llm.requests.index(second) + 1  # the next call retried
    lineage = await list_compactions(e.store.engine, [session_of(e).record.id])
    assert "word word" not in lineage[0].summary


async def test_oversize_message_is_stored_whole_cut_for_the_model_and_the_person_is_told(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="I read the start and the end.")
    e = await engine(profile=profile())
    text = "START of the paste. " + "A very long paste. " * 3_000 + "What does it say? END"
    assert len(text) // 4 > WINDOW
    await e.gateway.handle(e.message(text))
    delivered = await e.outlet.wait_for(2)
    notice, answer = delivered[0], delivered[1]
    assert notice.kind == "send" and "too long" in notice.text and f"{WINDOW:,}" in notice.text
    assert answer.text == "I read the start and the end."
    sent = fake_llm.requests[0].last_user_text
    assert sent.startswith("START of the paste.") and sent.endswith("What does it say? END")
    assert "too long for the model's context window" in sent and len(sent) < WINDOW * 4 // 2
    stored = await e.store.load_messages(session_of(e).record.id)
    assert stored[0].content == text

    fake_llm.requests.clear()
    assert await e.say("thanks") == "I read the start and the end."
    assert len(e.outlet.delivered) == 3  # told once
    assert "too long for the model's context window" in json.dumps(fake_llm.requests[0].messages)


async def test_hygiene_compresses_before_the_turn_after_switching_to_a_smaller_model(engine, fake_llm):
    agent = Agent(fake_llm)
    e = await start(engine, model="openai:gpt-4.1-mini", context_window=None)
    await chat(e, 10)
    assert not agent.summary_requests  # a million tokens of room
    assert (await e.say("/model openai:gpt-4")).startswith("This conversation now uses openai:gpt-4")
    fake_llm.requests.clear()
    await chat(e, 1, start_at=10)
    kinds = ["summary" if is_summary_request(r) else "turn" for r in fake_llm.requests]
    assert kinds[0] == "summary" and fake_llm.requests[0].model == "gpt-4"
    lineage = await list_compactions(e.store.engine, [session_of(e).record.id])
    assert [c.reason for c in lineage] == ["hygiene"]
    assert lineage[0].tokens_before > 0.85 * 8_192 > lineage[0].tokens_after
    for request in agent.turn_requests:
        assert size(request) < 8_192 // 2 + 800


async def test_hygiene_leaves_a_history_below_its_threshold_to_the_agent_compressor(engine, fake_llm):
    agent = Agent(fake_llm)
    e = await start(engine, context_window=None, model="openai:gpt-4.1-mini")
    await chat(e, 6)
    tokens = compression_of(e).context(session_of(e)).estimate(session_of(e).history)
    e.gateway.settings.context_window = int(tokens / 0.7)  # HERMES_CONTEXT_WINDOW: the history is ~70% full
    await chat(e, 1, start_at=6)
    lineage = await list_compactions(e.store.engine, [session_of(e).record.id])
    assert [c.reason for c in lineage] == ["agent"] and agent.summary_requests


async def test_compress_command_reports_tokens_before_and_after(engine, fake_llm):
    Agent(fake_llm)
    e = await start(engine, context_window=100_000)
    assert (await e.say("/compress")).startswith("Nothing to compress yet")
    await chat(e, 4)
    reply = await e.say("/compress")
    match = re.search(r"~([\d,]+) → ~([\d,]+) tokens", reply)
    assert reply.startswith("Compressed:") and match, reply
    before, after = (int(g.replace(",", "")) for g in match.groups())
    assert before > after > 0
    lineage = await list_compactions(e.store.engine, [session_of(e).record.id])
    assert [c.reason for c in lineage] == ["command"]
    status = await e.say("/status")
    assert "Context: ~" in status and "summarised" in status


async def test_restart_rebuilds_the_compressed_view_from_lineage(engine, fake_llm, tmp_path):
    agent = Agent(fake_llm)
    e = await start(engine)
    await chat(e, 12)
    assert agent.summary_requests
    view_before = agent.turn_requests[-1].messages
    summary_before = next(m["content"] for m in view_before if LABEL in str(m["content"]))
    users_before = [m["content"] for m in view_before if m["role"] == "user" and LABEL not in m["content"]]
    await e.stop()

    fake_llm.requests.clear()
    again = await start(engine)
    assert await again.say("after the restart") == "Read it."
    sent = fake_llm.requests[0].messages
    assert not is_summary_request(fake_llm.requests[0])
    assert [m["content"] for m in sent if LABEL in str(m["content"])] == [summary_before]
    users_after = [m["content"] for m in sent if m["role"] == "user" and LABEL not in m["content"]]
    assert users_after == users_before + ["after the restart"]
    assert_pairs_intact(fake_llm.requests[0])


async def test_stored_messages_are_never_deleted(engine, fake_llm):
    agent = Agent(fake_llm)
    e = await start(engine)
    await chat(e, 16)
    assert len(agent.summary_requests) >= 2
    stored = await e.store.load_stored_messages(session_of(e).record.id)
    assert len(stored) == 16 * 4
    assert [s.message.content for s in stored if s.message.role == "user"] == [long_question(i) for i in range(16)]
    assert all(len(s.message.content) > 1_000 for s in stored if s.message.role == "tool")
    assert len(session_of(e).history) < len(stored)


async def test_the_standing_goal_is_pinned_in_the_summary(engine, fake_llm):
    agent = Agent(fake_llm)
    e = await start(engine)
    await chat(e, 1)
    session = session_of(e)
    await e.store.create_goal(session.key, e.gateway.bot, "Write the whole manual in French")
    await chat(e, 11, start_at=1)
    assert "Write the whole manual in French" in agent.summary_requests[0].last_user_text
    summary = next(m["content"] for m in agent.turn_requests[-1].messages if LABEL in str(m["content"]))
    assert f"{GOAL_LINE}Write the whole manual in French" in summary
    system_prompts = {r.system for r in agent.turn_requests}
    assert len(system_prompts) == 1  # the frozen system prompt is never touched


async def test_a_summarys_tokens_count_against_the_person_who_needed_it(engine, fake_llm):
    from datetime import UTC, datetime

    Agent(fake_llm, Reply(text=structured(1), usage={"input": 3000, "output": 300}))
    e = await start(engine, context_window=100_000, limits={"tokens_per_day": 1_000_000})
    await chat(e, 4)
    await e.idle()
    person = await e.gateway.person_of(e.platform, "acct", "u1")
    today = datetime.now(UTC).date()
    before = await e.store.usage_of("testbot", person, today)

    assert (await e.say("/compress")).startswith("Compressed:")
    await e.idle()
    after = await e.store.usage_of("testbot", person, today)
    assert (after.turns, after.tokens - before.tokens) == (before.turns, 3300)  # /compress is not a turn



async def test_a_compression_between_two_calls_of_a_turn_is_the_view_the_next_call_and_the_next_turn_send(
        engine, fake_llm):
    Agent(fake_llm)
    e = await start(engine)
    await chat(e, 12)
    requests = fake_llm.requests
    at = next(i for i, r in enumerate(requests) if is_summary_request(r))
    before, after, next_turn = requests[at - 1], requests[at + 1], requests[at + 2]
    assert before.messages[-1]["role"] == "user" and after.messages[-1]["role"] == "tool"  # one turn's two calls
    assert LABEL not in json.dumps(before.messages) and LABEL in json.dumps(after.messages)
    asked = [m["content"] for m in before.messages if m["role"] == "user"]
    kept = [m["content"] for m in after.messages if m["role"] == "user" and LABEL not in str(m["content"])]
    assert kept[-1] == asked[-1] and len(kept) < len(asked)  # the middle went into the summary; this turn stayed
    summary = next(m for m in after.messages if LABEL in str(m["content"]))
    assert next_turn.messages[-1]["role"] == "user" and not is_summary_request(next_turn)
    assert summary in next_turn.messages  # the session kept the compressed view...
    assert len(next_turn.messages) == len(after.messages) + 2  # ...and the turn's answer, then the new question


async def test_a_compression_pass_makes_a_new_view_and_the_session_keeps_its_own_until_handed_it(engine, fake_llm):
    Agent(fake_llm)
    e = await start(engine)
    await chat(e, 4)
    session = session_of(e)
    before = list(session.history)
    compressed = await compression_of(e).context(session).compress(
        session.history.view(), e.gateway.chain_for(session).route(), reason="command", force=True)
    assert compressed.report.summarised and len(compressed.view) < len(before)
    assert any(LABEL in m.content for m in compressed.view)
    assert list(session.history) == before  # nothing rewritten in place
