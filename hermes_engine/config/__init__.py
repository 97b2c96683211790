"""Typed settings: a YAML bot profile for behaviour, environment variables for secrets and endpoints.

Every failure to load becomes a `ConfigError` whose message is one sentence naming the setting, so the
CLI can print it instead of a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hermes_engine.config.attachments import AttachmentSettings
from hermes_engine.config.clock import ClockSettings
from hermes_engine.config.mcp import McpServerSettings, check_server_names
from hermes_engine.config.media import SpeechToText, VoiceNoteSettings
from hermes_engine.config.speech import SpeechSettings, TtsProfile
from hermes_engine.errors import ConfigError

DEFAULT_MODEL = "anthropic:claude-sonnet-4-5"
PROFILE_FILE = "profile.yaml"
SOUL_FILE = "SOUL.md"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class Settings(BaseSettings):
    """Process-wide settings from the environment (`HERMES_*`)."""

    model_config = SettingsConfigDict(env_prefix="HERMES_", extra="ignore")

    home: Path = Field(default_factory=lambda: Path.home() / ".hermes-gateway")
    database_url: str | None = None
    # PostgreSQL connections each replica keeps open (as many again may open under load); unset: 5.
    database_pool_size: int | None = Field(None, ge=1)
    model: str | None = None
    fallback_models: str | None = None  # comma-separated, as in HERMES_FALLBACK_MODELS
    context_window: int | None = None
    http_host: str = "127.0.0.1"
    http_port: int = 8080
    log_level: str = "INFO"
    inbox_retention_days: float = Field(30, gt=0)  # answered inbox events older than this are deleted
    max_live_sessions: int = Field(1000, ge=1)  # sessions held in memory per bot; idle ones beyond are dropped
    # A session's turns run on one replica at a time, under a store lease renewed every third of this; a
    # replica that dies leaves its sessions' pending events to another once it expires.
    session_lease_seconds: float = Field(30.0, gt=0)
    # On SIGTERM the replies in flight get this long to finish before the turns still running are cut (and
    # answered after the restart, or by another replica); keep it below the orchestrator's kill timeout.
    shutdown_grace_seconds: float = Field(10.0, ge=0)
    # names this replica's host in leases (pids are compared within it); default: the host name
    replica_id: str | None = None
    web_search_url: str | None = None  # a SearXNG-compatible JSON endpoint; unset: no web_search tool
    web_search_key: str | None = None  # sent to it as a bearer token
    # Skill hints fuse embedding similarity when a model is set (an OpenAI-compatible /v1/embeddings server;
    # the base URL defaults to OPENAI_COMPATIBLE_BASE_URL / OPENAI_BASE_URL). Unset: lexical hints only.
    embedding_model: str | None = None
    embedding_base_url: str | None = None
    speech: SpeechSettings = Field(default_factory=SpeechSettings)  # voice replies: HERMES_TTS_*
    # Where memory, USER.md, skills and pairing live: "files" under the home, "database" in the store (shared
    # by replicas), "auto" (the default): the database on PostgreSQL, files on SQLite.
    state_backend: Literal["auto", "files", "database"] = "auto"
    # Where the workspaces (and sandboxed MCP servers' folders) live; unset: HERMES_HOME/workspaces. A file
    # system of its own mounted here (a volume or tmpfs) keeps the host's paths out of what a sandboxed
    # command reads in /proc/self/mountinfo (`workspace/mounts.py`).
    workspace_root: Path | None = None
    stt: SpeechToText = Field(default_factory=SpeechToText)  # voice notes transcribed (HERMES_STT_*)

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.upper() not in LOG_LEVELS:
            raise ValueError(f"use one of {', '.join(LOG_LEVELS)}")
        return value.upper()

    @property
    def db_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{self.home / 'hermes.db'}"

    @field_validator("state_backend", mode="before")
    @classmethod
    def _backend_name(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @property
    def state_in_database(self) -> bool:
        """Keep memory, USER.md, skills and pairing in the database (see `state_backend`)."""
        if self.state_backend != "auto":
            return self.state_backend == "database"
        return self.db_url.split(":", 1)[0].split("+", 1)[0] in ("postgres", "postgresql")

    @property
    def workspaces(self) -> Path:
        """The workspaces' root: `workspace_root`, else under the home."""
        return self.workspace_root if self.workspace_root is not None else self.home / "workspaces"

    def fallback_list(self) -> list[str] | None:
        if self.fallback_models is None:
            return None
        return [m.strip() for m in self.fallback_models.split(",") if m.strip()]


