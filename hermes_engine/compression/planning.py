"""The pure parts of context compression: settings, the meta keys on in-memory messages, the placeholder
pass, where to cut the history, the summary budget and the cut copy of an oversize user message.

Above `threshold` of the window:

1. old tool results longer than `placeholder_chars` outside the protected tail become a one-line
   placeholder (no model call); if that is enough, stop (`prune_tool_results`);
2. otherwise the history is split at user-message boundaries — so a tool call is never parted from its
   result — into a protected head (the first exchange), the middle and a protected tail (at most
   `protect_tail_messages` messages and a token budget, always the whole current turn) (`plan_split`).
   The middle is summarised with a budget of 20% of the summarised content, 2K–12K tokens
   (`summary_budget`).

A user message too large to ever fit under the threshold is stored whole, but the model gets its
beginning and end with a note in between (`truncate_for_model`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hermes_engine.agent.context_window import message_tokens, messages_tokens
from hermes_engine.ports.conversation import Message, Usage, estimate_tokens

# Meta keys on in-memory messages (never stored: the stored rows were written before these were set).
STORED_ID = "stored_id"  # the message's id in the store; None for messages that are not stored
COMPACTION = "compaction"  # on the summary message: {"id", "first", "last", "summary"}
PRUNED = "pruned"  # a tool result replaced by its placeholder
TRUNCATED = "truncated"  # on the copy of an oversize user message the model gets: the full length

OVERSIZE_NOTE = ("[Note from the system: this message was too long for the model's context window (about "
                 "{tokens:,} tokens). It is stored in full, but only its beginning and end are shown here; "
                 "{omitted:,} characters in the middle were left out. Ask the person for the part you need.]")


# -------------------------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class CompressionConfig:
    """Compression settings: the profile's `compression` block (if any) over these defaults."""

    threshold: float = 0.5  # agent compressor: share of the window a request may reach
    hygiene_threshold: float = 0.85  # gateway hygiene before a turn, by rough estimate
    protect_tail_messages: int = 20
    placeholder_chars: int = 200  # tool results longer than this (outside the tail) become placeholders
    tail_share: float = 0.25  # token budget of the protected tail, as a share of the threshold
    head_share: float = 0.25  # the first exchange stays verbatim while it is smaller than this share
    summary_ratio: float = 0.2
    summary_min_tokens: int = 2_000
    summary_max_tokens: int = 12_000

    @classmethod
    def from_profile(cls, profile: Any) -> CompressionConfig:
        block = getattr(profile, "compression", None)
        if block is None:
            return cls()
        values = {name: getattr(block, name) for name in cls.__dataclass_fields__ if hasattr(block, name)}
        return cls(**values)


@dataclass
class CompactionReport:
    """What one compression pass did (for logs, /compress and tests)."""

    reason: str  # "agent" | "hygiene" | "command"
    tokens_before: int
    tokens_after: int
    pruned: int = 0  # tool results replaced by placeholders
    summarised: int = 0  # messages folded into the summary
    compaction_id: int | None = None
    failed: str | None = None  # why no summary was made (the placeholder pass still applies)
    summary_usage: Usage = field(default_factory=Usage)

    @property
    def changed(self) -> bool:
        return bool(self.pruned or self.summarised)


# ---------------------------------------------------------------------------------------- pure pieces

def is_summary(message: Message) -> bool:
    return COMPACTION in message.meta


def prune_tool_results(history: list[Message], *, protect_last: int, min_chars: int) -> int:
    """Replace tool results longer than `min_chars`, except in the last `protect_last` messages, with a
    one-line placeholder (in place; the call id stays, so the pair remains valid). Returns how many."""
    pruned = 0
    for i in range(max(0, len(history) - protect_last)):
        message = history[i]
        if message.role != "tool" or message.meta.get(PRUNED) or len(message.content) <= min_chars:
            continue
        first_line = " ".join(message.content.split())[:80]
        placeholder = (f"[old {message.tool_name or 'tool'} result cleared to save context: "
                       f"{len(message.content):,} chars, began \"{first_line}…\"; run the tool again if needed]")
        history[i] = Message(role="tool", content=placeholder, tool_call_id=message.tool_call_id,
                             tool_name=message.tool_name, is_error=message.is_error,
                             meta={**message.meta, PRUNED: len(message.content)})
        pruned += 1
    return pruned


@dataclass
class Split:
    head: list[Message]
    previous: Message | None  # the summary message of the last compaction, if any
    middle: list[Message]  # what gets summarised (the previous summary excluded)
    tail: list[Message]


def plan_split(history: Sequence[Message], *, protect_tail: int, tail_budget: int, head_budget: int,
               force: bool = False) -> Split | None:
    """Where to cut: only at user messages, so no tool call is parted from its result. None when there is
    nothing to summarise. `force` keeps only the last exchange as the tail."""
    history = list(history)
    previous_at = next((i for i, m in enumerate(history) if is_summary(m)), None)
    if previous_at is not None:
        head_end, start = previous_at, previous_at + 1
    else:
        users = [i for i, m in enumerate(history) if m.role == "user"]
        if len(users) < 2:
            return None
        head_end = users[1] if messages_tokens(history[:users[1]]) <= head_budget else 0
        start = head_end
    candidates = [i for i in range(start + 1, len(history)) if history[i].role == "user" and not is_summary(history[i])]
    if not candidates:
        return None
    cut = candidates[-1]
    if not force:
        suffix = [0] * (len(history) + 1)
        for i in range(len(history) - 1, -1, -1):
            suffix[i] = suffix[i + 1] + message_tokens(history[i])
        for i in candidates:
            if len(history) - i <= protect_tail and suffix[i] <= tail_budget:
                cut = i
                break
    middle = history[start:cut]
    if not middle:
        return None
    return Split(head=history[:head_end], previous=history[previous_at] if previous_at is not None else None,
                 middle=middle, tail=history[cut:])


def summary_budget(content_tokens: int, config: CompressionConfig, window: int) -> int:
    """max_tokens of the summary: 20% of what is summarised, within 2K–12K, and at most a quarter of the
    window so the summary call itself fits."""
    budget = int(content_tokens * config.summary_ratio)
    budget = max(config.summary_min_tokens, min(config.summary_max_tokens, budget))
    return max(256, min(budget, window // 4))


def truncate_for_model(message: Message, limit_tokens: int) -> Message:
    """The beginning and the end of an oversize message, with a note where the middle was left out."""
    limit_chars = limit_tokens * 4
    text = message.content
    keep_head = limit_chars * 3 // 4
    keep_tail = limit_chars - keep_head
    omitted = len(text) - keep_head - keep_tail
    note = OVERSIZE_NOTE.format(tokens=estimate_tokens(text), omitted=omitted)
    content = f"{text[:keep_head]}\n\n{note}\n\n{text[-keep_tail:]}"
    return Message(role="user", content=content, images=message.images, meta={**message.meta, TRUNCATED: len(text)})
