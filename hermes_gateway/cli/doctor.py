"""`hermes-gateway doctor`: every check a newcomer's setup needs, one line each."""

from __future__ import annotations

import os
from collections.abc import Iterator

from adapters.platform import load as load_platform
from hermes_engine.config import load_profile, load_settings
from hermes_engine.errors import HermesError


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
    for name, raw_options in profile.platforms.items():
        try:  # each platform says what it needs: its options model and its environment
            platform = load_platform(name)
            problems = platform.problems(platform.parse_options(raw_options), os.environ)
        except HermesError as exc:
            yield False, str(exc)
            continue
        if problems:
            yield from ((False, problem) for problem in problems)
        else:
            yield True, f"{name}: options valid, credentials present"
