"""The tool contract: what a tool declares, what it knows of the turn it runs in, and what it returns.

Features declare tools (`Feature.tools`); the engine's `ToolRegistry` (`hermes_engine/tools/registry.py`)
checks their arguments, bounds their time and runs them. A tool's parameter annotated with `ToolContext`
gets the context injected.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from hermes_engine.ports.conversation import ImagePart, ToolCall
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.services import Services


@dataclass(frozen=True)
class ToolSchema:
    """A tool as the model sees it: sent with every request, so kept compact."""

    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema object


@dataclass
class ToolContext:
    """What a tool may know about the turn it runs in. Injected into any parameter annotated with it."""

    bot: str
    session_id: int
    session_key: str
    person_id: int | None = None
    chat_kind: str = "dm"
    shared_scope: str | None = None  # key of the group/channel/server for shared memory
    services: Services = field(default_factory=Services)  # what features serve their tools (`ports/services.py`)
    in_review: bool = False  # background review: no user-visible side effects
    is_admin: bool = False  # the person speaking administers the bot (admin-only tools)
    untrusted: bool = False  # the session has read untrusted content: writes to itself scan strictly
    user_id: str | None = None  # who the turn acts for (None: no person, e.g. a review)
    # Nobody is at the keyboard: a goal continuation or a kanban worker acting for the person who set the
    # goal or made the card, with that person's access.
    unattended: bool = False
    target: ReplyTarget | None = None  # where the turn answers (approval questions are asked there)
    # A workspace folder of its own (a kanban card's) instead of the conversation's.
    workspace: str | None = None
    # Interim text shown to the person while the tool runs (a command's output), replaced by the answer
    # when it comes; None when the reply is not streamed.
    progress: Callable[[str], Awaitable[None]] | None = None
    # What tools count over the rest of the turn (a tool's failed calls), so a retry loop can be told apart.
    counts: Counter[str] = field(default_factory=Counter)
    delegation_depth: int = 0  # 0 for a turn; a sub-agent's calls are one deeper than its parent's


class ToolTimedOut(Exception):
    """A tool call went over its time limit; the message is the error the model reads."""


@dataclass(frozen=True)
class ToolResult:
    content: str
    is_error: bool = False
    # Images for the model to look at (a tool's screenshot, an MCP server's picture); `content` still
    # describes each, for models that take text only.
    images: tuple[ImagePart, ...] = ()


class Tool(Protocol):
    """One tool a feature declares. `@tool` in `hermes_engine/tools/registry.py` makes one of a typed
    function; `invoke` checks the arguments against the declared ones before the call."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> dict[str, Any]: ...

    @property
    def toolset(self) -> str:
        """The group a bot profile selects it by ("core", "memory", "web", ...)."""
        ...

    @property
    def time_limit(self) -> float:
        """Seconds a call may take before it becomes an error result."""
        ...

    @property
    def schema(self) -> ToolSchema: ...

    async def invoke(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Run the call; `ToolTimedOut` over the time limit, `MalformedToolArguments` (and no call) when the
        arguments do not fit the declared ones."""
        ...


class Tools(Protocol):
    """A bot's tools as the model sees them (`Host.tools`, a session's frozen list)."""

    def __iter__(self) -> Iterator[Tool]: ...

    def __len__(self) -> int: ...

    def get(self, name: str) -> Tool | None: ...

    def register(self, t: Tool) -> Tool:
        """Add a tool whose source came later (an MCP server's); sessions already loaded keep their list."""
        ...

    def unregister(self, name: str) -> None: ...

    def schemas(self) -> tuple[ToolSchema, ...]: ...

    async def call(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Run one tool call; never raises: a failure becomes an error result the model can read."""
        ...
