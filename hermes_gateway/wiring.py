"""Assembly: settings + profile → store, providers, features and a ready `Gateway`.

The one place that knows every concrete part; everything else depends on contracts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_engine.attachments.feature import AttachmentsFeature
from hermes_engine.attachments.retention import AttachmentRetention
from hermes_engine.attachments.voice import VoiceNotes
from hermes_engine.clock import ClockFeature
from hermes_engine.compression.feature import CompressionFeature
from hermes_engine.compression.lineage import load_history
from hermes_engine.config import BotProfile, Settings
from hermes_engine.core.gateway import Gateway
from hermes_engine.core.housekeeping import InboxPruning
from hermes_engine.core.storage_health import StorageHealth
from hermes_engine.errors import ConfigError
from hermes_engine.policy.access import AccessGate
from hermes_engine.policy.limits import UsageLimits
from hermes_engine.policy.pairing import FILE_NAME as PAIRING_FILE
from hermes_engine.policy.pairing import JsonPairingStore, Pairing, PairingStore
from hermes_engine.ports.approval import ApprovalAsker
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.metrics import NO_METRICS, Metrics
from hermes_engine.ports.reply import Delivery
from hermes_engine.ports.storage import DeliveryLog, Store
from hermes_engine.providers.chain import build_chain
from hermes_engine.providers.registry import make_provider
from hermes_engine.tools.core import CORE_TOOLS
from hermes_engine.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from hermes_engine.approvals.gate import ApprovalGate
    from hermes_engine.memory.documents import MemoryStore
    from hermes_engine.skills.files import FileSkillLibrary
    from hermes_engine.workspace.sending import FileOutlets
    from hermes_gateway.mcp.confined import ServerSandbox


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
    size = settings.database_pool_size
    pool = {"pool_size": size, "max_overflow": size} if size and settings.db_url.startswith("postgres") else {}
    return SqlStore(settings.db_url, engine_options=pool)


async def open_migrated(store: Store, url: str) -> None:
    """Open `store` with its schema at head. The migrations run first in a child process
    (`storage.revision`), so this process never loads Alembic; should the child fail, `init` migrates here
    and reports the problem as it always does."""
    from storage.engine import is_memory_sqlite, normalize_url
    from storage.revision import upgrade_in_child

    if not is_memory_sqlite(normalize_url(url)):  # another process cannot see this one's memory
        await upgrade_in_child(url)
    await store.init()


def memory_store(settings: Settings, store: Store | None) -> MemoryStore:
    """Memory and USER.md: in the database when `settings.state_in_database`, else files under the home."""
    if settings.state_in_database:
        from hermes_engine.memory.database import DatabaseMemoryStore

        kept = _needs_store(store, "memory")
        return DatabaseMemoryStore(kept, kept)
    from hermes_engine.memory.store import FileMemoryStore

    return FileMemoryStore.for_home(settings.home)


def pairing_store(settings: Settings, store: Store | None) -> PairingStore:
    """Pairing state: in the database when `settings.state_in_database` (made on the running event loop,
    which its blocking calls are handed to), else `pairing.json` under the home."""
    if settings.state_in_database:
        from hermes_engine.policy.pairing_db import DatabasePairingStore

        return DatabasePairingStore(_needs_store(store, "pairing"))
    return JsonPairingStore(Path(settings.home) / PAIRING_FILE)


def skill_libraries(settings: Settings, store: Store | None) -> Callable[[str], FileSkillLibrary] | None:
    """Skill libraries in the database when `settings.state_in_database` (each process works on a private
    copy in a temporary folder of its own, so replicas or commands sharing a home never share one); None
    keeps the folders under `<home>/skills`."""
    if not settings.state_in_database:
        return None
    import asyncio
    import tempfile

    from hermes_engine.skills.database import DatabaseSkillLibrary
    from hermes_engine.skills.library import bot_library_dir

    kept = _needs_store(store, "skills")
    loop = asyncio.get_running_loop()

    def library(bot: str) -> FileSkillLibrary:
        copy = bot_library_dir(tempfile.mkdtemp(prefix="hermes-skills-"), bot)
        return DatabaseSkillLibrary(copy, kept, kept, bot, loop=loop)

    return library


def _needs_store(store: Store | None, what: str) -> Store:
    if store is None:
        raise ConfigError(f"HERMES_STATE_BACKEND is 'database' (or the database is PostgreSQL) but no store was "
                          f"given to keep {what} in")
    return store


def attachment_folder(home: Path) -> Callable[[str], Path]:
    """Where the adapters keep the files people send in a conversation (`adapters/downloads.py`)."""
    from hermes_engine.attachments.folders import ATTACHMENTS, attachment_folder_name

    return lambda session_key: home / ATTACHMENTS / attachment_folder_name(session_key)


def build_features(settings: Settings, profile: BotProfile, *, asker: ApprovalAsker | None = None,
                   store: Store | None = None, outlets: FileOutlets | None = None) -> list[Feature]:
    """Every feature of a bot; `asker` shows the terminal's approval requests (none: they are denied). `store`
    keeps memory, skills and pairing when they live in the database (`Settings.state_backend`). `outlets`:
    the adapters `send_file` sends through (the serving process adds each one it builds)."""
    from hermes_engine.history.search import SearchFeature
    from hermes_engine.kanban.feature import KanbanFeature
    from hermes_engine.loops.delegation import DelegationFeature
    from hermes_engine.loops.goals import GoalFeature
    from hermes_engine.loops.review import ReviewFeature
    from hermes_engine.memory.feature import MemoryFeature
    from hermes_engine.people.forget import ForgetFeature
    from hermes_engine.people.identity import IdentityFeature
    from hermes_engine.providers.embedders import embedder_from_settings
    from hermes_engine.skills.feature import SkillsFeature
    from hermes_engine.workspace.feature import WorkspaceFeature
    from hermes_engine.workspace.sending import FileOutlets

    outlets = outlets if outlets is not None else FileOutlets()
    workspace = WorkspaceFeature(settings.home, profile.name, profile.workspace, admins=profile.access.admins,
                                 asker=asker, toolsets=profile.toolsets, root=settings.workspaces,
                                 outlets=outlets, attachments=attachment_folder(settings.home))
    features: list[Feature] = [
        MemoryFeature(memory_store(settings, store), profile.memory),
        SkillsFeature.from_settings(settings, bot=profile.name, require_approval=profile.skills.require_approval,
                                    curator_interval_seconds=profile.skills.curator_every_days * 86400,
                                    llm_pass=profile.skills.curator_llm_pass,
                                    provider=lambda: make_provider(profile.skills.curator_model
                                                                   or profile.models(settings)[0]),
                                    embedder=embedder_from_settings(settings.embedding_model,
                                                                    settings.embedding_base_url),
                                    library_factory=skill_libraries(settings, store)),
        IdentityFeature(),
        ForgetFeature(pairing=Pairing(pairing_store(settings, store))),
        GoalFeature(profile.goals),
        ReviewFeature(profile.review),
        CompressionFeature(),
        SearchFeature(),
        DelegationFeature(profile.delegation),
        workspace,
        KanbanFeature(profile.kanban),
        ClockFeature(),
        voice_feature(settings, profile, outlets),
        *mcp_features(settings, profile, workspace.approvals),
    ]
    if {"web", "web_fetch", "web_search"} & set(profile.toolsets):  # its HTTP stack is loaded only when used
        from hermes_engine.web.feature import WebFeature

        features.append(WebFeature.from_settings(settings, profile.web))
    return features


def voice_feature(settings: Settings, profile: BotProfile, outlets: FileOutlets) -> Feature:
    """Voice replies (`/voice`): spoken by the endpoint `HERMES_TTS_*` names, sent through `outlets`. The
    `openai` SDK is imported only when that endpoint is set (a bot on another provider never loads it)."""
    from hermes_engine.voice.feature import VoiceFeature

    speaker = None
    if settings.tts.configured:
        from hermes_engine.providers.openai_speech import speech_from_settings

        speaker = speech_from_settings(settings.tts)
    return VoiceFeature(speaker, profile.tts, outlets)


def mcp_features(settings: Settings, profile: BotProfile, approvals: ApprovalGate | None = None) -> list[Feature]:
    """The profile's MCP servers as one feature (none without servers: the SDK is then not imported); calls
    that need approval ask through `approvals`, the terminal's gate (none: they are denied)."""
    if not profile.mcp_servers:
        return []
    from hermes_engine.mcp.feature import McpFeature
    from hermes_engine.workspace.folders import WorkspaceFolders
    from hermes_engine.workspace.mounts import say_what_commands_see
    from hermes_gateway.mcp.manager import ServerManager

    if any(server.sandbox and server.command for server in profile.mcp_servers.values()):
        folders = WorkspaceFolders.of(settings.home, settings.workspaces)
        say_what_commands_see(folders.root, folders.home)
    manager = ServerManager(profile.mcp_servers, server_sandbox(settings, profile))
    return [McpFeature(manager, profile.mcp_servers, profile.mcp_schema_budget, approvals,
                       start_wait=profile.mcp_start_wait_seconds)]


