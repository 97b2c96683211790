"""The pure parts of context compression: windows, token accounting, pruning, cut points, summaries."""

from __future__ import annotations

import pytest

from hermes_engine.agent.context_window import (
    DEFAULT_CONTEXT_WINDOW,
    TokenMeter,
    context_window,
    known_window,
    messages_tokens,
    window_for,
)
from hermes_engine.compression.planning import (
    COMPACTION,
    CompressionConfig,
    plan_split,
    prune_tool_results,
    summary_budget,
    truncate_for_model,
)
from hermes_engine.compression.summariser import Summariser, SummaryFailed, rejection, strip_goal, transcript_lines
from hermes_engine.config import BotProfile, Settings
from hermes_engine.errors import ProviderError
from hermes_engine.ports.conversation import Message, ToolCall, Usage
from hermes_engine.ports.models import Completed, ModelResponse


def exchange(n: int, *, tool_chars: int = 0) -> list[Message]:
    """One user turn: a question, optionally a tool call and its result, and an answer."""
    messages = [Message(role="user", content=f"question {n}")]
    if tool_chars:
        call = ToolCall(id=f"call_{n}", name="read_page", arguments=f'{{"n": {n}}}')
        messages += [Message(role="assistant", content="", tool_calls=(call,)),
                     Message(role="tool", content="x" * tool_chars, tool_call_id=call.id, tool_name="read_page")]
    messages.append(Message(role="assistant", content=f"answer {n}"))
    return messages


def conversation(turns: int, **kwargs) -> list[Message]:
    return [m for n in range(turns) for m in exchange(n, **kwargs)]


# ------------------------------------------------------------------------------------------ windows

@pytest.mark.parametrize(("spec", "window"), [
    ("anthropic:claude-sonnet-4-5", 200_000),
    ("openai:gpt-4.1-mini", 1_047_576),
    ("openai:gpt-4o-2024-08-06", 128_000),
    ("openai:gpt-4", 8_192),
    ("openai:o3-mini", 200_000),
    ("openai:o1-mini", 128_000),
    ("openai-compatible:meta-llama/Llama-3.1-8B-Instruct", 131_072),
    ("openai-compatible:llama3:8b", 8_192),
])
def test_known_models_get_their_window_by_longest_prefix(spec, window):
    assert known_window(spec) == window


def test_environment_overrides_profile_which_overrides_the_table():
    assert context_window("openai:gpt-4o") == 128_000
    assert context_window("openai:gpt-4o", profile_window=50_000) == 50_000
    assert context_window("openai:gpt-4o", profile_window=50_000, env_window=9_000) == 9_000
    assert context_window("openai-compatible:mystery-model") == DEFAULT_CONTEXT_WINDOW
    profile = BotProfile(context_window=64_000)
    assert window_for("openai:gpt-4o", profile, Settings(context_window=None)) == 64_000
    assert window_for("openai:gpt-4o", profile, Settings(context_window=16_000)) == 16_000


def test_meter_adds_an_estimate_of_new_messages_to_the_providers_count():
    meter = TokenMeter()
    history = conversation(2)
    assert meter.measure(history, fixed=100) == (100 + messages_tokens(history), False)
    meter.observe(history, len(history), Usage(input_tokens=700, cache_read_tokens=300))
    history.append(Message(role="user", content="y" * 400))
    tokens, reported = meter.measure(history, fixed=100)
    assert reported and tokens == 1000 + messages_tokens(history[-1:])
    meter.touch()  # the history was rewritten: the count no longer applies
    assert meter.measure(history, fixed=100) == (100 + messages_tokens(history), False)


# ------------------------------------------------------------------------------------------ pruning

def test_pruning_replaces_long_old_tool_results_but_not_the_tail_or_short_ones():
    history = conversation(6, tool_chars=500)
    history[2] = Message(role="tool", content="short", tool_call_id="call_0", tool_name="read_page")
    pruned = prune_tool_results(history, protect_last=8, min_chars=200)
    tool_messages = [m for m in history if m.role == "tool"]
    assert pruned == 3  # turns 1-3; turn 0's result is short, turns 4-5 are in the tail
    assert tool_messages[0].content == "short"
    assert all(m.content.startswith("[old read_page result cleared") for m in tool_messages[1:4])
    assert all(len(m.content) == 500 for m in tool_messages[4:])
    assert [m.tool_call_id for m in tool_messages] == [f"call_{n}" for n in range(6)]
    assert "\n" not in tool_messages[1].content
    assert prune_tool_results(history, protect_last=8, min_chars=200) == 0  # placeholders stay


# ------------------------------------------------------------------------------------------ cut points

def test_cut_points_are_user_messages_so_tool_calls_keep_their_results():
    history = conversation(12, tool_chars=300)
    split = plan_split(history, protect_tail=9, tail_budget=10_000, head_budget=10_000)
    assert split is not None
    assert split.head == history[:4]  # the first exchange
    assert split.tail[0].role == "user" and split.middle[0].role == "user"
    assert len(split.tail) <= 9
    assert split.head + split.middle + split.tail == history
    for part in (split.middle, split.tail):
        calls = {c.id for m in part for c in m.tool_calls}
        results = {m.tool_call_id for m in part if m.role == "tool"}
        assert calls == results


