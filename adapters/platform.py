"""The platform contract: how a chat platform plugs into the gateway.

A platform package (`adapters/telegram/`, …) exposes one `Platform` object and registers it under the
entry-point group `hermes_gateway.platforms` (see `pyproject.toml`), the way pytest and `llm` plugins
register. The composition root loads platforms by name from that group only when a bot profile names them,
so an unused platform's SDK is never imported; `doctor` asks each platform what it needs instead of
knowing it. Adding a platform is one new package and one entry-point line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from hermes_engine.errors import ConfigError

if TYPE_CHECKING:
    from aiohttp import web

    from adapters.base import PlatformAdapter
    from hermes_engine.config import Settings
    from hermes_engine.ports.engine import EnginePort

ENTRY_POINT_GROUP = "hermes_gateway.platforms"


class PlatformOptions(BaseModel):
    """Base of every platform's options (the `platforms.<name>:` block of a bot profile). Unknown keys are
    an error, so a typo never silently switches a platform off."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class EnvVar:
    """`token`: the platform's own credential. Leaving it unset is how an operator leaves a platform off, so
    its absence is a warning, where any other required variable missing is an error."""

    name: str
    purpose: str
    required: bool = True
    token: bool = False


@dataclass(frozen=True)
class CredentialCheck:
    """What the platform's API said of the credentials, each a sentence: `refused` when it turned them down
    (the platform cannot start), `unreached` when it could not be asked (they stay untested; the adapter
    keeps trying once started). Neither: accepted, and `who` names the account."""

    refused: str | None = None
    unreached: str | None = None
    who: str = ""


class Platform(ABC):
    name: ClassVar[str]
    options_model: ClassVar[type[PlatformOptions]] = PlatformOptions

    def parse_options(self, options: Mapping[str, Any] | None) -> PlatformOptions:
        """The profile's block for this platform, validated; a bad value is one sentence naming it."""
        try:
            return self.options_model(**dict(options or {}))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top level)"
            raise ConfigError(f"Setting 'platforms.{self.name}.{where}' is invalid: {first['msg']}.") from None

    @abstractmethod
    def environment(self, options: PlatformOptions, env: Mapping[str, str]) -> list[EnvVar]:
        """The environment variables this platform needs with these options (for `doctor`)."""

    def unset_token(self, options: PlatformOptions, env: Mapping[str, str]) -> EnvVar | None:
        """The platform's token when it is unset (the platform then stays off), else None."""
        return next((v for v in self.environment(options, env) if v.token and not (env.get(v.name) or "").strip()),
                    None)

    def problems(self, options: PlatformOptions, env: Mapping[str, str]) -> list[str]:
        """One sentence per missing or malformed setting; empty when the platform can start."""
        return [f"{self.name}: set {v.name} ({v.purpose})." for v in self.environment(options, env)
                if v.required and not (env.get(v.name) or "").strip()]

    @abstractmethod
    async def verify(self, options: PlatformOptions, env: Mapping[str, str]) -> CredentialCheck:
        """Ask the platform's API, at the base URL the adapter would use, whom the credentials belong to:
        a wrong token is found before anything is created, not after the gateway has started."""

    @abstractmethod
    def build(self, engine: EnginePort, settings: Settings, options: PlatformOptions,
              http: web.Application | None, env: Mapping[str, str]) -> PlatformAdapter:
        """The adapter for one bot; raises ConfigError (one sentence) when it cannot run as configured.
        Routes it serves (webhooks, events) are mounted on `http`, the gateway's one HTTP server."""


def available() -> list[str]:
    return sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def load(name: str) -> Platform:
    """The platform registered as `name`; ConfigError naming the known ones otherwise."""
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        raise ConfigError(f"Unknown platform '{name}' (known: {', '.join(available()) or 'none installed'}).")
    platform = found[0].load()
    if not isinstance(platform, Platform):
        raise ConfigError(f"The entry point for platform '{name}' is not a Platform: {found[0].value}.")
    return platform
