"""The dashboard in a running gateway: mounted under `/admin` on its HTTP server and `/dashboard` added to
each bot's commands (before the adapters start, so it is in the platforms' command menus)."""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from hermes_engine.config import Settings
from hermes_engine.core.gateway import Gateway
from hermes_engine.memory.book import MemoryBook
from hermes_engine.ports.storage import Store
from hermes_engine.skills.feature import SkillsFeature
from hermes_gateway.dashboard.app import mount
from hermes_gateway.dashboard.command import register_dashboard_command
from hermes_gateway.dashboard.config import Dashboard
from hermes_gateway.dashboard.views import PlatformState, Sources


def attach_dashboard(http: web.Application, settings: Settings, store: Store, gateways: Sequence[Gateway],
                     memory: MemoryBook) -> Dashboard:
    """`memory`: a `MemoryBook` on the memory store the gateways' agents write to."""
    dashboard = Dashboard.from_settings(settings)

    def platforms() -> list[PlatformState]:
        return [PlatformState(gateway.bot, name, bool(getattr(outlet, "connected", False)))
                for gateway in gateways for name, outlet in sorted(gateway.outlets.items())]

    skills = {gateway.bot: feature for gateway in gateways for feature in gateway.features
              if isinstance(feature, SkillsFeature)}
    mount(http, Sources(store, memory, [gateway.bot for gateway in gateways], platforms, skills), dashboard)
    for gateway in gateways:
        register_dashboard_command(gateway.commands, store, dashboard)
    return dashboard