class AccessRules(BaseModel):
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)  # YAML ids may be unquoted

    allowed_users: list[str] = Field(default_factory=list)
    pairing: bool = True
    admins: list[str] = Field(default_factory=list)
    allow_bots: bool = False
    # Whether a platform's own admins (a Discord `admin_role`) administer the bot too: only ever in places the
    # operator listed (a server in DISCORD_ALLOWED_GUILDS), since whoever owns a place makes its roles.
    # False: `admins` alone.
    platform_admins: bool = True


class MemorySettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory_chars: int = 2200
    user_chars: int = 1375


class ReviewSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory_every_turns: int = 10
    skill_every_iterations: int = 10
    max_iterations: int = 8
    model: str | None = None  # auxiliary.review_model


class SkillSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    require_approval: bool = False  # shared bots: agent-written skills wait for an admin's /skills approve
    curator_every_days: float = 7
    curator_llm_pass: bool = True
    curator_model: str | None = None


class CompressionSettings(BaseModel):
    """Context compression (hermes_engine/agent/compression.py): shares of the model's context window."""

    model_config = ConfigDict(extra="forbid")

    threshold: float = Field(0.5, gt=0, le=1)  # compress before a model call above this share
    hygiene_threshold: float = Field(0.85, gt=0, le=1)  # compress before a turn above this (rough estimate)
    protect_tail_messages: int = Field(20, ge=1)
    placeholder_chars: int = Field(200, ge=0)  # older tool results longer than this become a placeholder


class GoalSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_turns: int = 20
    judge_model: str | None = None


class DelegationSettings(BaseModel):
    """Sub-agents (`delegate_task`, hermes_engine/loops/delegation.py)."""

    model_config = ConfigDict(extra="forbid")

    max_concurrent: int = Field(3, ge=1)
    max_depth: int = Field(2, ge=1)
    max_iterations: int = Field(50, ge=1)
    model: str | None = None  # None: the parent turn's provider chain


class WebSettings(BaseModel):
    """`web_fetch` (hermes_engine/web/): its limits and what it may reach beyond the public internet."""

    model_config = ConfigDict(extra="forbid")

    allow: list[str] = Field(default_factory=list)  # host names, addresses or CIDR networks, e.g. 10.1.0.0/16
    time_limit: float = Field(20, gt=0, le=90)  # seconds for a whole fetch, redirects and body included
    max_bytes: int = Field(2_000_000, ge=1024)  # of a body read; the rest is not downloaded
    max_chars: int = Field(20_000, ge=1000, le=40_000)  # of text returned per call; more with `offset`
    max_redirects: int = Field(5, ge=0, le=20)
    # A PEM file of certificate authorities trusted besides the system's (a corporate proxy's, a private CA).
    ca_bundle: Path | None = None


class UsageLimitSettings(BaseModel):
    """Daily limits, counted per UTC day (they reset at midnight UTC); unset means no limit. Admins are
    never refused."""

    model_config = ConfigDict(extra="forbid")

    turns_per_day: int | None = Field(None, ge=1)  # per person
    tokens_per_day: int | None = Field(None, ge=1)  # per person: input (cached included) and output
    total_turns_per_day: int | None = Field(None, ge=1)  # everyone with this bot together
    total_tokens_per_day: int | None = Field(None, ge=1)

    @property
    def enabled(self) -> bool:
        return any(v is not None for v in (self.turns_per_day, self.tokens_per_day, self.total_turns_per_day,
                                           self.total_tokens_per_day))


