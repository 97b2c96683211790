"""What the Conversations pages show, read through the `ConversationBrowser` port: the bots' sessions by last
activity, a search over them, and one conversation with its messages, tool calls and results as the store
keeps them, its summaries and the sessions around it.

Text is shown as `hermes-gateway export trajectories` writes it: `redact` over every message, argument and
summary (tool calls and results are stored redacted already; what people and the model wrote is not), so the
page shows no more than the export shows the operator.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from hermes_engine.agent.tool_record import META_KEY
from hermes_engine.ports.conversations import ListedSession
from hermes_engine.ports.storage import CompactionRecord, SearchHit, StoredMessage
from hermes_engine.secrets import redact
from hermes_gateway.dashboard.views import Sources

SESSIONS_PER_PAGE = 50
MESSAGES_PER_PAGE = 100
HITS_PER_PAGE = 20
MARK_OPEN, MARK_CLOSE = "«", "»"  # what the search index puts around the words it matched


@dataclass(frozen=True)
class SessionList:
    rows: tuple[ListedSession, ...]
    page: int  # from 1
    pages: int
    total: int


@dataclass(frozen=True)
class Segment:
    text: str
    marked: bool  # a word the search matched


@dataclass(frozen=True)
class Found:
    hit: SearchHit
    session: ListedSession | None
    snippet: tuple[Segment, ...]


@dataclass(frozen=True)
class Search:
    query: str
    any_word: bool  # no conversation held all the words, so these hold any of them
    found: tuple[Found, ...]
    page: int
    more: bool


@dataclass(frozen=True)
class ShownCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ShownMessage:
    id: int
    role: str
    who: str
    person_id: int | None
    at: datetime
    text: str
    calls: tuple[ShownCall, ...]  # an assistant message's tool calls
    tool_name: str | None  # a tool result's
    tool_call_id: str | None
    is_error: bool
    images: int
    result_chars: int | None  # how long the tool's result was before redaction, as its record says
    duration_ms: int | None
    model: str | None
    summarised_in: int | None  # the newest compaction that covers it


@dataclass(frozen=True)
class ShownCompaction:
    record: CompactionRecord
    summary: str


@dataclass(frozen=True)
class Conversation:
    session: ListedSession
    parent: ListedSession | None
    children: tuple[ListedSession, ...]
    compactions: tuple[ShownCompaction, ...]
    messages: tuple[ShownMessage, ...]
    page: int
    pages: int


def _pages(total: int, per_page: int) -> int:
    return max(1, -(-total // per_page))


async def sessions(sources: Sources, page: int = 1) -> SessionList:
    """The bots' sessions, the most recently written in first, a page at a time (past the end: the last)."""
    store, bots = sources.store, list(sources.bots)
    page = max(page, 1)
    rows, total = await store.browse_sessions(bots=bots, offset=(page - 1) * SESSIONS_PER_PAGE,
                                              limit=SESSIONS_PER_PAGE)
    pages = _pages(total, SESSIONS_PER_PAGE)
    if page > pages:
        page = pages
        rows, total = await store.browse_sessions(bots=bots, offset=(page - 1) * SESSIONS_PER_PAGE,
                                                  limit=SESSIONS_PER_PAGE)
    return SessionList(tuple(rows), page, pages, total)


def snippet(text: str) -> tuple[Segment, ...]:
    """The index's snippet as plain and matched stretches. A snippet in which `redact` finds a secret is shown
    redacted and unmarked: the markers could split the secret's shape and hide it from the scan."""
    plain = text.replace(MARK_OPEN, "").replace(MARK_CLOSE, "")
    if redact(plain) != plain:
        return (Segment(redact(plain), False),)
    segments: list[Segment] = []
    for n, part in enumerate(text.split(MARK_OPEN)):
        marked, _, rest = part.partition(MARK_CLOSE) if n else ("", "", part)
        if marked:
            segments.append(Segment(marked, True))
        if rest:
            segments.append(Segment(rest, False))
    return tuple(segments)


async def search(sources: Sources, query: str, page: int = 1, *, any_word: bool = False) -> Search:
    """Hits for the words of `query`; on the first page, when no conversation holds them all, those holding any."""
    store, bots = sources.store, list(sources.bots)
    page = max(page, 1)

    async def hits(any_of: bool) -> list[SearchHit]:
        return await store.search_conversations(query, bots=bots, any_word=any_of, offset=(page - 1) * HITS_PER_PAGE,
                                                limit=HITS_PER_PAGE + 1)

    found = await hits(any_word)
    if not found and not any_word and page == 1:
        any_word = True
        found = await hits(True)
    more, found = len(found) > HITS_PER_PAGE, found[:HITS_PER_PAGE]
    listed = {s.id: s for s in await store.listed_sessions([hit.session_id for hit in found])}
    return Search(query, any_word, tuple(Found(hit, listed.get(hit.session_id), snippet(hit.snippet)) for hit in found),
                  page, more)


async def conversation(sources: Sources, session_id: int, page: int = 1) -> Conversation | None:
    """One of the bots' sessions, its messages oldest first a page at a time (past the end: the last page)."""
    store = sources.store
    listed = await store.listed_sessions([session_id])
    if not listed or listed[0].bot not in sources.bots:
        return None
    session = listed[0]
    pages = _pages(session.messages, MESSAGES_PER_PAGE)
    page = min(max(page, 1), pages)
    parents = await store.listed_sessions([session.parent_id]) if session.parent_id else []
    children = await store.session_children(session_id)
    compactions = await store.list_compactions([session_id])
    stored = await store.session_messages(session_id, offset=(page - 1) * MESSAGES_PER_PAGE, limit=MESSAGES_PER_PAGE)
    names = dict(session.people)
    shown = tuple(_shown(item, names, compactions) for item in stored)
    return Conversation(session, parents[0] if parents else None, tuple(children),
                        tuple(ShownCompaction(c, redact(c.summary)) for c in compactions), shown, page, pages)


def _shown(item: StoredMessage, names: dict[int, str], compactions: list[CompactionRecord]) -> ShownMessage:
    message = item.message
    if message.role == "user":
        who = names.get(item.person_id, "someone") if item.person_id is not None else "someone"
    elif message.role == "tool":
        who = f"tool {message.tool_name or '?'}"
    else:
        who = message.role
    record = message.meta.get(META_KEY)
    kept: dict[str, object] = record if isinstance(record, dict) else {}
    covering = [c.id for c in compactions if c.first_message_id <= item.id <= c.last_message_id]
    return ShownMessage(
        id=item.id, role=message.role, who=who, person_id=item.person_id, at=item.created_at,
        text=redact(message.content),
        calls=tuple(ShownCall(c.id, c.name, redact(c.arguments)) for c in message.tool_calls),
        tool_name=message.tool_name, tool_call_id=message.tool_call_id, is_error=message.is_error,
        images=len(message.images), result_chars=_number(kept.get("result_chars")),
        duration_ms=_number(kept.get("duration_ms")), model=item.model,
        summarised_in=covering[-1] if covering else None)


def _number(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
