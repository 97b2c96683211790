"""The configuration, checked before anything happens: the home, every setting, every profile option
(platform options included), the keys of every model, the HTTP port, the database and each platform's
credentials, tried against its API.

`Preflight.findings` is the one list of checks. `run` and `chat` go through it with `check`, which stops at
the first problem, before they create a folder, a database file or a connection that stays open; `doctor`
prints every finding. So both say the same sentence on the same condition. A problem is one sentence naming
the setting and what to do. What works with less is a warning, never a stop: a fallback model whose key is
missing is left out, a platform whose token is unset stays off, as long as one platform can start.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_engine.config import BotProfile, Settings
from hermes_engine.errors import ConfigError
from hermes_engine.providers.registry import REGISTRY
from hermes_gateway.home_check import ServiceUser, folder_problem, home_problem

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

    from adapters.platform import EnvVar, Platform, PlatformOptions

log = logging.getLogger(__name__)

DB_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Finding:
    """One line of `doctor`: `level` is "ok", "warn" (works, but with less) or "fix" (will not start)."""

    level: str
    text: str


def _missing_key(spec: str) -> str | None:
    """The first variable the spec's provider needs and does not have; ConfigError if the spec is bad."""
    provider, _ = REGISTRY.parse(spec)
    return next((var.name for var in REGISTRY.kind(provider).env if var.value() is None), None)


def _aux_models(profile: BotProfile) -> dict[str, str]:
    """Profile settings naming a model of their own (setting → spec)."""
    named = {"review.model": profile.review.model, "goals.judge_model": profile.goals.judge_model,
             "delegation.model": profile.delegation.model, "skills.curator_model": profile.skills.curator_model}
    return {setting: spec for setting, spec in named.items() if spec}


def model_findings(profile: BotProfile, settings: Settings) -> list[Finding]:
    """Each model of the profile: its spec well formed, its provider known, its key set."""
    primary, *fallbacks = profile.models(settings)
    found: list[Finding] = []
    roles = [(primary, "primary model", "fix", "export it or choose another model with HERMES_MODEL"),
             *((spec, "fallback model", "warn", "it is left out until you export it (or remove it from "
                "fallback_models / HERMES_FALLBACK_MODELS)") for spec in fallbacks),
             *((spec, f"model of {setting}", "fix", f"export it or change {setting} in the bot profile")
               for setting, spec in _aux_models(profile).items())]
    for spec, role, level, todo in roles:
        try:
            if role == "primary model":
                REGISTRY.check(spec)  # its problem in its provider's own words, the sentence a start gives
            missing = _missing_key(spec)
        except ConfigError as exc:
            found.append(Finding("fix", str(exc) if role == "primary model" else f"{role} {spec!r}: {exc}"))
            continue
        if missing is None:
            found.append(Finding("ok", f"{role} {spec}: key set"))
        else:
            found.append(Finding(level, f"{missing}: the key of the {role} {spec}, is not set: {todo}."))
    return found


def mcp_findings(profile: BotProfile) -> list[Finding]:
    """Each MCP server of the profile: every environment variable its env/headers refer to is set. A
    server that then fails to start does not stop the gateway (it is logged, retried, named on /ready)."""
    found: list[Finding] = []
    for name, server in profile.mcp_servers.items():
        missing = server.missing_variables(os.environ)
        if missing:
            found.append(Finding("fix", f"{missing[0]} is not set: MCP server {name} of bot profile "
                                        f"'{profile.name}' refers to it; export it or remove the reference."))
        else:
            found.append(Finding("ok", f"MCP server {name}: its environment references are set"))
    return found


