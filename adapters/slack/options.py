"""``platforms.slack`` in a bot profile. Secrets stay in the environment (the options only name the variables
that hold them), so a profile can be committed and shared as it is."""

from __future__ import annotations

from pydantic import Field

from adapters.downloads import DEFAULT_LIMIT_MB
from adapters.platform import PlatformOptions


class SlackOptions(PlatformOptions):
    """Intervals are seconds. The bounds are Slack's: a message holds at most 40,000 characters (more is
    refused, not cut), and paths and commands are what Slack posts, so they start with a slash."""

    events_path: str = Field("/slack/events", pattern=r"^/")  # Events API and slash commands, HTTP mode
    goal_command: str = Field("/goal", pattern=r"^/\S+$")
    hermes_command: str = Field("/hermes", pattern=r"^/\S+$")
    kanban_command: str = Field("/kanban", pattern=r"^/\S+$")
    native_streaming: bool = True  # chat.startStream in threads where Slack allows it
    edit_interval_seconds: float = Field(1.2, ge=0)  # chat.update is Tier 3, ~50 a minute per channel
    max_message_length: int = Field(40_000, ge=32, le=40_000)
    max_file_mb: float = Field(DEFAULT_LIMIT_MB, gt=0)  # bigger files people share are refused, not kept
    socket_ping_interval: float = Field(10.0, gt=0)  # Socket Mode: 4 intervals without a pong reconnect
    thread_check_ttl_seconds: float = Field(300.0, ge=0)  # how long "the bot is not in that thread" holds
    user_cache_seconds: float = Field(3600.0, ge=0)  # display names from users.info
    bot_token_env: str = "SLACK_BOT_TOKEN"
    signing_secret_env: str = "SLACK_SIGNING_SECRET"
    app_token_env: str = "SLACK_APP_TOKEN"
