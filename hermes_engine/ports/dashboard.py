"""The dashboard's storage role: one-time sign-in links, single sign-ons under way, signed-in sessions and
the audit of what admins changed. Part of `ports.storage.Store`; kept in a module of its own as `cards.py`
and `jobs.py` are.

Only hashes of links, sign-on states and sessions are kept: whoever reads the database cannot sign in with
what it holds. Links and sessions live in the database so a link made on one replica opens a session on
any other, and a session opened on one is honoured by all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class DashboardSession:
    """A signed-in admin: who (`telegram:4242`, or `operator` for a link from the command line) and until when."""

    admin: str
    expires_at: datetime


@dataclass(frozen=True)
class AuditEntry:
    """One change an admin made through the dashboard: who, what, on what, when."""

    at: datetime
    admin: str
    action: str  # e.g. "memory.add", "sign-in"
    subject: str  # what it was done to, e.g. "person 3 MEMORY.md"
    detail: str = ""


@dataclass(frozen=True)
class ListedPerson:
    """A person as the dashboard's list of people shows them: their name and their accounts."""

    id: int
    display_name: str
    accounts: tuple[tuple[str, str], ...]  # (platform, user id)


@dataclass(frozen=True)
class HeldLease:
    """A lease live now: its name (`session:…`, `goal:…`, `job:…`, a platform's election), who holds it (a
    replica, named by `hermes_engine.holders`) and until when."""

    name: str
    holder: str
    expires_at: datetime


class DashboardStore(Protocol):
    async def dashboard_people(self, *, offset: int, limit: int) -> tuple[list[ListedPerson], int]:
        """A page of the people with an account (a person /link merged into another has none left), by id,
        in three queries whatever the page's size; and how many there are in all."""

    async def put_dashboard_link(self, token_hash: str, admin: str, expires_at: datetime) -> None:
        """Keep a sign-in link (by the hash of its token) until it is used or `expires_at`; links long
        expired are deleted on the way."""

    async def take_dashboard_link(self, token_hash: str) -> str | None:
        """The admin a link was made for, once: the link is deleted in the same statement, so two replicas
        given it at the same moment open one session between them. None when unknown, used or expired."""

    async def put_dashboard_oidc_state(self, state_hash: str, browser_hash: str, expires_at: datetime, *,
                                       at_most: int) -> bool:
        """Keep a single sign-on under way until the provider sends the browser back or `expires_at`: the hash
        of its `state` and of the secret the browser that started it holds. Expired ones are deleted on the
        way. Anyone may start one, so False (nothing kept) once `at_most` are under way: the table stays
        bounded whoever knocks."""

    async def take_dashboard_oidc_state(self, state_hash: str) -> str | None:
        """The browser hash a sign-on's `state` was kept with, once (deleted in the same statement, as a link
        is), so a callback replayed on any replica finds nothing. None when unknown, used or expired."""

    async def open_dashboard_session(self, session_hash: str, admin: str, expires_at: datetime) -> None: ...

    async def dashboard_session(self, session_hash: str) -> DashboardSession | None:
        """The session, while it has not expired or been closed."""

    async def close_dashboard_session(self, session_hash: str) -> None: ...

    async def record_dashboard_change(self, admin: str, action: str, subject: str, detail: str = "") -> None: ...

    async def dashboard_changes(self, *, limit: int = 50) -> list[AuditEntry]:
        """The newest changes first."""

    async def live_leases(self, *, limit: int = 5000) -> list[HeldLease]:
        """Leases that have not expired, by holder and name: which replicas are at work, and on what."""

    async def add_faults(self, counts: Mapping[tuple[datetime, str], int]) -> None:
        """Add to the count of faults per minute (`counts`: (the minute, kind) → how many; kinds such as
        `error:provider` or `429:telegram`). Every replica adds its own, so the sum is the whole deployment's;
        minutes older than a day are deleted on the way."""

    async def faults_since(self, since: datetime) -> dict[str, int]:
        """The faults of every replica counted in the minutes from `since`, by kind."""
