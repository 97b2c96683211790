"""``platforms.telegram`` in a bot profile: how this bot talks to the Bot API. Secrets and endpoints are
not here but in the environment (see `adapters.telegram.platform`), so a profile can be shared as is."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from adapters.platform import PlatformOptions


class TelegramOptions(PlatformOptions):
    """Intervals are seconds. The pacing defaults are Telegram's published limits; the retry and polling
    defaults outlast a 30 s Bot API outage without hammering it."""

    mode: Literal["polling", "webhook"] = "polling"
    max_file_mb: float = Field(20, gt=0)  # bigger files are refused, not downloaded
    webhook_url: str | None = None  # public URL Telegram posts to; TELEGRAM_WEBHOOK_URL also works
    local_mode: bool = False  # a local Bot API server (telegram-bot-api --local) serving files from disk
    reply_to: Literal["groups", "always", "never"] = "groups"  # quote the person's message
    register_commands: bool = True  # setMyCommands from the engine's commands at start
    # pacing and retries
    edit_interval_seconds: float = Field(1.0, ge=0)  # per private chat (~1 message or edit a second)
    group_interval_seconds: float = Field(3.0, ge=0)  # per group (20 a minute)
    global_rate_per_second: float = Field(30, gt=0)
    send_retries: int = Field(8, ge=0)  # transient failures (5xx, network) of one call, backing off …
    send_backoff: float = Field(0.5, ge=0)  # … from this …
    send_backoff_max: float = Field(8.0, ge=0)  # … to this: about 40 s in all, longer than a 30 s outage
    # polling
    poll_timeout: float = Field(30, ge=0)  # long-poll seconds of one getUpdates
    poll_backoff: float = Field(1.0, ge=0)  # first wait after a failed getUpdates, growing ×1.5 …
    poll_backoff_max: float = Field(30.0, ge=0)  # … to this
    poll_jitter: float = Field(0.25, ge=0, le=1)  # ± share of randomisation of each wait
    # Replicas on one database elect one poller per bot; a stand-by takes over this long after the poller
    # stops renewing (renewed every third of it).
    poller_lease_seconds: float = Field(30.0, gt=0)
    connect_timeout: float = Field(10.0, gt=0)
    read_timeout: float = Field(15.0, gt=0)
