"""A live session as the engine's parts see it: who and where it is, its record and its frozen prompt.

The gateway owns the queue and the running turn of each session; features, commands and loops see this
view only, through the `Host`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hermes_engine.ports.conversation import Usage
from hermes_engine.ports.history import SessionHistory
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.storage import SessionRecord

if TYPE_CHECKING:
    from hermes_engine.ports.tools import Tools


@dataclass(frozen=True)
class SessionScope:
    """Who and where a session is, as prompt contributors need it."""

    bot: str
    session_id: int
    session_key: str
    chat_kind: str
    person_id: int | None = None  # the owner in a DM; None in a multi-speaker session
    shared_scope: str | None = None  # the group/channel/server, for shared memory

    @property
    def multi_speaker(self) -> bool:
        return self.chat_kind != "dm"


@dataclass
class SessionHandle:
    """A session loaded in this process: its record, frozen system prompt and cached history (a view:
    compression may fold it; the stored messages never change). The history is the session's own object
    for its whole life here: only its methods change it (`SessionHistory`)."""

    key: str
    record: SessionRecord
    scope: SessionScope
    target: ReplyTarget
    system_prompt: str | None = None
    # The tools its requests list, taken when it loaded: a tool list that changes later (an MCP server's)
    # applies from the next session, so the request's prefix (and the provider's cache) stays the same.
    tools: Tools | None = None
    usage: Usage = field(default_factory=Usage)
    last_model: str | None = None
    seen_message_id: int | None = None  # the newest stored message when this replica last answered here
    _history: SessionHistory = field(default_factory=SessionHistory, init=False, repr=False)

    @property
    def history(self) -> SessionHistory:
        return self._history

    @history.setter
    def history(self, value: None) -> None:
        """`handle.history = None` is `handle.history.drop()`: the next turn reads the store again."""
        if value is not None:
            raise TypeError("a session keeps its own history; change it through its methods")
        self._history.drop()
