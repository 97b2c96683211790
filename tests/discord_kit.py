"""What every Discord test sets up: discord.py pointed at the fake through its own configuration."""

from __future__ import annotations

import discord
import pytest
from discord.gateway import DiscordWebSocket
from fakes.fake_discord import FakeDiscord

FAST = {"edit_interval_seconds": 0.05, "guild_ready_timeout": 0.05, "ready_timeout": 10}


def discord_environment(monkeypatch: pytest.MonkeyPatch, fake: FakeDiscord) -> None:
    """The variables an operator sets for a Discord bot, pointed at the fake: the fake's own server listed,
    and no user allowlist. The adapter sets discord.py's REST and gateway URLs (class attributes, the
    library's own configuration points) from them; they are restored after the test."""
    monkeypatch.setattr(discord.http.Route, "BASE", discord.http.Route.BASE)
    monkeypatch.setattr(DiscordWebSocket, "DEFAULT_GATEWAY", DiscordWebSocket.DEFAULT_GATEWAY)
    monkeypatch.setenv("DISCORD_BOT_TOKEN", fake.token)
    monkeypatch.setenv("DISCORD_API_BASE_URL", fake.url)  # "/api/v10" is appended
    monkeypatch.setenv("DISCORD_GATEWAY_URL", fake.gateway_url)
    monkeypatch.setenv("DISCORD_ALLOWED_GUILDS", fake.guild_id)
    monkeypatch.delenv("DISCORD_ALLOWED_USERS", raising=False)
