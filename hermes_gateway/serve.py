"""`hermes-gateway run`: one process serving every configured bot on every configured platform.

Each bot profile names its platforms under `platforms:`; an adapter whose credentials are missing is
skipped with one clear log line, so a partly configured deployment still serves what it can. One aiohttp
server carries the health endpoint, Slack events and the Telegram webhook.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal

from aiohttp import web

from adapters.base import PlatformAdapter
from adapters.platform import load as load_platform
from hermes_engine.config import BotProfile, Settings
from hermes_engine.core.gateway import Gateway
from hermes_engine.errors import ConfigError
from hermes_engine.ports.storage import Store
from hermes_gateway.wiring import StoredDeliveries, build_gateway, check_models, open_store

log = logging.getLogger(__name__)


def health_app() -> web.Application:
    app = web.Application()

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app.router.add_get("/health", health)
    return app


async def start_gateways(settings: Settings, profiles: list[BotProfile], http: web.Application,
                         store: Store) -> tuple[list[Gateway], list[PlatformAdapter]]:
    """Build a gateway per profile and its adapters; return (gateways, adapters). A platform the profile
    does not know, or options it cannot parse, stop the start with one sentence; a platform whose
    credentials are missing is skipped with a warning, so a partly configured deployment serves the rest."""
    gateways, adapters = [], []
    for profile in profiles:
        check_models(profile, settings)
        gateway = build_gateway(settings, profile, store)
        for name, raw_options in profile.platforms.items():
            try:
                platform = load_platform(name)
            except ConfigError as exc:
                raise ConfigError(f"Bot profile '{profile.name}': {exc}") from None
            options = platform.parse_options(raw_options)
            try:
                adapter = platform.build(gateway, settings, options, http, os.environ)
            except ConfigError as exc:
                log.warning("%s adapter for bot %s is off: %s", name, profile.name, exc)
                continue
            adapter.keep_deliveries_in(StoredDeliveries(store, profile.name, name))
            gateway.attach(adapter)
            adapters.append(adapter)
        gateways.append(gateway)
    return gateways, adapters


async def serve(settings: Settings, profiles: list[BotProfile], *, ready: asyncio.Event | None = None,
                stop: asyncio.Event | None = None) -> None:
    store = open_store(settings)
    await store.init()
    http = health_app()
    gateways, adapters = await start_gateways(settings, profiles, http, store)
    runner = web.AppRunner(http)
    await runner.setup()
    site = web.TCPSite(runner, settings.http_host, settings.http_port)
    await site.start()
    log.info("HTTP server on http://%s:%s (health: /health)", settings.http_host, settings.http_port)
    if not adapters:
        log.warning("no platform adapter is running: give a bot profile with platforms (e.g. --bot "
                    "bots/telegram-dm-assistant) and set its token; serving only the health endpoint")
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        for adapter in adapters:
            await adapter.start()
        for gateway in gateways:
            await gateway.start()
        if ready is not None:
            ready.set()
        await stop.wait()
    finally:
        # Stop taking messages, let the gateways wind down (cut turns stay in the inbox for the next
        # start), and only then close the adapters, so a reply in flight can still be delivered.
        for adapter in adapters:
            await adapter.stop_receiving()
        for gateway in gateways:
            await gateway.stop()
        for adapter in adapters:
            try:
                await adapter.stop()
            except Exception:
                log.exception("stopping %s failed", adapter.platform)
        await runner.cleanup()
        await store.close()
