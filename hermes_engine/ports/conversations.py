"""The dashboard's reading of conversations and goals: the bots' sessions by last activity, one session's
messages a page at a time, the sessions started from it, a search over all of the bots' conversations, and
their goals a page at a time. Part of `ports.storage.Store`.

Its scope is an admin's, the one `hermes-gateway export trajectories` has: every conversation of the bots
named. The person's own search (`SearchIndex.search_messages`, the `session_search` tool) keeps its narrower
scope; both read the same full-text index, and a query is reduced to its words first, so nothing typed into
the search box is a syntax error. Each call is a bounded number of queries, whatever the page's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from hermes_engine.ports.records import GoalRecord, SearchHit, StoredMessage


@dataclass(frozen=True)
class ListedSession:
    """A session as the dashboard lists it: where it is, when it was last written in, how long it is and who
    wrote in it."""

    id: int
    bot: str
    key: str  # the platform conversation, e.g. "telegram:bot:dm:4242"
    parent_id: int | None  # the session it was started from (/new, a compression hand-over)
    created_at: datetime
    last_at: datetime  # its newest message, or when it was made while it has none
    messages: int
    people: tuple[tuple[int, str], ...]  # (person id, name) of those who wrote in it, first writer first


class ConversationBrowser(Protocol):
    async def browse_sessions(self, *, bots: Sequence[str], offset: int, limit: int) -> tuple[list[ListedSession], int]:
        """A page of the bots' sessions, the most recently written in first and those no one wrote in yet last
        (four queries); and how many there are in all."""

    async def listed_sessions(self, session_ids: Sequence[int]) -> list[ListedSession]:
        """These sessions (those that exist), in the order given (three queries)."""

    async def session_children(self, session_id: int, *, limit: int = 50) -> list[ListedSession]:
        """The sessions started from this one, oldest first (three queries)."""

    async def session_messages(self, session_id: int, *, offset: int, limit: int) -> list[StoredMessage]:
        """A page of the session's stored messages in the order they were appended (one query)."""

    async def search_conversations(self, query: str, *, bots: Sequence[str], any_word: bool = False,
                                   offset: int = 0, limit: int = 20) -> list[SearchHit]:
        """Ranked hits for the words of `query` among the user and assistant messages and the latest summary
        of each of the bots' sessions: all words must match, or any with `any_word`. Tool output is not
        searched. No words, no hits (one query)."""

    async def browse_goals(self, *, bots: Sequence[str], offset: int, limit: int) -> tuple[list[GoalRecord], int]:
        """A page of the bots' goals, the open ones ("active", "paused") first, newest first within each
        (two queries); and how many there are in all."""
