"""Assembly: settings + profile → store, providers, features and a ready `Gateway`.

The one place that knows every concrete part; everything else depends on contracts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hermes_engine.compression.feature import CompressionFeature
from hermes_engine.config import BotProfile, Settings
from hermes_engine.core.gateway import Gateway
from hermes_engine.core.housekeeping import InboxPruning
from hermes_engine.core.storage_health import StorageHealth
from hermes_engine.policy.access import AccessGate
from hermes_engine.policy.pairing import Pairing
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.reply import Delivery
from hermes_engine.ports.storage import DeliveryLog, Store
from hermes_engine.providers.chain import build_chain
from hermes_engine.providers.registry import make_provider
from hermes_engine.tools.core import CORE_TOOLS
from hermes_engine.tools.registry import ToolRegistry


def preload_models(gateways: Sequence[Gateway]) -> None:
    """Build each gateway's provider chain now, which imports the primary model's SDK: the largest import
    of a start (seconds for some SDKs), done off the event loop while the database migrates."""
    for gateway in gateways:
        gateway.chain(gateway.profile.models(gateway.settings))


class StoredDeliveries:
    """One bot's outlet on one platform, seen through the store's `DeliveryLog`: the durable
    `DeliveryLedger` every adapter `run` starts keeps its deliveries in."""

    def __init__(self, log: DeliveryLog, bot: str, platform: str) -> None:
        self.log, self.bot, self.platform = log, bot, platform

    async def get(self, key: str) -> Delivery | None:
        return await self.log.get_delivery(self.bot, self.platform, key)

    async def record(self, key: str, message_ids: Sequence[str], *, final: bool) -> None:
        await self.log.record_delivery(self.bot, self.platform, key, message_ids, final=final)


def open_store(settings: Settings) -> Store:
    from storage.store import SqlStore

    settings.home.mkdir(parents=True, exist_ok=True)
    return SqlStore(settings.db_url)


def build_features(settings: Settings, profile: BotProfile) -> list[Feature]:
    from hermes_engine.history.search import SearchFeature
    from hermes_engine.loops.delegation import DelegationFeature
    from hermes_engine.loops.goals import GoalFeature
    from hermes_engine.loops.review import ReviewFeature
    from hermes_engine.memory.feature import MemoryFeature
    from hermes_engine.memory.store import FileMemoryStore
    from hermes_engine.policy.forget import ForgetFeature
    from hermes_engine.policy.identity import IdentityFeature
    from hermes_engine.providers.embedders import embedder_from_settings
    from hermes_engine.skills.feature import SkillsFeature

    return [
        MemoryFeature(FileMemoryStore(Path(settings.home) / "memories"), profile.memory),
        SkillsFeature.from_settings(settings, bot=profile.name, require_approval=profile.skills.require_approval,
                                    curator_interval_seconds=profile.skills.curator_every_days * 86400,
                                    llm_pass=profile.skills.curator_llm_pass,
                                    provider=lambda: make_provider(profile.skills.curator_model
                                                                   or profile.models(settings)[0]),
                                    embedder=embedder_from_settings(settings.embedding_model,
                                                                    settings.embedding_base_url)),
        IdentityFeature(),
        ForgetFeature(),
        GoalFeature(profile.goals),
        ReviewFeature(profile.review),
        CompressionFeature(),
        SearchFeature(),
        DelegationFeature(profile.delegation),
    ]


def build_gateway(settings: Settings, profile: BotProfile, store: Store, *,
                  features: list[Feature] | None = None, storage_health: StorageHealth | None = None) -> Gateway:
    """The gateway for one bot profile. Compression is part of every engine (its settings are in the
    profile): a hand-picked feature list gets it too, and so does the inbox pruning job. Gateways sharing a
    store share its `storage_health` (one outage, one notice per chat, one readiness answer); without one,
    the gateway keeps its own."""
    if features is None:
        features = build_features(settings, profile)
    elif not any(isinstance(f, CompressionFeature) for f in features):
        features = [*features, CompressionFeature()]
    features = [*features, InboxPruning(settings.inbox_retention_days)]
    return Gateway(settings=settings, profile=profile, store=store, chain_factory=build_chain,
                   tools=ToolRegistry(list(CORE_TOOLS)),
                   access=AccessGate(profile.access, Pairing.for_home(settings.home)),
                   features=features, storage_health=storage_health)
