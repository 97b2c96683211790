"""The configuration, checked before anything happens: every setting, every profile option (platform
options included), the keys of every model, the database and the HTTP port.

`run` and `chat` call `check` before they create a folder, a database file or a connection that stays
open; `doctor` lists the same findings one by one. A problem is one sentence naming the setting and what
to do. A fallback model whose key is missing is no problem: it is left out with one warning, so it can never
stand between a person and the primary model.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
from dataclasses import dataclass

from hermes_engine.config import BotProfile, Settings
from hermes_engine.errors import ConfigError
from hermes_engine.providers.registry import REGISTRY

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
            missing = _missing_key(spec)
        except ConfigError as exc:
            found.append(Finding("fix", f"{role} {spec!r}: {exc}"))
            continue
        if missing is None:
            found.append(Finding("ok", f"{role} {spec}: key set"))
        else:
            found.append(Finding(level, f"{missing}: the key of the {role} {spec}, is not set: {todo}."))
    return found


def platform_findings(profile: BotProfile) -> list[Finding]:
    """Each platform the profile names: known, its options valid, its environment complete."""
    from adapters.platform import load as load_platform

    found: list[Finding] = []
    for name, raw_options in profile.platforms.items():
        try:
            platform = load_platform(name)
            problems = platform.problems(platform.parse_options(raw_options), os.environ)
        except ConfigError as exc:
            found.append(Finding("fix", f"bot profile '{profile.name}': {exc}"))
            continue
        found += [Finding("fix", problem) for problem in problems]
        if not problems:
            found.append(Finding("ok", f"{name}: options valid, credentials present"))
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


async def database_problem(settings: Settings) -> str | None:
    """Whether the database URL is one this gateway can use and, for a server, whether it lets us in."""
    from sqlalchemy.exc import ArgumentError

    from storage.engine import normalize_url

    shape = "sqlite+aiosqlite:///path/to/hermes.db or postgresql+asyncpg://user:password@host:5432/database"
    try:
        url = normalize_url(settings.db_url)
    except (ArgumentError, ValueError):
        return f"HERMES_DATABASE_URL is not a database URL: write it as {shape}."
    backend = url.get_backend_name()
    if backend == "sqlite":
        return None
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


def usable(profile: BotProfile, settings: Settings) -> BotProfile:
    """The profile with its model chain resolved (the environment's choice applied) and every fallback
    whose key is missing left out, with one warning each."""
    primary, *fallbacks = profile.models(settings)
    kept = []
    for spec in fallbacks:
        missing = _missing_key(spec)
        if missing is None:
            kept.append(spec)
        else:
            log.warning("fallback model %s of bot %s is left out: %s is not set", spec, profile.name, missing)
    return profile.model_copy(update={"model": primary, "fallback_models": kept})


async def check(settings: Settings, profiles: list[BotProfile], *, serving: bool) -> tuple[Settings, list[BotProfile]]:
    """Raise `ConfigError` with the first problem; otherwise the settings and profiles to run with (the
    model chain taken from the environment into each profile, fallbacks without a key left out).
    `serving`: the platforms and the HTTP port are checked too (`run`, not `chat`)."""
    for profile in profiles:
        findings = [*model_findings(profile, settings), *(platform_findings(profile) if serving else []),
                    *mcp_findings(profile)]
        problem = next((f for f in findings if f.level == "fix"), None)
        if problem is not None:
            raise ConfigError(_primary_sentence(profile, settings) or problem.text)
    if serving and (busy := port_problem(settings)):
        raise ConfigError(busy)
    if bad := await database_problem(settings):
        raise ConfigError(bad)
    resolved = settings.model_copy(update={"model": None, "fallback_models": None})
    return resolved, [usable(profile, settings) for profile in profiles]


def _primary_sentence(profile: BotProfile, settings: Settings) -> str | None:
    """The primary model's own error (as the provider words it), when that is what is wrong."""
    try:
        REGISTRY.check(profile.models(settings)[0])
    except ConfigError as exc:
        return str(exc)
    return None
