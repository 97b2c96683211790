"""`hermes-gateway run`: one process serving every configured bot on every configured platform.

Each bot profile names its platforms under `platforms:`; an adapter whose credentials are missing is
skipped with one clear log line, so a partly configured deployment still serves what it can. One aiohttp
server carries the health endpoint, Slack events and the Telegram webhook.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
from typing import Any

from aiohttp import web

from hermes_gateway.wiring import build_gateway, check_models, open_store
from hermes_engine.config import BotProfile, Settings
from hermes_engine.errors import ConfigError

log = logging.getLogger(__name__)

ADAPTER_MODULES = {
    "telegram": "adapters.telegram",
    "slack": "adapters.slack",
    "discord": "adapters.discord",
}


def health_app() -> web.Application:
    app = web.Application()

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app.router.add_get("/health", health)
    return app


async def start_gateways(settings: Settings, profiles: list[BotProfile], http: web.Application,
                         store: Any) -> tuple[list[Any], list[Any]]:
    """Build a gateway per profile and its adapters; return (gateways, adapters). Adapters that cannot
    start for want of configuration are skipped with a warning."""
    gateways, adapters = [], []
    for profile in profiles:
        check_models(profile, settings)
        gateway = build_gateway(settings, profile, store)
        for platform, options in profile.platforms.items():
            module_name = ADAPTER_MODULES.get(platform)
            if module_name is None:
                raise ConfigError(f"Bot profile '{profile.name}' names unknown platform '{platform}' "
                                  f"(known: {', '.join(ADAPTER_MODULES)}).")
            module = importlib.import_module(module_name)
            try:
                adapter = module.build(gateway, settings, options or {}, http)
            except ConfigError as exc:
                log.warning("%s adapter for bot %s is off: %s", platform, profile.name, exc)
                continue
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
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
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
            stop_receiving = getattr(adapter, "stop_receiving", None)
            if stop_receiving is not None:
                await stop_receiving()
        for gateway in gateways:
            await gateway.stop()
        for adapter in adapters:
            try:
                await adapter.stop()
            except Exception:
                log.exception("stopping %s failed", getattr(adapter, "platform", adapter))
        await runner.cleanup()
        await store.close()
