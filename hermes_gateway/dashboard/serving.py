"""The dashboard in a running gateway: mounted under `/admin` on its HTTP server and `/dashboard` added to
each bot's commands (before the adapters start, so it is in the platforms' command menus)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from aiohttp import web

from hermes_engine.config import BotProfile, Settings
from hermes_engine.core.gateway import Gateway
from hermes_engine.loops.goals import GoalFeature
from hermes_engine.memory.book import MemoryBook
from hermes_engine.people.forget import ForgetFeature, ForgetOutcome, forget_in
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

    forgetting = next((f for f in gateways[0].features if isinstance(f, ForgetFeature)), None) if gateways else None

    async def forget(person_id: int) -> ForgetOutcome | None:
        return await forget_in(gateways, person_id, pairing=forgetting.pairing if forgetting else None)

    skills = {gateway.bot: feature for gateway in gateways for feature in gateway.features
              if isinstance(feature, SkillsFeature)}
    goals = {gateway.bot: feature for gateway in gateways for feature in gateway.features
             if isinstance(feature, GoalFeature)}
    mount(http, Sources(store, memory, [gateway.bot for gateway in gateways], platforms,
                        limits={gateway.bot: gateway.profile.limits for gateway in gateways},
                        forget=forget if forgetting is not None else None,
                        goal_turns={gateway.bot: gateway.profile.goals.max_turns for gateway in gateways},
                        slack_admins=slack_admins([gateway.profile for gateway in gateways]), skills=skills,
                        goals=goals),
          dashboard)
    for gateway in gateways:
        register_dashboard_command(gateway.commands, store, dashboard)
    return dashboard


def slack_admins(profiles: Iterable[BotProfile]) -> frozenset[str]:
    """The Slack user ids that administer a bot served on Slack: who signs in with Slack as an admin (a
    profile serving only Telegram names Telegram ids, which mean nothing to Slack)."""
    return frozenset(str(user) for profile in profiles if "slack" in profile.platforms
                     for user in profile.access.admins)
