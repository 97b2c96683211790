"""What a feature may ask of this replica's leases: work that must run on one replica at a time."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol


def session_lease(bot: str, session_key: str) -> str:
    """A session's turns run on the replica holding this."""
    return f"session:{bot}:{session_key}"


def goal_lease(goal_id: int) -> str:
    """A goal's next step is taken by the replica holding this."""
    return f"goal:{goal_id}"


def review_lease(bot: str, session_id: int) -> str:
    """A session's background review runs on the replica holding this."""
    return f"review:{bot}:{session_id}"


def job_lease(job_id: int) -> str:
    """A scheduled job's due run is taken by the replica holding this."""
    return f"job:{job_id}"


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