class WorkspaceSettings(BaseModel):
    """The `terminal` and `files` toolsets (hermes_engine/workspace/): limits, who may use them, approvals."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    quota_mb: float = Field(100, gt=0)
    users: str = Field("admins", pattern="^(admins|allowed_in_dm)$")  # or allowed people, in their own DM
    network: bool = False  # True: commands get a network of their own (slirp4netns), never this host's loopback
    timeout_seconds: float = Field(60, gt=0)  # a command's default time; the model may ask for up to max
    max_timeout_seconds: float = Field(600, gt=0)
    # memory (swap none) and processes of a command's whole tree, where a cgroup can be made for it
    # (workspace/cgroups.py); elsewhere memory per process and processes per uid (a warning at start says so)
    memory_mb: int = Field(1024, ge=64)
    processes: int = Field(128, ge=8)
    cpu_seconds: int = Field(120, ge=1)
    approve: list[str] = Field(default_factory=lambda: ["dangerous"])  # risk classes asked about first
    approvers: list[str] = Field(default_factory=list)  # user ids; empty: the profile's admins
    person_approves: bool = False  # the person whose message led to the request may answer it too
    approval_timeout_seconds: float = Field(300, gt=0)
    # a root gateway runs each workspace's commands as a uid of its own from this range (workspace/uids.py)
    uid_first: int = Field(1_999_000_000, ge=1000, le=2**32 - 2)
    uid_count: int = Field(1000, ge=1, le=1_000_000)

    @field_validator("uid_count")
    @classmethod
    def _range_fits(cls, count: int, info: ValidationInfo) -> int:
        first = info.data.get("uid_first", 0)
        if first + count > 2**32 - 1:
            raise ValueError(f"uid_first + uid_count must stay below 4294967295 (got {first} + {count})")
        return count


class KanbanSettings(BaseModel):
    """The kanban board and its dispatcher (hermes_engine/kanban/)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    tick_seconds: float = Field(60.0, gt=0)  # the dispatcher also ticks at once when a card changes
    lease_seconds: float = Field(900.0, gt=0)  # a running card's claim; workers renew it with heartbeats
    max_in_progress_per_profile: int = Field(3, ge=1)
    max_failures: int = Field(2, ge=1)  # consecutive failed attempts before a card is blocked
    decompose_per_tick: int = Field(3, ge=0)  # triage cards split by the model per tick
    max_iterations: int = Field(50, ge=1)  # a worker's model calls per attempt
    goal_rounds: int = Field(5, ge=1)  # worker runs a goal card gets before it is blocked
    model: str | None = None  # None: the profile's models


