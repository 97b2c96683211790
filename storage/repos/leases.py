"""Named leases (the `LeaseStore` role: a scheduled job runs on one process at a time) and one-time /link
codes (the `LinkCodeStore` role). Both are short-lived rows with an expiry, judged against the store's clock.

A lease whose holder is a process of this replica that is gone (`hermes_engine.holders`) counts as expired:
a gateway restarted after a crash takes its predecessor's leases at once.
"""

from __future__ import annotations

import logging
from datetime import UTC, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from hermes_engine.holders import holder_gone
from storage.models import LeaseRow, LinkCodeRow, table_of
from storage.repos.base import SqlRepository, whole

__all__ = ["LeaseRepository", "LinkCodeRepository"]

_LEASES = table_of(LeaseRow)
# Not named as the columns: an update reserves those names.
_NAME: sa.BindParameter[str] = sa.bindparam("lease", type_=sa.String())
_HOLDER: sa.BindParameter[str] = sa.bindparam("by", type_=sa.String())
_UNTIL = sa.bindparam("until", type_=_LEASES.c.expires_at.type)


def _take(insert: type[sqlite.Insert] | type[postgresql.Insert]) -> sa.Executable:
    """Take or renew in one upsert, values bound by name: a lease is taken for every turn, and building
    the statement (its `excluded` columns above all) costs more than running it."""
    stmt = insert(_LEASES).values(name=_NAME, holder=_HOLDER, expires_at=_UNTIL)
    now = sa.bindparam("now", type_=_LEASES.c.expires_at.type)
    return stmt.on_conflict_do_update(
        index_elements=["name"], set_={"holder": stmt.excluded.holder, "expires_at": stmt.excluded.expires_at},
        where=sa.or_(_LEASES.c.expires_at <= now, _LEASES.c.holder == stmt.excluded.holder),
    ).returning(_LEASES.c.name)


_ACQUIRE = {"sqlite": _take(sqlite.Insert), "postgresql": _take(postgresql.Insert)}
_HOLDS = sa.and_(_LEASES.c.name == _NAME, _LEASES.c.holder == _HOLDER)
_HAND_OVER = (sa.update(_LEASES).where(_HOLDS).values(holder=sa.bindparam("to"), expires_at=_UNTIL)
              .returning(_LEASES.c.name))
_RENEW = sa.update(_LEASES).where(_HOLDS).values(expires_at=_UNTIL).returning(_LEASES.c.name)
_RELEASE = sa.delete(_LEASES).where(_HOLDS).returning(_LEASES.c.name)
_HOLDER_OF = sa.select(_LEASES.c.holder).where(_LEASES.c.name == _NAME)


def _changed(result: sa.CursorResult[Any]) -> bool:
    return result.first() is not None


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
        params = {"lease": name, "by": holder, "until": now + timedelta(seconds=ttl_seconds), "now": now}
        if await self._hot(_ACQUIRE[self.dialect], params, _changed):
            return True
        current = await self._hot(_HOLDER_OF, {"lease": name}, lambda result: result.scalar())
        if current is None or not holder_gone(current):
            return False
        if await self.hand_over_lease(name, current, holder, ttl_seconds):
            log.info("took lease %s at once: its holder %s is no longer running", name, current)
            return True
        return False

    async def hand_over_lease(self, name: str, holder: str, to: str, ttl_seconds: float) -> bool:
        """Pass `holder`'s lease `name` to `to` for `ttl_seconds`, as long as `holder` still has it."""
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        params = {"lease": name, "by": holder, "to": to, "until": self._now() + timedelta(seconds=ttl_seconds)}
        return bool(await self._hot(_HAND_OVER, params, _changed))

    async def renew_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        """Extend `holder`'s lease `name`, expired or not, as long as nobody took it meanwhile (a taker
        overwrites the holder; one that gave it back deleted the row)."""
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        params = {"lease": name, "by": holder, "until": self._now() + timedelta(seconds=ttl_seconds)}
        return bool(await self._hot(_RENEW, params, _changed))

    async def release_lease(self, name: str, holder: str) -> bool:
        """Give up lease `name` if `holder` holds it; True when it did."""
        return bool(await self._hot(_RELEASE, {"lease": name, "by": holder}, _changed))


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
