"""Provider kinds: the `provider` in a `provider:model` spec, and how each one builds its provider.

A kind is a name, a factory and the environment variables it needs (`ProviderKind`). Kinds come from the
`hermes_gateway.providers` entry-point group: this project declares its built-ins there (anthropic, openai,
openai-compatible, see `builtin.py`), and any installed package adds a kind by declaring its own entry point,
whose object is a `ProviderKind`:

    [project.entry-points."hermes_gateway.providers"]
    mistral = "hermes_mistral:KIND"

`register_provider` adds one at run time (tests, embedding). Entry points are listed by name only, without
importing anything, so validating a spec costs no import; a kind's module is loaded when a provider of that
kind is first checked or built, and a vendor SDK is imported only by the factory that needs it.

Keys are checked before a provider is built, so a missing key is one clear sentence at start-up instead of
an authentication error on the first message. Base URLs are left to the SDKs, which read `OPENAI_BASE_URL` /
`ANTHROPIC_BASE_URL` themselves when no `base_url` is passed.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from hermes_engine.errors import ConfigError
from hermes_engine.ports.models import Provider

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "hermes_gateway.providers"
# Where the built-in kinds live; used directly only when the package metadata is missing (a source tree
# that was never installed), so the built-ins work even then.
_BUILTIN_MODULE = "hermes_engine.providers.builtin"
_MISSING_KEY_HINT = "export it or choose another model with HERMES_MODEL"


def read_env(name: str) -> str | None:
    """The variable's value with surrounding blanks removed; None when unset or blank."""
    value = os.environ.get(name, "").strip()
    return value or None


# Plain classes, not dataclasses: this module is imported at start-up, and each dataclass costs more to
# create than everything else here.


class EnvVar:
    """An environment variable a kind needs. Any of `alternatives` satisfies it too; `hint` completes the
    sentence "NAME is not set: …" shown when none is set."""

    __slots__ = ("alternatives", "hint", "name")

    def __init__(self, name: str, alternatives: Iterable[str] = (), hint: str = _MISSING_KEY_HINT) -> None:
        self.name = name
        self.alternatives = tuple(alternatives)
        self.hint = hint

    def __repr__(self) -> str:
        return f"EnvVar({self.name!r}, alternatives={self.alternatives!r})"

    def value(self) -> str | None:
        for name in (self.name, *self.alternatives):
            value = read_env(name)
            if value is not None:
                return value
        return None

    def missing(self) -> str:
        return f"{self.name} is not set: {self.hint}."


class ProviderOptions:
    """What the engine asks of every provider, whatever its kind."""

    __slots__ = ("images", "max_retries", "timeout")

    def __init__(self, max_retries: int = 3, timeout: float = 600.0, images: bool = True) -> None:
        self.max_retries = max_retries
        self.timeout = timeout
        self.images = images  # the model takes images (`providers.vision`)

    def __repr__(self) -> str:
        return (f"ProviderOptions(max_retries={self.max_retries!r}, timeout={self.timeout!r}, "
                f"images={self.images!r})")


ProviderFactory = Callable[[str, ProviderOptions], Provider]
"""(model, options) → a ready provider. Reads its settings with `read_env`; raises `ConfigError`."""


class ProviderKind:
    """One kind of provider: `name` is the prefix in "name:model"; `env` the variables it cannot do without
    (a plain string stands for `EnvVar(name)`), checked before `factory` is called."""

    __slots__ = ("description", "env", "factory", "name")

    def __init__(self, name: str, factory: ProviderFactory, env: Iterable[EnvVar | str] = (),
                 description: str = "") -> None:
        if not name or name != name.strip().lower() or ":" in name or "," in name:
            raise ValueError(f"provider kind name {name!r} must be lower case, without ':' or ','")
        self.name = name
        self.factory = factory
        self.env: tuple[EnvVar, ...] = tuple(EnvVar(v) if isinstance(v, str) else v for v in env)
        self.description = description

    def __repr__(self) -> str:
        return f"ProviderKind({self.name!r}, env={[v.name for v in self.env]!r})"

    def check_env(self) -> None:
        """Raise `ConfigError` naming the first required variable that is not set."""
        for var in self.env:
            if var.value() is None:
                raise ConfigError(var.missing())

    def build(self, model: str, options: ProviderOptions) -> Provider:
        self.check_env()
        return self.factory(model, options)


