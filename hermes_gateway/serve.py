"""`hermes-gateway run`: one process serving every configured bot on every configured platform.

Each bot profile names its platforms under `platforms:`. One aiohttp server carries the health and
readiness endpoints, Slack events and the Telegram webhook.

The configuration is checked before anything happens (`hermes_gateway.preflight`): a platform the profile
names must be known, its options valid and its credentials accepted by its API, or the gateway does not
start. A platform whose token is unset stays off with one warning; the others are served, and the gateway
does not start only when no platform at all can.

`/health` says the process is alive. `/ready` says whether it should be sent messages: 503 while it is
starting, while the store cannot write (then each request probes whether it can again) or while a
configured platform is not connected; the JSON body's `reason` names each thing that is not ready. A
replica standing by for an elected role (the Telegram poller, the Discord connection) is ready — it serves
HTTP, webhooks and its other platforms — and the body's `roles` says "stand-by" for that lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
from collections.abc import Callable, Sequence

from aiohttp import web

from adapters.base import PlatformAdapter
from adapters.platform import load as load_platform
from hermes_engine.approvals.gate import ApprovalRouter
from hermes_engine.config import BotProfile, Settings
from hermes_engine.core.gateway import Gateway
from hermes_engine.core.storage_health import StorageHealth
from hermes_engine.errors import ConfigError, StorageError
from hermes_engine.holders import new_holder
from hermes_engine.mcp.feature import McpFeature
from hermes_engine.memory.book import MemoryBook
from hermes_engine.ports.metrics import NO_METRICS, Metrics
from hermes_engine.ports.storage import Store
from hermes_engine.workspace.sending import FileOutlets
from hermes_gateway import preflight
from hermes_gateway.dashboard.serving import attach_dashboard
from hermes_gateway.fault_tally import FaultTally, TalliedMetrics
from hermes_gateway.metrics import PrometheusMetrics
from hermes_gateway.wiring import (
    StoredDeliveries,
    build_gateway,
    memory_store,
    open_migrated,
    open_store,
    preload_models,
)

log = logging.getLogger(__name__)


def health_app(storage_health: StorageHealth | None = None, started: asyncio.Event | None = None,
               adapters: Sequence[PlatformAdapter] = (), checks: Sequence[Callable[[], list[str]]] = (),
               metrics: PrometheusMetrics | None = None) -> web.Application:
    """`/health`, and `/ready` when given what readiness depends on: the store's health, the event set
    once the gateways have started, the adapters that must be connected, and further `checks` (each
    gives one phrase per thing not ready, e.g. an MCP server that is not running); `/metrics` when given
    the metrics."""
    app = web.Application()

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def ready(_: web.Request) -> web.Response:
        waiting: list[str] = []
        if started is not None and not started.is_set():
            waiting.append("starting")
        if storage_health is not None:
            try:
                await storage_health.ensure_ready()
            except StorageError as exc:
                waiting.append(f"the store cannot write: {exc.reason}")
        waiting += [f"{adapter.platform} is not connected" for adapter in adapters if not adapter.connected]
        waiting += [phrase for check in checks for phrase in check()]
        roles = {name: role for adapter in adapters for name, role in adapter.roles().items()}
        extra = {"roles": roles} if roles else {}
        if waiting:
            return web.json_response({"status": "unavailable", "reason": "; ".join(waiting), **extra}, status=503)
        return web.json_response({"status": "ready", **extra})

    app.router.add_get("/health", health)
    app.router.add_get("/ready", ready)
    if metrics is not None:
        app.router.add_get("/metrics", metrics.handle)
    return app


async def start_gateways(settings: Settings, profiles: list[BotProfile], http: web.Application,
                         store: Store, storage_health: StorageHealth | None = None,
                         metrics: Metrics = NO_METRICS) -> tuple[list[Gateway], list[PlatformAdapter]]:
    """Build a gateway per profile and its adapters; return (gateways, adapters). A platform the profile
    does not know, options it cannot parse or credentials it lacks stop the start with one sentence."""
    gateways, adapters = [], []
    holder = new_holder(settings.replica_id)  # this process, in the leases of what only one may run
    for profile in profiles:
        askers = ApprovalRouter()  # each adapter shows the approval requests of its own conversations
        senders = FileOutlets()  # and sends the files `send_file` sends into them
        gateway = build_gateway(settings, profile, store, storage_health=storage_health, asker=askers,
                                metrics=metrics, outlets=senders)
        for name, raw_options in profile.platforms.items():
            try:
                platform = load_platform(name)
            except ConfigError as exc:
                raise ConfigError(f"Bot profile '{profile.name}': {exc}") from None
            options = platform.parse_options(raw_options)
            try:
                adapter = platform.build(gateway, settings, options, http, os.environ)
            except ConfigError as exc:
                raise ConfigError(f"Bot profile '{profile.name}', platform {name}: {exc}") from None
            adapter.keep_deliveries_in(StoredDeliveries(store, profile.name, name))
            adapter.keep_rejects_in(store)
            adapter.report_to(metrics)
            adapter.elect_with(store, holder)
            asker = adapter.approval_asker()
            if asker is not None:
                askers.add(adapter.platform, asker)
            senders.add(adapter)
            gateway.attach(adapter)
            adapters.append(adapter)
        gateways.append(gateway)
    return gateways, adapters


def settle_heap() -> None:
    """Move what start-up built (modules, SDKs, the app: some 200,000 objects) out of the collector's sight.

    Those objects live as long as the process, yet every full collection walks them all again: 70-100 ms
    with the loop stopped, which is a page or a reply made that much later whenever one falls due (a full
    collection comes after enough objects survived, every few seconds under load). Frozen, a collection
    walks only what was made since. Nothing is collected first (that would be the same pause once, before
    the first reply): the little start-up garbage frozen with the rest stays.
    """
    gc.freeze()


async def serve(settings: Settings, profiles: list[BotProfile], *, ready: asyncio.Event | None = None,
                stop: asyncio.Event | None = None) -> None:
    settings, profiles = await preflight.check(settings, profiles, serving=True)
    store = open_store(settings)
    storage_health, started, tally = StorageHealth(store), asyncio.Event(), FaultTally()
    metrics = TalliedMetrics(tally)
    adapters: list[PlatformAdapter] = []
    stop = stop or asyncio.Event()
    checks: list[Callable[[], list[str]]] = [lambda: ["stopping"] if stop.is_set() else []]
    http = health_app(storage_health, started, adapters, checks, metrics)
    gateways, built = await start_gateways(settings, profiles, http, store, storage_health, metrics)
    adapters += built
    attach_dashboard(http, settings, store, gateways, MemoryBook(memory_store(settings, store), profiles[0].memory))
    checks += [feature.not_ready for gateway in gateways for feature in gateway.features
               if isinstance(feature, McpFeature)]
    # The database migrates in a child process (on another core, Alembic never loaded here) while a thread
    # imports the model SDKs and the adapters make their log-in round trips; all are done before any adapter
    # takes a message, so the first turn finds its provider ready. (Begun any earlier, beside the building
    # of the gateways, the SDK's import contends with it for the GIL and the first reply comes later.)
    await asyncio.gather(open_migrated(store, settings.db_url), asyncio.to_thread(preload_models, gateways),
                         *(adapter.log_in() for adapter in adapters))
    counting = asyncio.create_task(tally.run(store), name="fault-tally")
    runner = web.AppRunner(http)
    await runner.setup()
    site = web.TCPSite(runner, settings.http_host, settings.http_port)
    await site.start()
    log.info("HTTP server on http://%s:%s (health: /health, readiness: /ready, metrics: /metrics, "
             "dashboard: /admin/)", settings.http_host,
             settings.http_port)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await asyncio.gather(*(adapter.start() for adapter in adapters))  # each platform logs in at once
        for gateway in gateways:
            await gateway.start()
        settle_heap()
        started.set()
        if ready is not None:
            ready.set()
        await stop.wait()
    finally:
        # Not ready from now (a load balancer sends elsewhere). Stop receiving where the platform keeps
        # messages for later; the turns in flight get a grace period to finish, nothing new begins (what comes
        # is kept for the next start); then the gateways stop (turns cut stay in the inbox), and only then the
        # adapters close, so a reply in flight can still be delivered.
        stop.set()
        log.info("stopping: replies in flight get up to %s s to finish; messages that come are kept for the "
                 "next start", settings.shutdown_grace_seconds)
        for adapter in adapters:
            await adapter.stop_receiving()
        await asyncio.gather(*(gateway.finish_turns(settings.shutdown_grace_seconds) for gateway in gateways))
        await asyncio.gather(*(gateway.stop() for gateway in gateways))
        for adapter in adapters:
            try:
                await adapter.stop()
            except Exception:
                log.exception("stopping %s failed", adapter.platform)
        await runner.cleanup()
        counting.cancel()
        await asyncio.gather(counting, return_exceptions=True)  # its last counts are added
        await store.close()
