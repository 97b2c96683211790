"""Answers longer than one model call may write.

A response that stops at the output limit (`stop_reason == "max_tokens"`, as both providers report it) is
not the whole answer, and is never shown or run as if it were:
- With text, the part is stored as a cut assistant message (`part`) and the model is asked to go on from
  it (the providers add the request, `hermes_engine.providers.continuation`). The parts stream into the
  same reply as they come, and the answer is their concatenation (`answer_text`), after a restart too. At
  most `MAX_CONTINUATIONS` times for one answer: a part still cut after that ends with `CUT_NOTE`, so the
  person knows the rest is missing.
- With tool calls, the last call's arguments were cut. None of the response's calls runs, not even one
  that looks complete (a half-written response is not what the model meant to do), and the history keeps
  them without their arguments, each with an error result saying why (`CUT_CALL`), so the model makes the
  call again with less in it. After `MAX_CONTINUATIONS` such responses in a row the turn ends with `CUT_NOTE`.
"""

from __future__ import annotations

from collections.abc import Sequence

from hermes_engine.ports.conversation import Message, ToolCall
from hermes_engine.ports.models import ModelResponse
from hermes_engine.providers.continuation import CUT, is_cut

MAX_CONTINUATIONS = 3
CUT_NOTE = "⚠️ The answer was cut here: it reached the model's output limit."
CUT_CALL = ("Not run: the output limit cut your response off while this call's arguments were being written "
            "({chars:,} characters of them arrived). Make the call again with smaller arguments; split long "
            "content over several calls.")


def at_limit(response: ModelResponse) -> bool:
    return response.stop_reason == "max_tokens"


def part(response: ModelResponse) -> Message:
    """The cut text of `response`, as the history keeps it until the answer goes on."""
    return Message(role="assistant", content=response.text, meta={CUT: True})


def parts_before_end(history: Sequence[Message]) -> int:
    """How many cut parts the history ends with: the continuations one answer has had so far."""
    count = 0
    while count < len(history) and is_cut(history[-1 - count]):
        count += 1
    return count


def answer_text(messages: Sequence[Message]) -> str:
    """The answer `messages` end with: the last message's text after the cut parts it goes on from."""
    end = len(messages) - 1
    start = end
    while start > 0 and is_cut(messages[start - 1]):
        start -= 1
    return "".join(m.content for m in messages[start:end + 1])


def without_cut_calls(response: ModelResponse) -> tuple[Message, list[Message]]:
    """The assistant message of a response cut while it wrote tool calls (the calls kept without their
    arguments) and the error result each call gets instead of running."""
    calls = tuple(ToolCall(c.id, c.name, "{}") for c in response.tool_calls)
    assistant = Message(role="assistant", content=response.text, tool_calls=calls)
    results = [Message(role="tool", content=CUT_CALL.format(chars=len(original.arguments)), tool_call_id=call.id,
                       tool_name=call.name, is_error=True)
               for call, original in zip(calls, response.tool_calls, strict=True)]
    return assistant, results
