"""The whole feature contract: the extension point for everything that wraps the core loop (memory, skills,
goals, reviews, compression, search).

A feature contributes tools, prompt sections, chat commands and turn hooks. Every hook a feature may
implement is declared here with a no-op default, so the gateway calls hooks, never looks for them, and a
feature overrides only what it uses. Features reach the engine through the `Host` they get in `start`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hermes_engine.ports.commands import CommandRegistry
from hermes_engine.ports.conversation import Message, Usage
from hermes_engine.ports.prompt import PromptContributor
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.session import SessionScope
from hermes_engine.ports.tools import Tool

if TYPE_CHECKING:
    from hermes_engine.ports.host import Host
    from hermes_engine.ports.inbound import InboundMessage
    from hermes_engine.ports.models import CallHook
    from hermes_engine.ports.session import SessionHandle


@dataclass
class TurnOutcome:
    """What one finished turn did; handed to `Feature.on_turn_end` after the reply was delivered."""

    scope: SessionScope
    person_id: int | None
    new_messages: list[Message]  # the user message and everything the turn appended
    tool_calls: int  # tool calls made in the turn
    tool_iterations: int  # model calls that asked for tools
    usage: Usage = field(default_factory=Usage)
    final_text: str = ""
    failed: bool = False
    interrupted: bool = False
    purpose: str = "turn"  # "turn" | "goal"
    message_id: str = ""  # the platform's id of the message the turn answered


class Feature:
    """The whole feature contract: everything a feature may declare and every hook the engine calls."""

    name: str = "feature"

    def tools(self) -> list[Tool]:
        """The tools this feature declares (`ports/tools.py`); a bot profile selects them by toolset."""
        return []

    def services(self) -> Mapping[ServiceKey[Any], object]:
        """Objects this feature's tools reach through `ToolContext.services`, each under its typed key
        (`ports/services.py`), e.g. {MEMORY: book}."""
        return {}

    def contributors(self) -> Sequence[PromptContributor]:
        """What this feature adds to the prompt (`ports/prompt.py`): frozen sections and per-turn notes."""
        return []

    def register_commands(self, registry: CommandRegistry) -> None:
        """Add this feature's chat commands (`ports/commands.py`); called once, before `start`."""
        return None

    async def start(self, host: Host) -> None:
        """The engine is up: keep `host`, the only way this feature reaches the engine, and start any
        background work."""
        return None

    async def stop(self) -> None:
        """The engine is stopping: end background work and let go of what `start` took."""
        return None

    async def settle_tools(self) -> list[str]:
        """A session is about to freeze its tool list, which it keeps to its end: wait (bounded, and not at
        all when nothing is on its way) for tools this feature is still bringing, then name each source
        whose tools the list will lack, e.g. "MCP server files (still starting)"."""
        return []

    async def expand_command(self, name: str, args: str, bot: str) -> str | None:
        """Text to run as a user message for a command no one registered (e.g. `/<skill-name>`)."""
        return None

    def on_message(self, session_key: str, message: InboundMessage) -> None:
        """A person's message arrived for this session, before it is queued (e.g. it answers, and so
        denies, a question still waiting for approval). Must be quick."""
        return None

    async def accept_turn(self, message: InboundMessage, purpose: str) -> bool:
        """Last word before a queued turn runs; False skips it (e.g. a goal paused while it waited)."""
        return True

    async def on_turn_start(self, scope: SessionScope) -> None:
        """A live turn is about to start in this session (e.g. cancel a background review)."""
        return None

    async def call_hook(self, session: SessionHandle, message: InboundMessage | None) -> CallHook | None:
        """A hook around each model call of this turn (compression); the first feature to give one wins.
        Runs before the turn's first model call, so it may also prepare the history (hygiene)."""
        return None

    async def on_stop(self, scope: SessionScope) -> None:
        """The person said /stop in this session."""
        return None

    async def on_turn_end(self, outcome: TurnOutcome) -> None:
        """Called after the reply was delivered; must not block (spawn background work)."""
        return None

    def on_session_evicted(self, scope: SessionScope) -> None:
        """This session left the gateway's memory (idle while too many others were live, or replaced by
        /new): drop whatever is kept for it. If it comes back it is reloaded from the store. Runs while
        the session table is locked, so it must be quick."""
        return None

    async def status_lines(self, scope: SessionScope, person_id: int | None) -> list[str]:
        """Lines this feature adds to /status."""
        return []

