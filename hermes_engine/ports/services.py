"""What features serve their tools, looked up by typed keys rather than by strings.

A feature declares the objects its tools need (`Feature.services`); the gateway gathers them and every
`ToolContext` carries them. A key is an object with a type, like aiohttp's `AppKey`: the tool that asks for
`MEMORY` gets a `MemoryBook | None` that a type checker knows, and a misspelt key is a name error rather
than a silent None. Each key is defined once, beside the tools that use it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")


class ServiceKey(Generic[T]):
    """The name of one service and the type of what it names. Keys compare by identity."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name  # also what a sub-agent or a kanban worker is refused by (its toolset's name)

    def __repr__(self) -> str:
        return f"ServiceKey({self.name!r})"


class Services:
    """The services one tool call may reach; read-only, changed only by making another."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Mapping[ServiceKey[Any], object] | None = None) -> None:
        self._entries: dict[ServiceKey[Any], object] = dict(entries or {})

    def get(self, key: ServiceKey[T]) -> T | None:
        return cast("T | None", self._entries.get(key))

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[ServiceKey[Any]]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def with_entry(self, key: ServiceKey[T], value: T) -> Services:
        return Services({**self._entries, key: value})

    def without(self, names: Collection[str]) -> Services:
        """These services minus those named `names` (what a sub-agent or a worker must not reach)."""
        return Services({k: v for k, v in self._entries.items() if k.name not in names})

    def joined(self, entries: Mapping[ServiceKey[Any], object]) -> Services:
        return Services({**self._entries, **entries})
