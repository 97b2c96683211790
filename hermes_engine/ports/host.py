"""What a feature, a loop or a chat command may ask of the engine that hosts it.

The gateway implements this; features never see the gateway itself, its queues or its adapters. Whatever
a feature needs and this does not offer is a change to this contract, made on purpose.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from hermes_engine.config import BotProfile, Settings
    from hermes_engine.ports.inbound import InboundMessage, ReplyTarget
    from hermes_engine.ports.leases import Leases
    from hermes_engine.ports.metrics import Metrics
    from hermes_engine.ports.models import ModelChain
    from hermes_engine.ports.reply import ChatPresence
    from hermes_engine.ports.services import Services
    from hermes_engine.ports.session import SessionHandle
    from hermes_engine.ports.storage import Store
    from hermes_engine.ports.tools import ToolContext, Tools


class Host(Protocol):
    @property
    def bot(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def profile(self) -> BotProfile: ...

    @property
    def store(self) -> Store: ...

    @property
    def leases(self) -> Leases:
        """This replica's leases: work that must run on one replica at a time (a goal's next step)."""
        ...

    @property
    def metrics(self) -> Metrics:
        """Where the engine reports for monitoring (scheduled jobs' leases, ...)."""
        ...

    @property
    def tools(self) -> Tools:
        """The bot's tools, as the model sees them."""
        ...

    @property
    def services(self) -> Services:
        """What the features serve their tools (`ToolContext.services`: memory, skills, ...)."""
        ...

    def schedule(self, name: str, every_seconds: float, job: Callable[[], Awaitable[Any]]) -> None:
        """Run `job` every `every_seconds` from now until the gateway stops, on one replica of the database
        per interval (a lease named `name`, which also remembers across restarts when it last ran)."""
        ...

    async def handle(self, msg: InboundMessage, *, purpose: str = "turn") -> bool:
        """Accept a message as if it had arrived (a goal's continuation); False for a duplicate."""
        ...

    async def notify(self, target: ReplyTarget, text: str, *, idempotency_key: str | None = None) -> bool:
        """Post a complete message (Markdown) outside any turn; False when that platform is not attached."""
        ...

    def chain(self, models: Sequence[str]) -> ModelChain:
        """The provider chain for these models (shared, built once)."""
        ...

    def chain_for(self, session: SessionHandle) -> ModelChain:
        """The chain a turn of this session uses (its /model choice first)."""
        ...

    def tool_context(self, session: SessionHandle, person_id: int | None, *, in_review: bool = False,
                     is_admin: bool = False, message: InboundMessage | None = None) -> ToolContext:
        """What tools know of a turn; `message` (the one the turn answers) names the sender and the chat."""
        ...

    def is_admin(self, msg: InboundMessage) -> bool:
        """The sender administers the bot (listed in `access.admins`, or holding the platform's admin role in
        a place the operator listed, when the profile lets roles count): every admin check asks this."""
        ...

    async def is_allowed(self, platform: str, user_id: str) -> bool:
        """One of the bot's allowed people: listed in `access.allowed_users` or `access.admins`, or approved
        through pairing (a member let in only because the platform is a membership boundary is not)."""
        ...

    async def may_write(self, target: ReplyTarget, user_id: str, *, direct: bool) -> bool:
        """Would this person's next message in the chat `target` (`direct`: their direct chat) be answered? The
        access gate's decision for it, from the profile's rules and what the chat's adapter says of it
        (`ChatAccess`), without offering pairing: asked before the bot posts there on their behalf (a
        scheduled run)."""
        ...

    async def chat_presence(self, target: ReplyTarget, *, writer: str | None = None) -> ChatPresence:
        """Is the bot in the chat `target` names (by id or by name, as a person wrote it) and may it post there,
        and may `writer` (the platform user it posts for), where the platform says? The chat's adapter asks its
        platform; asked before the bot posts in a chat nobody wrote to it from."""
        ...

    async def replies_to(self, target: ReplyTarget, idempotency_key: str) -> tuple[ReplyTarget, ...]:
        """Where the platform puts replies to what was sent to `target` under `idempotency_key`, when that is a
        conversation apart (`ReplyThreads`: the thread a Slack channel post opens); empty where they stay in the
        chat itself. The adapter reads it from its delivery ledger, so it holds after a restart as well."""
        ...

    def session(self, key: str) -> SessionHandle | None:
        """The session loaded in this process for `key`, if any."""
        ...

    def session_by_id(self, session_id: int) -> SessionHandle | None: ...

    async def ensure_loaded(self, session: SessionHandle, person_id: int | None) -> None:
        """Load the history and freeze the system prompt, once per session."""
        ...

    async def new_session(self, session: SessionHandle) -> SessionHandle:
        """A fresh session for the same key, linked to the old one."""
        ...

    def drop_session(self, key: str) -> None:
        """The session of `key` loaded here, if any, lets go of what it loaded (history, frozen prompt, tool
        list): its next turn reads them from the store again (after the store changed under it: /forget)."""
        ...

    async def interrupt(self, session: SessionHandle) -> bool:
        """Cancel the turn in flight, if any (queued messages stay queued)."""
        ...

    async def person_of(self, platform: str, account: str, user_id: str, display_name: str = "") -> int:
        """The person behind a platform account (cached)."""
        ...

    def forget_people(self) -> None:
        """Drop cached account → person lookups (after accounts were linked)."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run background work owned by the engine (cancelled when it stops)."""
        ...
