"""What the message receiver and the slash commands need of the Discord adapter, so neither imports it."""

from __future__ import annotations

from typing import Any, Protocol

import discord

from adapters.discord.files import DiscordFiles
from adapters.discord.options import DiscordOptions
from adapters.discord.outbound import DiscordOutbound
from hermes_engine.ports.engine import AccessDecision, EnginePort
from hermes_engine.ports.inbound import ReplyTarget


class DiscordHost(Protocol):
    engine: EnginePort
    options: DiscordOptions
    outbound: DiscordOutbound
    account: str
    receiving: bool
    client: Any
    files: DiscordFiles | None  # None: attachments are not fetched

    @property
    def platform(self) -> str: ...

    def me(self) -> discord.ClientUser: ...

    def serves(self, guild_id: int, name: str = "") -> bool: ...

    async def admit(self, user: discord.User | discord.Member, channel_id: int | None, *,
                    direct: bool) -> AccessDecision: ...

    async def send(self, target: ReplyTarget, text: str, *, idempotency_key: str | None = None) -> None: ...
