"""`hermes-gateway doctor`: every check `run` makes before it starts (`preflight.Preflight`, the same list),
for every `--bot` given, one line each; with `--service-user`, the home is tried as the user a service runs
the gateway as."""

from __future__ import annotations

from collections.abc import AsyncIterator

from hermes_engine.config import BotProfile, load_profile, load_settings
from hermes_engine.errors import HermesError
from hermes_gateway.home_check import ServiceUser
from hermes_gateway.preflight import Finding, Preflight


async def diagnose(bots: list[str], service_user: str | None = None) -> AsyncIterator[Finding]:
    try:
        settings = load_settings()
    except HermesError as exc:
        yield Finding("fix", str(exc))
        return
    user = None
    if service_user is not None:
        try:
            user = ServiceUser.named(service_user)
        except ValueError as exc:
            yield Finding("fix", str(exc))
    profiles: list[BotProfile] = []
    chosen: list[str | None] = list(bots) or [None]  # none given: the default profile, as `run` takes it
    for bot in chosen:
        try:
            profile = load_profile(bot)
        except HermesError as exc:
            yield Finding("fix", str(exc))
            continue
        profiles.append(profile)
        yield Finding("ok", f"bot profile '{profile.name}' loaded")
    if not profiles:
        return
    async for finding in Preflight(settings, profiles, serving=True, service_user=user).findings():
        yield finding
