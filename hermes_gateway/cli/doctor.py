"""`hermes-gateway doctor`: every check a newcomer's setup needs, one line each."""

from __future__ import annotations

import os
from typing import Iterator

from hermes_engine.config import load_profile, load_settings
from hermes_engine.errors import HermesError

PLATFORM_SECRETS = {
    "telegram": ["TELEGRAM_BOT_TOKEN"],
    "slack": ["SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"],
    "discord": ["DISCORD_BOT_TOKEN"],
}


def diagnose(bot: str | None) -> Iterator[tuple[bool, str]]:
    try:
        settings = load_settings()
        profile = load_profile(bot)
    except HermesError as exc:
        yield False, str(exc)
        return
    yield True, f"bot profile '{profile.name}' loaded"
    yield True, f"data folder {settings.home}"
    from hermes_engine.providers.registry import check_provider

    for spec in profile.models(settings):
        try:
            check_provider(spec)
            yield True, f"model {spec} configured"
        except HermesError as exc:
            yield False, str(exc)
    for platform in profile.platforms:
        needed = PLATFORM_SECRETS.get(platform, [])
        if platform == "slack" and os.environ.get("SLACK_APP_TOKEN"):
            needed = ["SLACK_BOT_TOKEN"]  # Socket Mode: no signed HTTP requests to verify
        missing = [name for name in needed if not os.environ.get(name)]
        if missing:
            yield False, f"{platform}: set {', '.join(missing)} in the environment."
        else:
            yield True, f"{platform}: credentials present"
