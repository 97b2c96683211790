"""How a model is asked to go on with an answer its output limit cut off.

The history keeps the cut part of the answer as an assistant message marked `CUT` in its meta, and the rest
of the answer as the assistant message after it: what the model wrote, nothing more. On the wire each cut
part the model went on from (or is now asked to go on from) is followed by the same short user message,
`CONTINUE`. A user turn is what both APIs need: Chat Completions has no way to continue an assistant
message, and Anthropic refuses a prefilled assistant turn on its newest models (and one ending in white
space on all of them). Because the request is derived from the history the same way every time, each call
repeats the one before it and adds to its end, so the provider's cached prefix serves the whole answer so
far, in this turn and in every later one.
"""

from __future__ import annotations

from hermes_engine.ports.conversation import Message

CUT = "cut_at_output_limit"
CONTINUE = ("[Your answer above reached the output limit and was cut off. Continue it from exactly where it "
            "stopped, mid-word or mid-sentence if need be, without repeating anything and without a preamble.]")
_CONTINUE_MESSAGE = Message(role="user", content=CONTINUE)


def is_cut(message: Message) -> bool:
    """An assistant message the output limit cut off, which the next one goes on from."""
    return message.role == "assistant" and not message.tool_calls and bool(message.meta.get(CUT))


def with_continuations(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """`messages` with `CONTINUE` after every cut answer that is followed by its next part or ends them. A
    person's message after a cut answer (the turn was stopped there) follows it as it is."""
    if not any(is_cut(m) for m in messages):
        return messages
    wire: list[Message] = []
    for index, message in enumerate(messages):
        wire.append(message)
        following = messages[index + 1] if index + 1 < len(messages) else None
        if is_cut(message) and (following is None or following.role == "assistant"):
            wire.append(_CONTINUE_MESSAGE)
    return tuple(wire)