def test_the_tail_shrinks_to_its_token_budget_but_always_keeps_the_current_turn():
    history = conversation(6, tool_chars=2_000)
    split = plan_split(history, protect_tail=50, tail_budget=10, head_budget=10_000)
    assert split is not None and split.tail == history[-4:]  # the last exchange, though over budget


def test_a_large_first_exchange_is_summarised_instead_of_kept():
    history = conversation(6, tool_chars=4_000)
    split = plan_split(history, protect_tail=4, tail_budget=100_000, head_budget=500)
    assert split is not None and split.head == [] and split.middle[0] is history[0]


def test_a_second_pass_keeps_the_head_and_takes_the_previous_summary_apart():
    summary = Message(role="user", content="[Summary…]", meta={COMPACTION: {"id": 1, "first": 5, "last": 9,
                                                                           "summary": "old"}})
    history = [*exchange(0), summary, *conversation(8)[4:]]
    split = plan_split(history, protect_tail=4, tail_budget=100_000, head_budget=100_000)
    assert split is not None
    assert split.head == history[:2] and split.previous is summary and summary not in split.middle


def test_nothing_to_split_in_a_single_exchange():
    assert plan_split(exchange(0, tool_chars=100), protect_tail=1, tail_budget=1, head_budget=1) is None


# ------------------------------------------------------------------------------------------ summaries

def test_summary_budget_is_a_fifth_of_the_content_within_2k_and_12k():
    config = CompressionConfig()
    assert summary_budget(5_000, config, 200_000) == 2_000
    assert summary_budget(30_000, config, 200_000) == 6_000
    assert summary_budget(500_000, config, 200_000) == 12_000
    assert summary_budget(30_000, config, 8_000) == 2_000  # and a quarter of a small window at most


def test_empty_truncated_or_over_budget_summaries_are_rejected():
    assert rejection("", "end_turn", 100) == "it was empty"
    assert "cut off" in rejection("## Goal", "max_tokens", 100)
    assert "longer than its budget" in rejection("x" * 2_000, "end_turn", 100)
    assert rejection("## Goal\nShip it.", "end_turn", 100) is None


def test_transcript_shows_calls_and_clips_long_tool_output():
    lines = transcript_lines(exchange(1, tool_chars=5_000))
    assert lines[0] == "USER: question 1"
    assert 'calls read_page({"n": 1})' in lines[1]
    assert lines[2].startswith("TOOL RESULT (read_page): ") and len(lines[2]) < 1_400


def test_oversize_message_keeps_beginning_and_end_with_a_note():
    text = "BEGIN " + "m" * 100_000 + " END"
    cut = truncate_for_model(Message(role="user", content=text, meta={"event_id": "e1"}), 1_000)
    assert cut.content.startswith("BEGIN ") and cut.content.endswith(" END")
    assert "too long for the model's context window" in cut.content
    assert len(cut.content) < 4_000 + 600 and cut.meta["event_id"] == "e1"


def test_the_pinned_goal_line_is_not_fed_back_as_summary_text():
    assert strip_goal("Standing goal (verbatim, still open): ship\n\n## Goal\nship") == "## Goal\nship"
    assert strip_goal("## Goal\nship") == "## Goal\nship"


class ScriptedRouter:
    """Answers summary requests from a list; records them."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests = []

    async def stream(self, request):
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        yield Completed(ModelResponse(text=answer, usage=Usage(input_tokens=10, output_tokens=5),
                                      stop_reason="end_turn"))


async def test_summariser_retries_a_rejected_summary_once_then_gives_up():
    summariser = Summariser(CompressionConfig())
    router = ScriptedRouter("", "## Goal\nA")
    usage = Usage()
    text = await summariser.summarise(router, previous=None, messages=conversation(3), window=100_000,
                                      goal=None, usage=usage)
    assert text == "## Goal\nA" and len(router.requests) == 2 and usage.input_tokens == 20
    assert all(r.purpose == "summary" for r in router.requests)
    with pytest.raises(SummaryFailed, match="rejected twice"):
        await summariser.summarise(ScriptedRouter("", "   "), previous=None, messages=conversation(3),
                                   window=100_000, goal=None, usage=Usage())
    with pytest.raises(SummaryFailed, match="call failed"):
        await summariser.summarise(ScriptedRouter(ProviderError("down", status=503)), previous=None,
                                   messages=conversation(3), window=100_000, goal=None, usage=Usage())


async def test_a_middle_too_big_for_one_call_is_folded_in_chunk_by_chunk():
    summariser = Summariser(CompressionConfig())
    router = ScriptedRouter(*[f"## Goal\nsummary {i}" for i in range(20)])
    messages = conversation(40, tool_chars=1_000)
    text = await summariser.summarise(router, previous=None, messages=messages, window=8_000, goal="ship it",
                                      usage=Usage())
    assert len(router.requests) > 1 and text == f"## Goal\nsummary {len(router.requests) - 1}"
    first, second = (r.messages[0].content for r in router.requests[:2])
    assert "Summarise this conversation" in first and "ship it" in first
    assert "## Goal\nsummary 0" in second and "Update the summary" in second
    assert all(messages_tokens(r.messages) + r.max_tokens < 8_000 for r in router.requests)
