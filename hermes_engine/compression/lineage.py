"""The lineage of a session's compactions: how the compressed view is stored and rebuilt.

The view becomes head + one user message labelled as a summary of the earlier conversation + tail
(`summary_message`); the system prompt is never touched. Each summary is recorded
(`CompactionLineage.record_compaction`: session, first/last stored message id covered, summary, tokens
before/after, parent) so a restart rebuilds the same view (`load_history`), and search and export still see
every stored message. Messages appended during this process learn their stored ids from the store
(`sync_stored_ids`) so the next summary knows which stored range it covers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hermes_engine.agent.loop import repair_history
from hermes_engine.compression.planning import COMPACTION, STORED_ID, is_summary
from hermes_engine.ports.conversation import Message

if TYPE_CHECKING:
    from hermes_engine.ports.storage import CompactionLineage, CompactionRecord, HistoryStore

SUMMARY_HEADER = ("[Summary of the earlier conversation: {count} messages were condensed here to save context. "
                  "Everything is still stored; use session_search to find exact wording.]")


def summary_message(record: CompactionRecord, count: int | None = None) -> Message:
    """The user message that stands for the compressed part of the conversation."""
    header = SUMMARY_HEADER.format(count=count if count is not None else
                                   max(0, record.last_message_id - record.first_message_id + 1))
    return Message(role="user", content=f"{header}\n\n{record.summary}",
                   meta={STORED_ID: None, COMPACTION: {"id": record.id, "first": record.first_message_id,
                                                       "last": record.last_message_id, "summary": record.summary,
                                                       "count": count}})


def provisional_summary(summary: str, count: int, first: int | None = None, last: int | None = None) -> Message:
    """The summary message before (or without) its compaction record."""
    header = SUMMARY_HEADER.format(count=count)
    return Message(role="user", content=f"{header}\n\n{summary}",
                   meta={STORED_ID: None, COMPACTION: {"id": None, "first": first, "last": last,
                                                       "summary": summary, "count": count}})


async def load_history(store: HistoryStore, session_id: int) -> list[Message]:
    """The session's history as the model should see it: without compactions, every stored message; with
    them, the head before the covered range + the latest summary + everything after it. Each message knows
    its stored id; a crash-cut tool call gets its "interrupted" result (`repair_history`)."""
    stored = await store.load_stored_messages(session_id)
    latest = await store.latest_compaction(session_id)

    def known(item: Any) -> Message:
        item.message.meta[STORED_ID] = item.id
        return item.message

    if latest is None:
        messages = [known(s) for s in stored]
    else:
        covered = sum(1 for s in stored if latest.first_message_id <= s.id <= latest.last_message_id)
        head = [known(s) for s in stored if s.id < latest.first_message_id]
        tail = [known(s) for s in stored if s.id > latest.last_message_id]
        messages = [*head, summary_message(latest, covered), *tail]
    repaired = repair_history(messages)
    for message in repaired:
        message.meta.setdefault(STORED_ID, None)  # an "interrupted" result made up here is not stored
    return repaired


def _same(message: Message, ref: Any) -> bool:
    if message.role != ref.role:
        return False
    if message.role == "tool":
        return message.tool_call_id == ref.tool_call_id
    if message.role == "user" and message.meta.get("event_id") and ref.event_id:
        return message.meta["event_id"] == ref.event_id
    return message.content == ref.content


async def sync_stored_ids(lineage: CompactionLineage, session_id: int, history: Sequence[Message]) -> None:
    """Give messages appended during this process their stored ids (the loop persists every message
    before appending it), by lining them up with the rows stored after the newest known id."""
    first = next((i for i, m in enumerate(history) if STORED_ID not in m.meta), None)
    if first is None:
        return
    unsynced = [m for m in history[first:] if STORED_ID not in m.meta]
    before = history[:first]  # only ids from before the first unsynced message bound the search
    known = [m.meta[STORED_ID] for m in before if m.meta.get(STORED_ID)]
    known += [m.meta[COMPACTION]["last"] or 0 for m in before if is_summary(m)]
    refs = await lineage.message_refs_after(session_id, max(known, default=0))
    # Tool results are stored as their tools finish, so within a step their order may differ from the
    # history's: they are matched by call id among the rows not taken yet, and only the other messages
    # move the search forward.
    j, taken = 0, set()
    for message in unsynced:
        k = next((k for k in range(j, len(refs)) if k not in taken and _same(message, refs[k])), None)
        if k is not None:
            message.meta[STORED_ID] = refs[k].id
            taken.add(k)
            if message.role != "tool":
                j = k + 1
