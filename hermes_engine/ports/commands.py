"""Chat commands (`/new`, `/goal …`, `/memory …`): one registry, shared by every platform.

Features register their commands here; the gateway dispatches them before any model call. A handler
returns the text to send back (Markdown), or None when it answered by other means.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hermes_engine.ports.inbound import InboundMessage

if TYPE_CHECKING:
    from hermes_engine.ports.host import Host
    from hermes_engine.ports.session import SessionHandle


@dataclass
class CommandContext:
    host: Host
    session: SessionHandle
    message: InboundMessage
    person_id: int
    args: str
    is_admin: bool = False


Handler = Callable[[CommandContext], Awaitable[str | None]]


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    handler: Handler
    admin_only: bool = False
    immediate: bool = False  # runs at once, even while a turn is in flight (e.g. /stop, /goal status)
    aliases: tuple[str, ...] = ()


@dataclass
class CommandRegistry:
    _commands: dict[str, Command] = field(default_factory=dict)

    def add(self, command: Command) -> Command:
        for name in (command.name, *command.aliases):
            self._commands[name] = command
        return command

    def command(self, name: str, summary: str, *, admin_only: bool = False, immediate: bool = False,
                aliases: tuple[str, ...] = ()) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.add(Command(name, summary, handler, admin_only, immediate, aliases))
            return handler
        return register

    def get(self, name: str | None) -> Command | None:
        return self._commands.get(name or "")

    def listing(self) -> list[Command]:
        """Each command once, in name order (for /help and platform command menus)."""
        unique = {c.name: c for c in self._commands.values()}
        return [unique[n] for n in sorted(unique)]

    def help_text(self) -> str:
        return "\n".join(f"/{c.name} — {c.summary}" for c in self.listing() if not c.admin_only)


def as_dict(command: Command) -> dict[str, Any]:
    return {"command": command.name, "description": command.summary[:256]}
