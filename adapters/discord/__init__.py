"""Discord for the gateway: registered as the platform ``discord`` (`PLATFORM`, see `adapters.platform`).

Where the bot answers
- Guild channels: when mentioned (the user, or the bot's managed role) or replied to. With
  ``platforms.discord.threads: true`` (the default) it opens a public thread on that message and answers
  there; it then follows the thread without further mentions. One session per thread, several speakers.
- DMs: one session per person. Whether a stranger is answered (with a pairing code, or not at all) is the
  engine's decision; the adapter only delivers what it says.
- Guilds: only those in ``DISCORD_ALLOWED_GUILDS`` / ``platforms.discord.allowed_guilds`` (none listed:
  none, DMs only). Anyone may invite the bot to a server of his own and make its roles there, so any other
  server is not read at all; the log names each once, with its id. The ``admin_role`` counts in listed
  servers only (the engine's `is_admin` decides, and the profile may turn roles off).
- Slash commands (/goal, /kanban, /new, /stop, /status, /help) are deferred at once and answered by editing the
  deferred response, then follow-ups (`adapters.discord.commands`).

- After a restart or a takeover (a new gateway session, which Discord sends nothing it missed), what was
  posted meanwhile in the conversations it served lately is read back and answered once.

Modules: `options` (profile block and environment), `inbound` (messages in), `catch_up` (what a new session
missed), `parsing` (gateway events read one at a time), `commands` (slash commands), `outbound` (its
`Transport` over REST), `adapter` (lifecycle).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from adapters.discord.adapter import BAD_TOKEN_HINT, PRIVILEGED_INTENT_HINT, DiscordAdapter
from adapters.discord.inbound import CONTENT_INTENT_HINT
from adapters.discord.options import (
    API_BASE_ENV,
    GATEWAY_ENV,
    GUILDS_ENV,
    TOKEN_ENV,
    USERS_ENV,
    DiscordConnection,
    DiscordOptions,
    api_base_url,
    env_ids,
)
from adapters.platform import CredentialCheck, EnvVar, Platform, PlatformOptions
from hermes_engine.errors import ConfigError

if TYPE_CHECKING:
    from aiohttp import web

    from hermes_engine.config import Settings
    from hermes_engine.ports.engine import EnginePort

log = logging.getLogger(__name__)


class DiscordPlatform(Platform):
    name: ClassVar[str] = "discord"
    options_model: ClassVar[type[PlatformOptions]] = DiscordOptions

    def environment(self, options: PlatformOptions, env: Mapping[str, str]) -> list[EnvVar]:
        return [
            EnvVar(TOKEN_ENV, "the bot token from the Discord developer portal", token=True),
            EnvVar(API_BASE_ENV, "a proxy or self-hosted REST base; /api/v10 is added when missing", required=False),
            EnvVar(GATEWAY_ENV, "a proxy or self-hosted gateway URL", required=False),
            EnvVar(GUILDS_ENV, "comma-separated server ids to serve; empty = none, direct messages only",
                   required=False),
            EnvVar(USERS_ENV, "comma-separated user ids the engine may admit besides the profile's",
                   required=False),
        ]

    def problems(self, options: PlatformOptions, env: Mapping[str, str]) -> list[str]:
        found = super().problems(options, env)
        for name in (GUILDS_ENV, USERS_ENV):
            try:
                env_ids(env, name)
            except ConfigError as exc:
                found.append(f"{self.name}: {exc}")
        return found

    async def verify(self, options: PlatformOptions, env: Mapping[str, str]) -> CredentialCheck:
        from adapters.discord.credentials import check_token

        return await check_token(DiscordConnection.from_environment(env))

    def build(self, engine: EnginePort, settings: Settings, options: PlatformOptions,
              http: web.Application | None, env: Mapping[str, str]) -> DiscordAdapter:
        """Raises ConfigError when DISCORD_BOT_TOKEN is missing or an allowlist in the environment is
        malformed. Discord is reached over its gateway, so nothing is mounted on `http`."""
        parsed = options if isinstance(options, DiscordOptions) else self.parse_options(_as_mapping(options))
        assert isinstance(parsed, DiscordOptions)
        if parsed.approval_check_seconds is not None:
            log.warning("platforms.discord.approval_check_seconds has no effect any more: the engine checks "
                        "pairing approvals itself")
        return DiscordAdapter(engine, parsed.with_environment(env), DiscordConnection.from_environment(env),
                              home=Path(settings.home) if settings is not None else None)


def _as_mapping(options: Any) -> Mapping[str, Any]:
    if isinstance(options, PlatformOptions):
        return options.model_dump(exclude_unset=True)
    return dict(options or {})


PLATFORM = DiscordPlatform()

__all__ = [
    "BAD_TOKEN_HINT", "CONTENT_INTENT_HINT", "PLATFORM", "PRIVILEGED_INTENT_HINT", "DiscordAdapter",
    "DiscordConnection", "DiscordOptions", "DiscordPlatform", "api_base_url",
]
