"""Named leases (the `LeaseStore` role: a scheduled job runs on one process at a time) and one-time /link
codes (the `LinkCodeStore` role). Both are short-lived rows with an expiry, judged against the store's clock.

A lease whose holder is a process of this replica that is gone (`hermes_engine.holders`) counts as expired:
a gateway restarted after a crash takes its predecessor's leases at once.
"""

from __future__ import annotations

import logging
from datetime import UTC, timedelta

import sqlalchemy as sa

from hermes_engine.holders import holder_gone
from storage.models import LeaseRow, LinkCodeRow, table_of
from storage.repos.base import SqlRepository, whole

__all__ = ["LeaseRepository", "LinkCodeRepository"]

log = logging.getLogger(__name__)


class LeaseRepository(SqlRepository):
    """`hermes_engine.ports.storage.LeaseStore`: named leases with a time to live."""

    @whole
    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        """Take lease `name` for `ttl_seconds`, or renew it when `holder` already has it. False while
        another holder's lease has not expired, unless that holder is a process of this replica that is gone.
        One upsert (and, when it finds the lease held, one look at who holds it): concurrent callers cannot
        both win."""
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        now = self._now()
        table = table_of(LeaseRow)
        stmt = self._insert(table).values(name=name, holder=holder,
                                          expires_at=now + timedelta(seconds=ttl_seconds))
        stmt = stmt.on_conflict_do_update(
            index_elements=["name"],
            set_={"holder": stmt.excluded.holder, "expires_at": stmt.excluded.expires_at},
            where=sa.or_(table.c.expires_at <= now, table.c.holder == stmt.excluded.holder),
        ).returning(table.c.name)
        async with self._single() as session, session.begin():
            if (await session.execute(stmt)).first() is not None:
                return True
        async with self._single() as session:
            current = await session.scalar(sa.select(LeaseRow.holder).where(LeaseRow.name == name))
        if current is None or not holder_gone(current):
            return False
        if await self.hand_over_lease(name, current, holder, ttl_seconds):
            log.info("took lease %s at once: its holder %s is no longer running", name, current)
            return True
        return False

    @whole
    async def hand_over_lease(self, name: str, holder: str, to: str, ttl_seconds: float) -> bool:
        """Pass `holder`'s lease `name` to `to` for `ttl_seconds`, as long as `holder` still has it."""
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        stmt = (sa.update(LeaseRow).where(LeaseRow.name == name, LeaseRow.holder == holder)
                .values(holder=to, expires_at=self._now() + timedelta(seconds=ttl_seconds))
                .returning(LeaseRow.name))
        async with self._single() as session, session.begin():
            return (await session.execute(stmt)).first() is not None

    @whole
    async def renew_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        """Extend `holder`'s lease `name`, expired or not, as long as nobody took it meanwhile (a taker
        overwrites the holder; one that gave it back deleted the row)."""
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        stmt = (sa.update(LeaseRow).where(LeaseRow.name == name, LeaseRow.holder == holder)
                .values(expires_at=self._now() + timedelta(seconds=ttl_seconds)).returning(LeaseRow.name))
        async with self._single() as session, session.begin():
            return (await session.execute(stmt)).first() is not None

    @whole
    async def release_lease(self, name: str, holder: str) -> bool:
        """Give up lease `name` if `holder` holds it; True when it did."""
        async with self._single() as session, session.begin():
            result = await session.execute(
                sa.delete(LeaseRow).where(LeaseRow.name == name, LeaseRow.holder == holder)
                .returning(LeaseRow.name))
            return result.first() is not None


class LinkCodeRepository(SqlRepository):
    """`hermes_engine.ports.storage.LinkCodeStore`: one-time codes that link a person's accounts."""

    @whole
    async def create_link_code(self, code: str, person_id: int, ttl_seconds: float) -> None:
        """Store a one-time /link code for `person_id`; expired codes are swept on the way."""
        now = self._now()
        table = table_of(LinkCodeRow)
        async with self.engine.begin() as conn:
            await conn.execute(sa.delete(table).where(table.c.expires_at <= now))
            await conn.execute(sa.insert(table).values(code=code, person_id=person_id,
                                                       expires_at=now + timedelta(seconds=ttl_seconds)))

    @whole
    async def redeem_link_code(self, code: str) -> int | None:
        """The person who made `code`, if it is live; the code is used up either way (one statement, so
        two redeemers cannot both win)."""
        table = table_of(LinkCodeRow)
        stmt = sa.delete(table).where(table.c.code == code).returning(table.c.person_id, table.c.expires_at)
        async with self.engine.begin() as conn:
            row = (await conn.execute(stmt)).first()
        if row is None:
            return None
        expires_at = row.expires_at if row.expires_at.tzinfo else row.expires_at.replace(tzinfo=UTC)
        return row.person_id if expires_at > self._now() else None