def server_sandbox(settings: Settings, profile: BotProfile) -> ServerSandbox:
    """Where a profile's sandboxed MCP servers keep their folders: beside the workspaces, named as opaquely
    (`workspace/folders.py`), run as uids of the terminal's range."""
    from hermes_engine.workspace.folders import WorkspaceFolders
    from hermes_engine.workspace.uids import pool_for
    from hermes_gateway.mcp.confined import ServerSandbox

    folders = WorkspaceFolders.of(settings.home, settings.workspaces)
    uids = pool_for(profile.workspace.uid_first, profile.workspace.uid_count)
    return ServerSandbox(folders.servers(profile.name), uids)


def attachments(settings: Settings, profile: BotProfile) -> AttachmentsFeature:
    """What the engine makes of files people send: voice notes heard through the configured transcriber
    (`HERMES_STT_MODEL`; none: the person is told), long documents read on with `read_document`."""
    from hermes_engine.providers.transcribers import transcriber_from_settings

    transcriber = transcriber_from_settings(settings.stt.model, settings.stt.base_url)
    return AttachmentsFeature(VoiceNotes(transcriber, echo=profile.voice_notes.echo))


def build_gateway(settings: Settings, profile: BotProfile, store: Store, *,
                  features: list[Feature] | None = None, storage_health: StorageHealth | None = None,
                  asker: ApprovalAsker | None = None, metrics: Metrics = NO_METRICS,
                  outlets: FileOutlets | None = None) -> Gateway:
    """The gateway for one bot profile. Compression is part of every engine (its settings are in the
    profile): a hand-picked feature list gets it too, and so do the inbox pruning and attachment retention
    jobs. Gateways sharing a store share its `storage_health` (one outage, one notice per chat, one readiness
    answer); without one, the gateway keeps its own. Usage limits are part of every engine too (off unless the
    profile sets them), and so is the attachments feature (voice notes, `read_document`)."""
    if features is None:
        features = build_features(settings, profile, asker=asker, store=store, outlets=outlets)
    elif not any(isinstance(f, CompressionFeature) for f in features):
        features = [*features, CompressionFeature()]
    features = [UsageLimits(profile.limits), *features, InboxPruning(settings.inbox_retention_days),
                AttachmentRetention(settings.home, profile.attachments.retention_days)]
    if not any(isinstance(f, AttachmentsFeature) for f in features):
        features.append(attachments(settings, profile))
    return Gateway(settings=settings, profile=profile, store=store, chain_factory=build_chain,
                   tools=ToolRegistry(list(CORE_TOOLS)),
                   access=AccessGate(profile.access, Pairing(pairing_store(settings, store))),
                   history_view=load_history, features=features, storage_health=storage_health, metrics=metrics)
