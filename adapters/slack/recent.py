"""A bounded memory of recent keys: what the adapter remembers between events (event ids, threads, open
streams) must not grow with the lifetime of the process. Forgetting the oldest is safe everywhere it is
used, because the engine's durable inbox still answers every message once."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Recent(OrderedDict[K, V]):
    def __init__(self, limit: int = 10_000) -> None:
        super().__init__()
        self.limit = limit

    def remember(self, key: K, value: V) -> None:
        """Store `value` under `key` as the newest entry, dropping the oldest beyond `limit`."""
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)
