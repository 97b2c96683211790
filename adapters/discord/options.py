"""How the Discord adapter is configured, in two halves that live in different places on purpose.

`DiscordOptions` is ``platforms.discord`` in a bot profile: behaviour that belongs to the bot and can be
shared with the profile. `DiscordConnection` comes from the environment only: the token is a secret, and
the endpoints differ between deployments (a proxy, a test server) while the profile stays the same. The
two allowlists may be given in either place, because operators often keep ids beside the token.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from adapters.downloads import DEFAULT_LIMIT_MB
from adapters.parts import DISCORD
from adapters.platform import PlatformOptions
from hermes_engine.errors import ConfigError

TOKEN_ENV = "DISCORD_BOT_TOKEN"
API_BASE_ENV = "DISCORD_API_BASE_URL"
GATEWAY_ENV = "DISCORD_GATEWAY_URL"
GUILDS_ENV = "DISCORD_ALLOWED_GUILDS"
USERS_ENV = "DISCORD_ALLOWED_USERS"


def parse_ids(value: Any) -> frozenset[str]:
    """Discord ids from a YAML list (numbers or strings) or a comma-separated string, as people write
    them in either place; raises ValueError naming the first entry that is not an id."""
    if value is None or value == "":
        return frozenset()
    if isinstance(value, str):
        items: Iterable[Any] = value.split(",")
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = value
    else:
        raise ValueError("must be a list of Discord ids (or a comma-separated string)")
    ids = {str(item).strip() for item in items if str(item).strip()}
    bad = sorted(i for i in ids if not i.isdigit())
    if bad:
        raise ValueError(f"holds '{bad[0]}', which is not a Discord id (a number)")
    return frozenset(ids)


def env_ids(env: Mapping[str, str], name: str) -> frozenset[str]:
    try:
        return parse_ids(env.get(name))
    except ValueError as exc:
        raise ConfigError(f"Environment variable {name} {exc}.") from None


def api_base_url(value: str) -> str:
    """``http://host:port`` or ``.../api`` → ``.../api/v10``; a URL that names a version is kept, because
    discord.py builds every route on this base and expects the version in it."""
    base = value.strip().rstrip("/")
    if re.search(r"/api/v\d+$", base):
        return base
    if base.endswith("/api"):
        return base + "/v10"
    return base + "/api/v10"


class DiscordOptions(PlatformOptions):
    """``platforms.discord``. Defaults follow Discord's own limits (5 edits per 5 s per channel, a 3 s
    window to answer an interaction); the timeouts are short enough that a stuck start is reported."""

    threads: bool = True  # answer a mention in a thread opened on the message, one session per thread
    # Members holding this role are reported to the engine as holding it; the engine counts it in listed
    # servers only, and only when the profile's `access.platform_admins` lets it.
    admin_role: str | None = None
    # The servers the operator chose: messages from any other are dropped before the engine sees them, like
    # traffic for another bot, since whoever invites the bot to his own server also makes its roles.
    # DISCORD_ALLOWED_GUILDS adds. None listed: no server, only direct messages.
    allowed_guilds: frozenset[str] = frozenset()
    # Handed to the engine's access decision with DISCORD_ALLOWED_USERS; the engine decides with them.
    allowed_users: frozenset[str] = frozenset()
    edit_interval_seconds: float = Field(DISCORD.edit_interval_seconds, ge=0)
    max_file_mb: float = Field(DEFAULT_LIMIT_MB, gt=0)  # bigger attachments are refused, not kept
    guild_ready_timeout: float = Field(2.0, ge=0)  # discord.py's wait for GUILD_CREATEs after READY
    ready_timeout: float = Field(30.0, ge=0)  # how long start() waits for READY before going on
    sync_commands: bool = True  # bulk-overwrite the slash commands at start
    thread_auto_archive_minutes: Literal[60, 1440, 4320, 10080] = 1440  # the durations Discord accepts
    # Longer 429s come back to the outbound scheduler, which pauses only that channel.
    max_ratelimit_timeout: float = Field(30.0, ge=30)
    # No longer read: the engine watches pairing approvals for every platform at its own pace. Accepted so
    # profiles written for earlier versions still load; `build` says so in the log.
    approval_check_seconds: float | None = None
    # Across replicas on one database, one elected replica holds the gateway connection; a stand-by
    # connects this long after the holder stops renewing (renewed every third of it).
    lease_seconds: float = Field(30.0, gt=0)
    # When a new gateway session is ready (a start, a takeover, a session Discord would not resume), what was
    # posted while the bot had none is read back in the conversations it recorded a message in within this
    # many hours (0: never), at most `catch_up_messages` of the newest in each (see `adapters.discord.catch_up`).
    catch_up_hours: float = Field(24.0, ge=0)
    catch_up_messages: int = Field(100, ge=1, le=1000)
    # Sharding (large bots): the bot's shard count and the shards this replica runs. With `shard_ids` set
    # no replica is elected: each runs its own shards. `shard_count` alone: the elected replica runs all.
    shard_count: int | None = Field(None, ge=1)
    shard_ids: tuple[int, ...] | None = None

    @model_validator(mode="after")
    def shards_within_count(self) -> DiscordOptions:
        if self.shard_ids is not None:
            if self.shard_count is None:
                raise ValueError("shard_ids needs shard_count (the bot's total number of shards)")
            outside = [i for i in self.shard_ids if not 0 <= i < self.shard_count]
            if outside or not self.shard_ids:
                raise ValueError(f"shard_ids must be one or more of 0..{self.shard_count - 1}")
        return self

    @property
    def sharded_here(self) -> bool:
        """This replica runs the shards its configuration names, without an election."""
        return self.shard_ids is not None

    @field_validator("allowed_guilds", "allowed_users", mode="before")
    @classmethod
    def ids_from_list_or_text(cls, value: Any) -> frozenset[str]:
        return parse_ids(value)

    @field_validator("admin_role", mode="before")
    @classmethod
    def role_name_or_none(cls, value: Any) -> str | None:
        return (str(value).strip() or None) if value not in (None, "") else None

    def with_environment(self, env: Mapping[str, str]) -> DiscordOptions:
        """These options with the allowlists from the environment added (both places count)."""
        return self.model_copy(update={
            "allowed_guilds": self.allowed_guilds | env_ids(env, GUILDS_ENV),
            "allowed_users": self.allowed_users | env_ids(env, USERS_ENV),
        })

    def guild_allowed(self, guild_id: int | str | None) -> bool:
        return guild_id is not None and str(guild_id) in self.allowed_guilds


@dataclass(frozen=True)
class DiscordConnection:
    """Where and as whom to connect. Endpoints are None unless set, so discord.py's defaults stay."""

    token: str
    api_base_url: str | None = None
    gateway_url: str | None = None

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> DiscordConnection:
        token = (env.get(TOKEN_ENV) or "").strip()
        if not token:
            raise ConfigError(f"Environment variable {TOKEN_ENV} is not set (the bot token from the Discord "
                              "developer portal).")
        api = (env.get(API_BASE_ENV) or "").strip()
        gateway = (env.get(GATEWAY_ENV) or "").strip()
        return cls(token=token, api_base_url=api_base_url(api) if api else None, gateway_url=gateway or None)