def port_problem(settings: Settings) -> str | None:
    """Whether the HTTP server could listen where the settings say (a quick bind, released at once)."""
    try:
        infos = socket.getaddrinfo(settings.http_host, settings.http_port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return f"HERMES_HTTP_HOST {settings.http_host!r} is not an address of this machine ({exc.strerror}): fix it."
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (f"HERMES_HTTP_PORT {settings.http_port} on {settings.http_host} is already in use: stop "
                        f"the program holding it or choose another port with HERMES_HTTP_PORT.")
            return (f"HERMES_HTTP_HOST/HERMES_HTTP_PORT {settings.http_host}:{settings.http_port} cannot be "
                    f"listened on ({exc.strerror}): choose another.")
    return None


async def database_problem(settings: Settings, service_user: ServiceUser | None = None) -> str | None:
    """Whether the database URL is one this gateway can use: for a server, whether it lets us in; for a
    SQLite file outside the home, whether its folder can be made and written (as `service_user`)."""
    from sqlalchemy.exc import ArgumentError

    from storage.engine import normalize_url

    shape = "sqlite+aiosqlite:///path/to/hermes.db or postgresql+asyncpg://user:password@host:5432/database"
    try:
        url = normalize_url(settings.db_url)
    except (ArgumentError, ValueError):
        return f"HERMES_DATABASE_URL is not a database URL: write it as {shape}."
    backend = url.get_backend_name()
    if backend == "sqlite":
        return _sqlite_folder_problem(url, settings, service_user)
    if url.drivername != "postgresql+asyncpg":
        return f"HERMES_DATABASE_URL names the database driver {url.drivername!r}, which is not supported: use {shape}."
    where = f"PostgreSQL at {url.host or 'localhost'}:{url.port or 5432}"
    try:
        import asyncpg

        conn = await asyncio.wait_for(asyncpg.connect(user=url.username, password=url.password, host=url.host,
                                                      port=url.port, database=url.database), DB_TIMEOUT_SECONDS)
    except (asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError):
        return (f"{where} refused the user {url.username!r} (wrong password or no such user): fix the user and "
                f"password in HERMES_DATABASE_URL.")
    except asyncpg.InvalidCatalogNameError:
        return (f"{where} has no database {url.database!r}: create it (createdb {url.database}) or fix "
                f"HERMES_DATABASE_URL.")
    except (OSError, TimeoutError) as exc:
        reason = getattr(exc, "strerror", None) or "no answer"
        return (f"{where} cannot be reached ({reason}): start it, or fix the host and port in "
                f"HERMES_DATABASE_URL.")
    except Exception as exc:  # whatever else the server says, in one sentence
        return f"{where} cannot be used ({type(exc).__name__}: {exc}): check HERMES_DATABASE_URL."
    await conn.close()
    return None


def _sqlite_folder_problem(url: URL, settings: Settings, service_user: ServiceUser | None) -> str | None:
    from storage.engine import is_memory_sqlite

    if is_memory_sqlite(url):
        return None
    folder = Path((url.database or "").removeprefix("file:")).expanduser().absolute().parent
    if folder.is_relative_to(Path(settings.home).absolute()):
        return None  # the home's own check covers it
    return folder_problem(folder, f"The folder {folder} of the SQLite database in HERMES_DATABASE_URL",
                          "HERMES_DATABASE_URL", service_user)


def usable(profile: BotProfile, settings: Settings) -> BotProfile:
    """The profile with its model chain resolved (the environment's choice applied) and every fallback
    whose key is missing left out (`model_findings` warned of each)."""
    primary, *fallbacks = profile.models(settings)
    kept = [spec for spec in fallbacks if _missing_key(spec) is None]
    return profile.model_copy(update={"model": primary, "fallback_models": kept})


def home_finding(settings: Settings, service_user: ServiceUser | None) -> Finding:
    """The home, tried as this process (or the service user) would use it; nothing is left in it."""
    problem = home_problem(Path(settings.home), service_user)
    if problem:
        return Finding("fix", problem)
    who = f" by {service_user.name}" if service_user else ""
    return Finding("ok", f"HERMES_HOME {settings.home}: usable{who}")


@dataclass(frozen=True)
class Starting:
    """A platform of a profile that has what it needs to start (its credentials are tried next)."""

    profile: str
    name: str
    platform: Platform
    options: PlatformOptions


@dataclass(frozen=True)
class Off:
    """A platform of a profile left off because its token is unset."""

    profile: str
    name: str
    token: EnvVar

    def finding(self) -> Finding:
        return Finding("warn", f"bot profile '{self.profile}': {self.name} is off: {self.token.name} is not set "
                               f"({self.token.purpose}).")


def _profile_platforms(profile: BotProfile, env: dict[str, str]) -> Iterator[Finding | Off | Starting]:
    """Each platform the profile names: known, options valid, token set (or off), environment complete."""
    from adapters.platform import load as load_platform

    where = f"bot profile '{profile.name}'"
    if not profile.platforms:
        yield Finding("warn", f"{where} names no platform under platforms:, so it serves nothing.")
    for name, raw_options in profile.platforms.items():
        try:
            platform = load_platform(name)
            options = platform.parse_options(raw_options)
        except ConfigError as exc:
            yield Finding("fix", f"{where}: {exc}")
            continue
        token = platform.unset_token(options, env)
        if token is not None:
            yield Off(profile.name, name, token)
            continue
        problems = platform.problems(options, env)
        yield from (Finding("fix", problem) for problem in problems)
        if not problems:
            yield Starting(profile.name, name, platform, options)


def _nothing_to_serve(profiles: list[BotProfile], off: list[Off]) -> str:
    """Why no platform at all can start, in one sentence."""
    tokens = sorted({item.token.name for item in off})
    if tokens:
        return (f"No platform can start: {' and '.join(tokens)} {'is' if len(tokens) == 1 else 'are'} not set; "
                f"export the token of at least one platform (a platform whose token is unset stays off).")
    names = ", ".join(f"'{profile.name}'" for profile in profiles)
    which = f"bot profile {names} names" if len(profiles) == 1 else f"bot profiles {names} name"
    return (f"No platform can start: {which} no platform (no platforms: block, or an empty one); give a "
            f"profile that does, e.g. --bot bots/telegram-dm-assistant.")


@dataclass
class Preflight:
    """The checks of `run` (`serving`), `chat` and `doctor`, in the order their problems are reported: the
    home, each profile's models and MCP servers, the platforms, the HTTP port, the database, and last each
    platform's credentials against its API (the only checks that wait on the network)."""

    settings: Settings
    profiles: list[BotProfile]
    serving: bool
    service_user: ServiceUser | None = None
    starting: list[Starting] = field(default_factory=list)

    async def findings(self) -> AsyncIterator[Finding]:
        env = dict(os.environ)
        yield home_finding(self.settings, self.service_user)
        for profile in self.profiles:
            for finding in [*model_findings(profile, self.settings), *mcp_findings(profile)]:
                yield finding
        if self.serving:
            platform_fix, off = False, []
            for profile in self.profiles:
                for item in _profile_platforms(profile, env):
                    if isinstance(item, Starting):
                        self.starting.append(item)
                    elif isinstance(item, Off):
                        off.append(item)
                        yield item.finding()
                    else:
                        platform_fix |= item.level == "fix"
                        yield item
            if not self.starting and not platform_fix:  # a platform's own problem is the sentence then
                yield Finding("fix", _nothing_to_serve(self.profiles, off))
            busy = port_problem(self.settings)
            yield Finding("fix", busy) if busy else Finding("ok", f"HTTP port {self.settings.http_port} free")
        bad_database = await database_problem(self.settings, self.service_user)
        yield Finding("fix", bad_database) if bad_database else Finding("ok", "database reachable")
        if self.starting:
            for finding in await asyncio.gather(*(self._verify(item, env) for item in self.starting)):
                yield finding

    async def _verify(self, item: Starting, env: dict[str, str]) -> Finding:
        said = await item.platform.verify(item.options, env)
        if said.refused:
            return Finding("fix", said.refused)
        if said.unreached:
            return Finding("warn", said.unreached)
        return Finding("ok", f"{item.name} of bot profile '{item.profile}': credentials accepted ({said.who})")

    def to_run(self) -> tuple[Settings, list[BotProfile]]:
        """The settings and profiles to run with, once `findings` has gone through: the model chain taken
        from the environment into each profile, fallbacks without a key left out and, when serving, only the
        platforms that can start (a profile with none left out)."""
        resolved = self.settings.model_copy(update={"model": None, "fallback_models": None})
        profiles = [usable(profile, self.settings) for profile in self.profiles]
        if not self.serving:
            return resolved, profiles
        kept = []
        for profile in profiles:
            names = [item.name for item in self.starting if item.profile == profile.name]
            if names:
                kept.append(profile.model_copy(update={"platforms": {n: profile.platforms[n] for n in names}}))
        return resolved, kept


async def check(settings: Settings, profiles: list[BotProfile], *, serving: bool) -> tuple[Settings, list[BotProfile]]:
    """Raise `ConfigError` with the first problem (alone: the one line a failed start prints); otherwise log
    each warning and give the settings and profiles to run with (`Preflight.to_run`). `serving`: the
    platforms and the HTTP port are checked too (`run`, not `chat`)."""
    preflight = Preflight(settings, profiles, serving=serving)
    warnings = []
    async for finding in preflight.findings():
        if finding.level == "fix":
            raise ConfigError(finding.text)
        if finding.level == "warn":
            warnings.append(finding.text)
    for text in warnings:
        log.warning("%s", text)
    return preflight.to_run()