class BotProfile(BaseModel):
    """One bot: persona, model, tools and behaviour. Loaded from `bots/<name>/profile.yaml`."""

    model_config = ConfigDict(extra="forbid")

    name: str = "default"
    description: str = ""
    model: str = DEFAULT_MODEL
    fallback_models: list[str] = Field(default_factory=list)
    context_window: int | None = None
    toolsets: list[str] = Field(default_factory=lambda: ["core", "memory", "skills", "search"])
    streaming: bool = True
    max_iterations: int = 90
    # tokens a model may write per response: lowers the model's own maximum (providers/output_limits.py),
    # never raises it; for a model the table does not know, it is the limit (default 4,096)
    max_output_tokens: int | None = Field(None, ge=1)
    shared_sessions: bool = False  # one session per group/channel instead of per user in it
    soul: str = ""  # persona text; from SOUL.md beside the profile
    access: AccessRules = Field(default_factory=AccessRules)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    review: ReviewSettings = Field(default_factory=ReviewSettings)
    goals: GoalSettings = Field(default_factory=GoalSettings)
    compression: CompressionSettings = Field(default_factory=CompressionSettings)
    skills: SkillSettings = Field(default_factory=SkillSettings)
    delegation: DelegationSettings = Field(default_factory=DelegationSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    limits: UsageLimitSettings = Field(default_factory=UsageLimitSettings)
    workspace: WorkspaceSettings = Field(default_factory=WorkspaceSettings)
    kanban: KanbanSettings = Field(default_factory=KanbanSettings)
    voice_notes: VoiceNoteSettings = Field(default_factory=VoiceNoteSettings)
    attachments: AttachmentSettings = Field(default_factory=AttachmentSettings)
    clock: ClockSettings = Field(default_factory=ClockSettings)
    tts: TtsProfile = Field(default_factory=TtsProfile)  # voice replies (off by default; /voice on|off)
    platforms: dict[str, dict[str, Any]] = Field(default_factory=dict)  # per-adapter options
    mcp_servers: dict[str, McpServerSettings] = Field(default_factory=dict)  # tools from MCP servers
    mcp_schema_budget: int = Field(1500, ge=0)  # schema tokens of MCP tools listed in full; beyond: compact
    mcp_start_wait_seconds: float = Field(5.0, ge=0)  # a new session waits this long for servers still starting
    path: Path | None = Field(default=None, exclude=True)

    @field_validator("max_iterations")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value < 1:
            raise ValueError("must be at least 1")
        return value

    @field_validator("mcp_servers")
    @classmethod
    def _server_names(cls, value: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        check_server_names(value)
        return value

    @model_validator(mode="after")
    def _server_limits(self) -> BotProfile:
        """A sandboxed server's memory and process limits, where its settings leave them out, are those of
        the terminal's commands (`workspace`): one number for the operator to tune."""
        self.mcp_servers = {name: server.model_copy(update={
            "memory_mb": server.memory_mb or self.workspace.memory_mb,
            "processes": server.processes or self.workspace.processes}) if server.command and server.sandbox
            else server for name, server in self.mcp_servers.items()}
        return self

    def models(self, settings: Settings) -> list[str]:
        """Primary model first, then the fallback chain; the environment overrides the profile."""
        primary = settings.model or self.model
        fallbacks = settings.fallback_list()
        return [primary, *(fallbacks if fallbacks is not None else self.fallback_models)]


def _describe(error: ValidationError, source: str) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    return f"Setting '{where}' in {source} is invalid: {first['msg']}."


def load_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "HERMES_" + str(first["loc"][0]).upper()
        reason = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"Environment variable {name} is invalid: {reason}.") from None


def resolve_profile_dir(bot: str | None, search_roots: list[Path] | None = None) -> Path | None:
    """A profile is a folder path, or a name looked up under ./bots. None means the built-in default."""
    if not bot:
        return None
    candidate = Path(bot).expanduser()
    if candidate.is_file():
        candidate = candidate.parent
    if candidate.is_dir():
        return candidate
    for root in search_roots or [Path.cwd() / "bots"]:
        if (root / bot).is_dir():
            return root / bot
    raise ConfigError(f"Bot profile '{bot}' was not found: pass a folder holding {PROFILE_FILE} and {SOUL_FILE}.")


def load_profile(bot: str | None = None) -> BotProfile:
    folder = resolve_profile_dir(bot)
    if folder is None:
        return BotProfile(soul=default_soul())
    profile_path = folder / PROFILE_FILE
    if not profile_path.is_file():
        raise ConfigError(f"Bot profile folder {folder} has no {PROFILE_FILE}.")
    try:
        data = yaml.safe_load(profile_path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{profile_path} is not valid YAML{where}.") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{profile_path} must hold a mapping of settings.")
    data.setdefault("name", folder.name)
    soul_path = folder / SOUL_FILE
    if "soul" not in data:
        data["soul"] = soul_path.read_text(encoding="utf-8") if soul_path.is_file() else default_soul()
    try:
        profile = BotProfile(**data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, str(profile_path))) from None
    profile.path = folder
    return profile


def default_soul() -> str:
    return (Path(__file__).parents[1] / "prompts" / "default_soul.md").read_text(encoding="utf-8")
