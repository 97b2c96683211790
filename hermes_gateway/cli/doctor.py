"""`hermes-gateway doctor`: the checks `run` makes before it starts, one line each, with what each missing
key is for."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from hermes_engine.config import load_profile, load_settings
from hermes_engine.errors import HermesError
from hermes_gateway.preflight import (
    Finding,
    database_problem,
    mcp_findings,
    model_findings,
    platform_findings,
    port_problem,
)


def diagnose(bot: str | None) -> Iterator[Finding]:
    try:
        settings = load_settings()
        profile = load_profile(bot)
    except HermesError as exc:
        yield Finding("fix", str(exc))
        return
    yield Finding("ok", f"bot profile '{profile.name}' loaded")
    yield Finding("ok", f"data folder {settings.home}")
    yield from model_findings(profile, settings)
    yield from platform_findings(profile)
    yield from mcp_findings(profile)
    bad_database = asyncio.run(database_problem(settings))
    yield Finding("fix", bad_database) if bad_database else Finding("ok", "database reachable")
    busy = port_problem(settings)  # the gateway itself may be the one listening there
    yield Finding("warn", busy) if busy else Finding("ok", f"HTTP port {settings.http_port} free")
