"""The `DashboardStore` role (migrations 0022, 0023, 0025): sign-in links, single sign-ons under way, dashboard
sessions, the audit of changes, and what the Overview reads of every replica: the leases live now and the
faults counted per minute.

A link (and a sign-on's state) is taken by one `DELETE ... RETURNING`, so it opens at most one session even
when two replicas are handed it at once. Expired links, states and sessions are deleted when new ones are made.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

import sqlalchemy as sa

from hermes_engine.ports.dashboard import AuditEntry, DashboardSession, HeldLease, ListedPerson
from storage.dashboard_rows import (
    DashboardAuditRow,
    DashboardLinkRow,
    DashboardOidcStateRow,
    DashboardSessionRow,
    FaultMinuteRow,
)
from storage.models import AccountRow, LeaseRow, PersonRow, table_of
from storage.repos.base import SqlRepository, whole

__all__ = ["DashboardRepository"]

FAULTS_KEPT = timedelta(days=1)


class DashboardRepository(SqlRepository):
    """`hermes_engine.ports.dashboard.DashboardStore`."""

    @whole
    async def dashboard_people(self, *, offset: int, limit: int) -> tuple[list[ListedPerson], int]:
        listed = sa.exists().where(AccountRow.person_id == PersonRow.id)
        async with self._session() as session:
            count = sa.select(sa.func.count()).select_from(PersonRow).where(listed)
            total = (await session.execute(count)).scalar_one()
            rows = (await session.execute(sa.select(PersonRow.id, PersonRow.display_name).where(listed)
                                          .order_by(PersonRow.id).offset(offset).limit(limit))).all()
            accounts: dict[int, list[tuple[str, str]]] = {}
            if rows:
                query = (sa.select(AccountRow.person_id, AccountRow.platform, AccountRow.user_id)
                         .where(AccountRow.person_id.in_([row.id for row in rows])).order_by(AccountRow.id))
                for person_id, platform, user_id in (await session.execute(query)).all():
                    accounts.setdefault(person_id, []).append((platform, user_id))
        return [ListedPerson(row.id, row.display_name, tuple(accounts.get(row.id, ()))) for row in rows], total

    @whole
    async def put_dashboard_link(self, token_hash: str, admin: str, expires_at: datetime) -> None:
        now = self._now()
        async with self._session() as session, session.begin():
            await session.execute(sa.delete(DashboardLinkRow).where(DashboardLinkRow.expires_at <= now))
            session.add(DashboardLinkRow(token_hash=token_hash, admin=admin, expires_at=expires_at))

    @whole
    async def take_dashboard_link(self, token_hash: str) -> str | None:
        statement = (sa.delete(DashboardLinkRow)
                     .where(DashboardLinkRow.token_hash == token_hash, DashboardLinkRow.expires_at > self._now())
                     .returning(DashboardLinkRow.admin))
        async with self._session() as session, session.begin():
            return (await session.execute(statement)).scalar_one_or_none()

    @whole
    async def put_dashboard_oidc_state(self, state_hash: str, browser_hash: str, expires_at: datetime, *,
                                       at_most: int) -> bool:
        now = self._now()
        async with self._session() as session, session.begin():
            await session.execute(sa.delete(DashboardOidcStateRow).where(DashboardOidcStateRow.expires_at <= now))
            under_way = (await session.execute(sa.select(sa.func.count()).select_from(DashboardOidcStateRow)))
            if under_way.scalar_one() >= at_most:
                return False
            session.add(DashboardOidcStateRow(state_hash=state_hash, browser_hash=browser_hash, expires_at=expires_at))
            return True

    @whole
    async def take_dashboard_oidc_state(self, state_hash: str) -> str | None:
        statement = (sa.delete(DashboardOidcStateRow)
                     .where(DashboardOidcStateRow.state_hash == state_hash,
                            DashboardOidcStateRow.expires_at > self._now())
                     .returning(DashboardOidcStateRow.browser_hash))
        async with self._session() as session, session.begin():
            return (await session.execute(statement)).scalar_one_or_none()

    @whole
    async def open_dashboard_session(self, session_hash: str, admin: str, expires_at: datetime) -> None:
        now = self._now()
        async with self._session() as session, session.begin():
            await session.execute(sa.delete(DashboardSessionRow).where(DashboardSessionRow.expires_at <= now))
            session.add(DashboardSessionRow(session_hash=session_hash, admin=admin, created_at=now,
                                            expires_at=expires_at))

    @whole
    async def dashboard_session(self, session_hash: str) -> DashboardSession | None:
        query = sa.select(DashboardSessionRow).where(DashboardSessionRow.session_hash == session_hash,
                                                    DashboardSessionRow.expires_at > self._now())
        async with self._session() as session:
            row = (await session.scalars(query)).one_or_none()
            return DashboardSession(row.admin, row.expires_at) if row is not None else None

    @whole
    async def close_dashboard_session(self, session_hash: str) -> None:
        async with self._session() as session, session.begin():
            await session.execute(sa.delete(DashboardSessionRow)
                                  .where(DashboardSessionRow.session_hash == session_hash))

    @whole
    async def record_dashboard_change(self, admin: str, action: str, subject: str, detail: str = "") -> None:
        async with self._session() as session, session.begin():
            session.add(DashboardAuditRow(at=self._now(), admin=admin, action=action, subject=subject[:255],
                                          detail=detail))

    @whole
    async def dashboard_changes(self, *, limit: int = 50) -> list[AuditEntry]:
        query = sa.select(DashboardAuditRow).order_by(DashboardAuditRow.id.desc()).limit(limit)
        async with self._session() as session:
            return [AuditEntry(row.at, row.admin, row.action, row.subject, row.detail)
                    for row in await session.scalars(query)]

    @whole
    async def live_leases(self, *, limit: int = 5000) -> list[HeldLease]:
        query = (sa.select(LeaseRow.name, LeaseRow.holder, LeaseRow.expires_at)
                 .where(LeaseRow.expires_at > self._now()).order_by(LeaseRow.holder, LeaseRow.name).limit(limit))
        async with self._session() as session:
            return [HeldLease(row.name, row.holder, row.expires_at) for row in (await session.execute(query)).all()]

    @whole
    async def add_faults(self, counts: Mapping[tuple[datetime, str], int]) -> None:
        table = table_of(FaultMinuteRow)
        rows = [{"minute": minute, "kind": kind[:64], "count": count} for (minute, kind), count in counts.items()]
        async with self._session() as session, session.begin():
            await session.execute(sa.delete(table).where(table.c.minute < self._now() - FAULTS_KEPT))
            if rows:
                stmt = self._insert(table).values(rows)
                await session.execute(stmt.on_conflict_do_update(
                    index_elements=["minute", "kind"], set_={"count": table.c.count + stmt.excluded.count}))

    @whole
    async def faults_since(self, since: datetime) -> dict[str, int]:
        query = (sa.select(FaultMinuteRow.kind, sa.func.sum(FaultMinuteRow.count))
                 .where(FaultMinuteRow.minute >= since).group_by(FaultMinuteRow.kind))
        async with self._session() as session:
            return {kind: int(total) for kind, total in (await session.execute(query)).all()}
