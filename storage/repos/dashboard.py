"""The `DashboardStore` role (migration 0022): sign-in links, dashboard sessions and the audit of changes.

A link is taken by one `DELETE ... RETURNING`, so it opens at most one session even when two replicas are
handed it at once. Expired links and sessions are deleted when new ones are made.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from hermes_engine.ports.dashboard import AuditEntry, DashboardSession, ListedPerson
from storage.dashboard_rows import DashboardAuditRow, DashboardLinkRow, DashboardSessionRow
from storage.models import AccountRow, PersonRow
from storage.repos.base import SqlRepository, whole

__all__ = ["DashboardRepository"]


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
