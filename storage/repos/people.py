"""People and their platform accounts: the `PeopleStore` role.

`link_accounts` keeps the merged person's row (marked `merged_into`) rather than deleting it, so anything
keyed by that person id elsewhere (memory files, say) can still be found and moved; accounts and
messages move to the kept person. `forget_person` is the one deletion: a person asked for everything about
them to go, so it reaches past this role's own tables into sessions, messages, goals and the inbox.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from hermes_engine.ports.storage import AccountRecord, ForgottenPerson, PersonRecord
from storage.models import (
    AccountRow,
    CardEventRow,
    CardRow,
    CompactionRow,
    GoalRow,
    InboundEventRow,
    LinkCodeRow,
    MessageRow,
    PersonRow,
    PersonTimezoneRow,
    ScheduledJobRow,
    SessionRow,
)
from storage.repos.base import SqlRepository, whole
from storage.values import clean_text

__all__ = ["REMOVED", "PeopleRepository"]

REMOVED = "[message removed: its author asked to be forgotten]"


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
        async with self._single() as session:  # one statement (and the name's one update)
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

    @whole
    async def find_accounts(self, *, platform: str | None = None, user_id: str | None = None) -> list[AccountRecord]:
        query = sa.select(AccountRow).order_by(AccountRow.person_id, AccountRow.id)
        if platform is not None:
            query = query.where(AccountRow.platform == platform)
        if user_id is not None:
            query = query.where(AccountRow.user_id == user_id)
        async with self._session() as session:
            return [_account(row) for row in await session.scalars(query)]

    @whole
    async def forget_person(self, person_id: int) -> ForgottenPerson | None:
        """A session is deleted whole when no one else wrote in it: the person's DMs and their own
        conversations in groups (and a DM frozen for them before they wrote). In a session others wrote in
        too, the person's messages stay as empty turns (text, images and author gone), so the conversation the
        others keep still alternates as the model expects; what the assistant answered there stays with them."""
        async with self._write() as session:
            if await session.get(PersonRow, person_id) is None:
                return None
            ids = [person_id, *(await session.scalars(
                sa.select(PersonRow.id).where(PersonRow.merged_into == person_id)))]
            accounts = [_account(row) for row in await session.scalars(
                sa.select(AccountRow).where(AccountRow.person_id.in_(ids)).order_by(AccountRow.id))]
            whole_ids = await self._sessions_of_only(session, ids)
            keys = (await session.execute(
                sa.select(SessionRow.key, SessionRow.bot).where(SessionRow.id.in_(whole_ids)))).all()
            inbound, paths = await self._inbound_of(session, accounts)

            goals = await _delete(session, GoalRow, sa.or_(
                GoalRow.session_id.in_(whole_ids),
                *(sa.and_(GoalRow.session_key == key, GoalRow.bot == bot) for key, bot in keys)))
            messages = await _delete(session, MessageRow, MessageRow.session_id.in_(whole_ids))
            blanked = await session.execute(  # a shared conversation keeps its turns, without their words
                sa.update(MessageRow).where(MessageRow.person_id.in_(ids))
                .values(content=REMOVED, images=None, meta=None, person_id=None)
                .execution_options(synchronize_session=False))
            messages += int(getattr(blanked, "rowcount", 0) or 0)
            await _delete(session, CompactionRow, CompactionRow.session_id.in_(whole_ids))
            await session.execute(sa.update(SessionRow).where(SessionRow.parent_id.in_(whole_ids))
                                  .values(parent_id=None))
            sessions = await _delete(session, SessionRow, SessionRow.id.in_(whole_ids))
            inbound_count = await _delete(session, InboundEventRow, InboundEventRow.id.in_(inbound))
            link_codes = await _delete(session, LinkCodeRow, LinkCodeRow.person_id.in_(ids))
            cards = await self._wipe_cards_for(session, ids)
            jobs = await _delete(session, ScheduledJobRow, ScheduledJobRow.owner_id.in_(ids))
            await _delete(session, PersonTimezoneRow, PersonTimezoneRow.person_id.in_(ids))
            await _delete(session, AccountRow, AccountRow.person_id.in_(ids))
            await session.execute(sa.update(PersonRow).where(PersonRow.merged_into.in_(ids)).values(merged_into=None))
            await _delete(session, PersonRow, PersonRow.id.in_(ids))
        return ForgottenPerson(person_ids=tuple(ids), accounts=tuple(accounts),
                               session_keys=tuple(sorted({key for key, _ in keys})), sessions=sessions,
                               messages=messages, inbound=inbound_count, goals=goals, link_codes=link_codes,
                               attachment_paths=tuple(paths), cards=cards, jobs=jobs)

    @staticmethod
    async def _wipe_cards_for(session: AsyncSession, ids: Collection[int]) -> int:
        """Cards a person's request made carry their words (title, body, results, handoffs) and where to tell
        them: archived with all of it wiped, so no dispatcher runs them again and the board keeps no trace. A
        worker still on one finds it archived when it reports."""
        cards = list(await session.scalars(sa.select(CardRow.id).where(sa.or_(
            CardRow.origin[("for", "person_id")].as_integer().in_(ids), CardRow.owner_id.in_(ids)))))
        if cards:
            await _delete(session, CardEventRow, CardEventRow.card_id.in_(cards))
            await session.execute(sa.update(CardRow).where(CardRow.id.in_(cards)).values(
                title=REMOVED, body=REMOVED, result=None, reason=None, origin={}, status="archived", claim=None,
                lease_expires_at=None, owner_id=None, shared_in=None).execution_options(synchronize_session=False))
        return len(cards)

    @staticmethod
    async def _sessions_of_only(session: AsyncSession, ids: Collection[int]) -> list[int]:
        """Sessions the people wrote in, or whose frozen prompt was made for them, where no one else wrote."""
        wrote = sa.select(MessageRow.session_id).where(MessageRow.person_id.in_(ids))
        owned = sa.select(SessionRow.id).where(SessionRow.state["owner"].as_integer().in_(ids))
        others = sa.select(MessageRow.session_id).where(MessageRow.role == "user", MessageRow.person_id.is_not(None),
                                                        MessageRow.person_id.not_in(ids))
        query = sa.select(SessionRow.id).where(sa.or_(SessionRow.id.in_(wrote), SessionRow.id.in_(owned)),
                                               SessionRow.id.not_in(others))
        return list(await session.scalars(query))

    @staticmethod
    async def _inbound_of(session: AsyncSession, accounts: Collection[AccountRecord]) -> tuple[list[int], list[str]]:
        """Inbox rows of messages these accounts sent, and the attachment files those messages recorded."""
        if not accounts:
            return [], []
        payload = InboundEventRow.payload  # {"bot": …, "message": <the InboundMessage as a dict>, …}
        query = sa.select(InboundEventRow.id, payload).where(sa.or_(*(sa.and_(
            InboundEventRow.platform == a.platform, payload[("message", "account")].as_string() == a.account,
            payload[("message", "user_id")].as_string() == a.user_id) for a in accounts)))
        ids, paths = [], []
        for row_id, data in (await session.execute(query)).all():
            ids.append(row_id)
            message = (data or {}).get("message") or {}
            paths += [str(item["path"]) for item in message.get("attachments") or ()
                      if isinstance(item, dict) and item.get("path")]
        return ids, paths


async def _delete(session: AsyncSession, row: Any, condition: Any) -> int:
    result = await session.execute(sa.delete(row).where(condition).execution_options(synchronize_session=False))
    return int(getattr(result, "rowcount", 0) or 0)