class ProviderRegistry:
    """The kinds known to this process: registered ones, plus the entry points of `group` (loaded on use)."""

    def __init__(self, group: str | None = ENTRY_POINT_GROUP) -> None:
        self._group = group
        self._kinds: dict[str, ProviderKind] = {}
        self._entry_points: dict[str, EntryPoint] | None = None  # discovered on first need
        self._lock = threading.Lock()

    def register(self, kind: ProviderKind, *, replace: bool = False) -> ProviderKind:
        """Add `kind`; a name already taken is an error unless `replace`."""
        with self._lock:
            if not replace and (kind.name in self._kinds or kind.name in self._discovered()):
                raise ValueError(f"provider kind {kind.name!r} is already registered")
            self._kinds[kind.name] = kind
        return kind

    def unregister(self, name: str) -> None:
        with self._lock:
            self._kinds.pop(name, None)
            self._discovered().pop(name, None)

    def names(self) -> list[str]:
        """Every known kind, sorted; nothing is imported to list them."""
        with self._lock:
            return sorted({*self._kinds, *self._discovered()})

    def kind(self, name: str) -> ProviderKind:
        """The kind called `name`, loading its entry point on first use."""
        with self._lock:
            kind = self._kinds.get(name)
            if kind is not None:
                return kind
            entry_point = self._discovered().get(name)
        if entry_point is None:
            raise ConfigError(f"Model provider {name!r} is unknown; use one of {', '.join(self.names())}.")
        kind = _load(entry_point)
        with self._lock:
            return self._kinds.setdefault(name, kind)

    def parse(self, spec: str) -> tuple[str, str]:
        """"anthropic:claude-sonnet-4-5" → ("anthropic", "claude-sonnet-4-5"). The model part may hold colons
        (Ollama tags such as "openai-compatible:llama3:8b")."""
        provider, sep, model = (spec or "").strip().partition(":")
        provider, model = provider.strip().lower(), model.strip()
        if not sep or not provider or not model:
            raise ConfigError(f"Model {spec!r} is not of the form provider:model "
                              "(for example anthropic:claude-sonnet-4-5); fix HERMES_MODEL or HERMES_FALLBACK_MODELS.")
        known = self.names()
        if provider not in known:
            raise ConfigError(f"Model provider {provider!r} in {spec!r} is unknown; use one of {', '.join(known)}.")
        return provider, model

    def check(self, spec: str) -> None:
        """Raise `ConfigError` if `spec` is malformed, of an unknown kind, or misses a variable; builds nothing."""
        provider, _ = self.parse(spec)
        self.kind(provider).check_env()

    def build(self, spec: str, *, max_retries: int = 3, timeout: float = 600.0) -> Provider:
        """The provider for `spec`, configured from the environment."""
        from hermes_engine.providers.vision import TEXT_ONLY_VARIABLE, takes_images

        provider, model = self.parse(spec)
        images = takes_images(f"{provider}:{model}", read_env(TEXT_ONLY_VARIABLE))
        return self.kind(provider).build(model, ProviderOptions(max_retries=max_retries, timeout=timeout,
                                                                images=images))

    def _discovered(self) -> dict[str, EntryPoint]:
        """The group's entry points by name (called with the lock held)."""
        if self._entry_points is None:
            self._entry_points = _entry_points(self._group) if self._group else {}
            if self._group == ENTRY_POINT_GROUP and not self._entry_points:
                self._entry_points = _builtin_entry_points()
        return self._entry_points


def _entry_points(group: str) -> dict[str, EntryPoint]:
    from importlib.metadata import entry_points

    found: dict[str, EntryPoint] = {}
    for entry_point in entry_points(group=group):
        name = entry_point.name.strip().lower()
        if name in found and found[name].value != entry_point.value:
            log.warning("provider kind %r is declared twice (%s and %s); using the first",
                        name, found[name].value, entry_point.value)
            continue
        found.setdefault(name, entry_point)
    return found


def _builtin_entry_points() -> dict[str, EntryPoint]:
    """The built-ins as entry points, for a source tree whose package metadata is missing."""
    from importlib.metadata import EntryPoint

    log.debug("no %s entry points found (package not installed?); using the built-in provider kinds",
              ENTRY_POINT_GROUP)
    names = {"anthropic": "ANTHROPIC", "openai": "OPENAI", "openai-compatible": "OPENAI_COMPATIBLE"}
    return {name: EntryPoint(name, f"{_BUILTIN_MODULE}:{attr}", ENTRY_POINT_GROUP) for name, attr in names.items()}


def _load(entry_point: EntryPoint) -> ProviderKind:
    try:
        kind = entry_point.load()
    except Exception as exc:  # a broken plugin: one sentence naming it, not a traceback
        raise ConfigError(f"Model provider {entry_point.name!r} ({entry_point.value}) could not be loaded: "
                          f"{exc}.") from exc
    if not isinstance(kind, ProviderKind):
        raise ConfigError(f"Model provider {entry_point.name!r} ({entry_point.value}) is not a ProviderKind.")
    if kind.name != entry_point.name.strip().lower():
        raise ConfigError(f"Model provider entry point {entry_point.name!r} ({entry_point.value}) holds the kind "
                          f"{kind.name!r}; the names must match.")
    return kind


REGISTRY = ProviderRegistry()


def register_provider(name: str, factory: ProviderFactory, *, env: Iterable[str | EnvVar] = (),
                      description: str = "", replace: bool = False) -> ProviderKind:
    """Add a kind to the process-wide registry (an installed package would declare an entry point instead)."""
    return REGISTRY.register(ProviderKind(name, factory, env, description), replace=replace)


def known_providers() -> list[str]:
    return REGISTRY.names()


def parse_model_spec(spec: str) -> tuple[str, str]:
    """"anthropic:claude-sonnet-4-5" → ("anthropic", "claude-sonnet-4-5"); `ConfigError` when malformed or
    of an unknown kind."""
    return REGISTRY.parse(spec)


def parse_model_list(text: str | None) -> list[str]:
    """HERMES_FALLBACK_MODELS: comma-separated specs; blanks ignored, each one validated."""
    specs = [s.strip() for s in (text or "").split(",") if s.strip()]
    for spec in specs:
        parse_model_spec(spec)
    return specs


def check_provider(spec: str) -> None:
    """`ConfigError` unless `spec` is well formed, of a known kind, and has the variables it needs."""
    REGISTRY.check(spec)


def make_provider(spec: str, *, max_retries: int = 3, timeout: float = 600.0) -> Provider:
    """Build the provider for `spec`, reading its key (and whatever else its kind needs) from the env."""
    return REGISTRY.build(spec, max_retries=max_retries, timeout=timeout)
