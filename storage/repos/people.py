"""People and their platform accounts: the `PeopleStore` role.

`link_accounts` keeps the merged person's row (marked `merged_into`) rather than deleting it, so anything
keyed by that person id elsewhere (memory files, say) can still be found and moved; accounts and
messages move to the kept person.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from hermes_engine.ports.storage import AccountRecord, PersonRecord
from storage.models import AccountRow, MessageRow, PersonRow
from storage.repos.base import SqlRepository, whole
from storage.values import clean_text

__all__ = ["PeopleRepository"]


def _person(row: PersonRow) -> PersonRecord:
    return PersonRecord(id=row.id, display_name=row.display_name, merged_into=row.merged_into)


def _account(row: AccountRow) -> AccountRecord:
    return AccountRecord(id=row.id, person_id=row.person_id, platform=row.platform, account=row.account,
                         user_id=row.user_id, display_name=row.display_name)


class PeopleRepository(SqlRepository):
    """`hermes_engine.ports.storage.PeopleStore`: people and their accounts."""

    @whole
    async def resolve_account(self, platform: str, account: str, user_id: str,
                              display_name: str = "") -> AccountRecord:
        """Get or create the account; a first-seen account gets a new person. A changed non-empty
        `display_name` is saved on the account. Safe when two first messages race: the loser's insert
        fails on the unique (platform, account, user_id) and it returns the winner's account."""
        display_name = clean_text(display_name)[:255]
        where = (AccountRow.platform == platform, AccountRow.account == account, AccountRow.user_id == user_id)
        async with self._session() as session:
            row = await session.scalar(sa.select(AccountRow).where(*where))
            if row is not None:
                if display_name and row.display_name != display_name:
                    row.display_name = display_name
                    await session.commit()
                return _account(row)
        try:
            async with self._session() as session, session.begin():
                person = PersonRow(display_name=display_name, created_at=self._now())
                session.add(person)
                await session.flush()
                row = AccountRow(person_id=person.id, platform=platform, account=account, user_id=user_id,
                                 display_name=display_name, created_at=self._now())
                session.add(row)
                await session.flush()
                return _account(row)
        except IntegrityError:
            async with self._session() as session:
                row = await session.scalar(sa.select(AccountRow).where(*where))
                if row is None:
                    raise
                return _account(row)

    @whole
    async def link_accounts(self, keep_person_id: int, merge_person_id: int) -> None:
        """Move every account (and the message authorship) of `merge_person_id` onto `keep_person_id`.

        The merged person is kept, marked `merged_into=keep_person_id` (people merged into it earlier are
        re-pointed too), so nothing keyed by its id is lost. Raises ValueError for an unknown person or
        when `keep_person_id` was itself merged away. Linking a person to itself does nothing."""
        if keep_person_id == merge_person_id:
            return
        async with self._write() as session:
            rows = (await session.scalars(
                sa.select(PersonRow).where(PersonRow.id.in_([keep_person_id, merge_person_id]))
                .order_by(PersonRow.id).with_for_update())).all()
            found = {row.id: row for row in rows}
            for pid in (keep_person_id, merge_person_id):
                if pid not in found:
                    raise ValueError(f"no person {pid}")
            keep = found[keep_person_id]
            if keep.merged_into is not None:
                raise ValueError(f"person {keep_person_id} was merged into person {keep.merged_into}")
            await session.execute(sa.update(AccountRow).where(AccountRow.person_id == merge_person_id)
                                  .values(person_id=keep_person_id))
            await session.execute(sa.update(MessageRow).where(MessageRow.person_id == merge_person_id)
                                  .values(person_id=keep_person_id))
            await session.execute(
                sa.update(PersonRow)
                .where(sa.or_(PersonRow.id == merge_person_id, PersonRow.merged_into == merge_person_id))
                .values(merged_into=keep_person_id))

    @whole
    async def get_person(self, person_id: int) -> PersonRecord | None:
        async with self._session() as session:
            row = await session.get(PersonRow, person_id)
            return _person(row) if row is not None else None

    @whole
    async def list_accounts(self, person_id: int) -> list[AccountRecord]:
        async with self._session() as session:
            rows = await session.scalars(
                sa.select(AccountRow).where(AccountRow.person_id == person_id).order_by(AccountRow.id))
            return [_account(row) for row in rows]
