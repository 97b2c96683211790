"""The inbound port: what a platform adapter may ask of the engine.

An adapter translates; the engine decides. So an adapter hands over `InboundMessage`s, shows the
engine's commands in its platform's menu, and asks — never decides itself — whether a person may be
answered, which session a message belongs to, and which thread holds a channel's goal. The gateway
implements this; an adapter never sees the gateway, its store or its profile.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from hermes_engine.ports.inbound import InboundMessage, LastInbound
from hermes_engine.ports.reply import Outlet


@dataclass(frozen=True)
class CommandInfo:
    name: str
    summary: str
    admin_only: bool = False


@dataclass(frozen=True)
class AccessDecision:
    allowed: bool
    reply: str | None = None  # what to tell the person instead of an answer (their pairing code), if anything


class EnginePort(Protocol):
    @property
    def bot(self) -> str:
        """The bot profile's name (routes, log lines)."""
        ...

    def attach(self, outlet: Outlet) -> None:
        """Answers for this outlet's platform go out through it."""
        ...

    async def handle(self, msg: InboundMessage) -> bool:
        """Accept one message; returns once it is recorded durably (False: a duplicate, ignored)."""
        ...

    def command_menu(self) -> list[CommandInfo]:
        """Every chat command once, in name order, for the platform's command menu."""
        ...

    def knows_command(self, name: str) -> bool: ...

    async def admit(self, platform: str, user_id: str, *, user_name: str = "", chat_id: str | None = None,
                    direct: bool, is_bot: bool = False, also_allowed: Collection[str] = (),
                    membership_boundary: bool = False) -> AccessDecision:
        """May this person be answered here? `direct`: a direct message (where pairing is offered);
        `also_allowed`: the platform's own allowlist from its environment; `membership_boundary`: the
        platform admits only members already (a Slack workspace), so an empty allowlist lets all in."""
        ...

    def session_key(self, msg: InboundMessage) -> str:
        """The session `msg` belongs to (for per-conversation folders)."""
        ...

    async def goal_thread(self, platform: str, account: str, chat_id: str) -> str | None:
        """The thread of the newest open goal in this channel, if any (where `/goal status` answers)."""
        ...

    async def last_inbound(self, platform: str, account: str, *, since: datetime, limit: int) -> list[LastInbound]:
        """Per conversation of `account` written in since `since`, the newest person's message recorded (the
        `limit` most recent conversations): where an adapter reads back what its platform posted while it
        was away and will not send again."""
        ...
