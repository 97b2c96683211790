"""What a feature may ask of this replica's leases: work that must run on one replica at a time."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol


class Leases(Protocol):
    """Named leases held by this replica (`hermes_engine/core/leases.py` keeps them in the store)."""

    @property
    def renew_every(self) -> float:
        """Seconds between heartbeats: a loop that waits on another replica's lease polls this often."""
        ...

    def held(self, name: str, *, wait: bool = False) -> AbstractAsyncContextManager[bool]:
        """`async with leases.held(name) as ok`: ok says whether this replica holds `name` now (`wait`: once
        nobody else does); it is renewed while the block runs and given back at its end."""
        ...
