"""A session's history as the model sees it, with one owner: the only place its messages change.

The stored messages never change; this is the view of them a session loaded (compression may have folded
its middle into a summary). The agent loop appends to it, compression hands it a shorter view, and a drop
sends the next load back to the store. It reads as a sequence of its messages.

A history no store backs (a sub-agent's, a review's snapshot) is the same object made on a list of its own:
loaded from the start, and nothing ever drops it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, overload

from hermes_engine.ports.conversation import Message

if TYPE_CHECKING:
    from hermes_engine.ports.storage import HistoryStore


class HistoryView(Protocol):
    """How a session's stored messages become the view the model sees (compaction summaries in place of what
    they cover, a crash's unfinished tool calls closed). Compression implements it
    (`compression/lineage.load_history`); the gateway is handed it, so the core never imports a feature."""

    async def __call__(self, store: HistoryStore, session_id: int, /) -> list[Message]: ...


class SessionHistory(Sequence[Message]):
    def __init__(self, messages: list[Message] | None = None) -> None:
        """Not loaded, or loaded with `messages` (the list itself: what is appended, its giver sees too)."""
        self._messages: list[Message] = messages if messages is not None else []
        self._loaded = messages is not None

    @property
    def loaded(self) -> bool:
        """Whether it holds the session's messages; if not, the next load reads them from the store."""
        return self._loaded

    def load(self, messages: list[Message]) -> None:
        """The view as read from the store."""
        self._messages = messages
        self._loaded = True

    def drop(self) -> None:
        """The store is the truth again: the next load reads it (what this process added and did not store,
        or stored but must not show again, is gone then). Until that load the messages stay, so a turn that
        a drop raced goes on with what it had."""
        self._loaded = False

    def view(self) -> Sequence[Message]:
        """The messages the model sees, live: the same sequence grows as messages are appended, until a new
        view replaces it (the provider's count of a request is kept per sequence)."""
        return self._messages

    def append(self, message: Message) -> None:
        self._messages.append(message)

    def replace_view(self, messages: Sequence[Message]) -> None:
        """Compression's shorter view takes the place of the current one."""
        self._messages = list(messages)

    def swap(self, old: Message, new: Message) -> None:
        """Put `new` where `old` is (found by identity, newest first: compression may have moved it), if it is
        still in view."""
        for i in range(len(self._messages) - 1, -1, -1):
            if self._messages[i] is old:
                self._messages[i] = new
                return

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        return self._messages[index]

    def __len__(self) -> int:
        return len(self._messages)

    def __repr__(self) -> str:
        return f"SessionHistory({len(self._messages)} messages{'' if self._loaded else ', not loaded'})"
