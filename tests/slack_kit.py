"""The real Slack adapter in front of a gateway made by the `engine` fixture, its events served on loopback
as the gateway's own HTTP server serves them: what every Slack test sets up."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web
from fakes.fake_slack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, FakeSlack


def slack_environment(monkeypatch: pytest.MonkeyPatch, fake: FakeSlack, *, socket_mode: bool = False) -> None:
    """The variables an operator sets for a Slack app, pointed at the fake."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)
    monkeypatch.setenv("SLACK_API_URL", fake.api_url)
    if socket_mode:
        monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)


@dataclass
class ServedSlack:
    adapter: Any
    runner: web.AppRunner
    events_url: str  # where Slack posts this replica's events

    async def close(self) -> None:
        await self.adapter.stop()
        await self.runner.cleanup()


async def serve_slack(engine: Any, *, events_from: FakeSlack | None = None, options: dict[str, Any] | None = None,
                      before_start: Callable[[Any], None] = lambda adapter: None) -> ServedSlack:
    """Build the adapter for `engine`'s gateway, serve its routes, start it. `events_from`: the fake posts its
    events here (leave it out in Socket Mode, or to post to each replica's `events_url` by hand)."""
    from adapters.slack import PLATFORM

    http = web.Application()
    adapter = PLATFORM.build(engine.gateway, engine.settings,
                             PLATFORM.parse_options({"edit_interval_seconds": 0.02, **(options or {})}), http,
                             os.environ)
    engine.gateway.attach(adapter)
    before_start(adapter)
    runner = web.AppRunner(http, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    served = ServedSlack(adapter, runner, f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/slack/events")
    if events_from is not None:
        events_from.events_url = served.events_url
    await adapter.start()
    return served
