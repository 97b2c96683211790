"""The kanban board (the `CardStore` role): cards, dependencies, claims with leases, and each card's history.

A claim is "holder#attempt": an attempt finishes its card only while it still holds that claim, so a worker
whose lease was reclaimed (it stalled, or its process was killed: found gone at once on its own host,
`hermes_engine.holders`) can no longer finish or fail the card,
and a card is finished once. Claims run under the write lock (SQLite) or a per-profile advisory lock with
`FOR UPDATE SKIP LOCKED` (PostgreSQL), so two dispatchers never claim the same card.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from hermes_engine.holders import holder_gone
from hermes_engine.ports.storage import CARD_STATUSES, CardEvent, CardRecord, CardSpec, CardUsage, CardViewer
from storage.models import CardDependencyRow, CardEventRow, CardRow
from storage.repos.base import SqlRepository, whole
from storage.values import clean, clean_text

__all__ = ["LOCK_KANBAN_CLAIM", "CardRepository", "find_cycle"]

LOCK_KANBAN_CLAIM = 0x4E5303


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A dependency cycle among `edges` (node → what it depends on), as a path, or None."""
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt] if nxt in path else [*path, nxt]
            if state.get(nxt) is None:
                found = visit(nxt, [*path, nxt])
                if found:
                    return found
        state[node] = 2
        return None

    for start in sorted(edges):
        if state.get(start) is None:
            found = visit(start, [start])
            if found:
                return found
    return None


def _check_status(status: str) -> None:
    if status not in CARD_STATUSES:
        raise ValueError(f"unknown card status {status!r}; expected one of {', '.join(CARD_STATUSES)}")


def _visible_to(viewer: CardViewer | None) -> sa.ColumnElement[bool]:
    """What `viewer` may see (`CardViewer`): everything (no viewer, or an admin); else in a shared conversation
    its cards, in a DM the cards they made. A card with neither an owner nor a conversation is left to admins."""
    if viewer is None or viewer.admin:
        return sa.true()
    if viewer.conversation is not None:
        return CardRow.shared_in == viewer.conversation
    return CardRow.owner_id == viewer.person_id if viewer.person_id is not None else sa.false()


def _plan(specs: Sequence[CardSpec]) -> tuple[dict[str, int], set[int]]:
    """Check a batch before it is written: the position of each key, and the existing cards it names.
    ValueError for a key used twice, an unknown key, an empty title or a cycle."""
    keys = [s.key for s in specs if s.key is not None]
    if len(keys) != len(set(keys)):
        raise ValueError("each card key may be used once in a batch")
    edges: dict[str, set[str]] = {f"new:{i}": set() for i in range(len(specs))}
    by_key = {s.key: i for i, s in enumerate(specs) if s.key is not None}
    existing: set[int] = set()
    for i, spec in enumerate(specs):
        _check_status(spec.status)
        if not spec.title.strip():
            raise ValueError("a card needs a title")
        for dep in spec.depends_on:
            if isinstance(dep, str):
                if dep not in by_key:
                    raise ValueError(f"unknown card key {dep!r} in depends_on")
                edges[f"new:{i}"].add(f"new:{by_key[dep]}")
            else:
                existing.add(int(dep))
    cycle = find_cycle(edges)
    if cycle:
        names = [specs[int(n.split(':')[1])].key or specs[int(n.split(':')[1])].title for n in cycle]
        raise ValueError("dependency cycle refused: " + " → ".join(names))
    return by_key, existing


class CardRepository(SqlRepository):
    """`hermes_engine.ports.storage.CardStore` on SQLAlchemy."""

    # ------------------------------------------------------------------ reading

    async def _deps(self, session: AsyncSession, ids: Sequence[int]) -> dict[int, tuple[int, ...]]:
        out: dict[int, list[int]] = {i: [] for i in ids}
        if ids:
            rows = await session.execute(sa.select(CardDependencyRow.card_id, CardDependencyRow.depends_on)
                                         .where(CardDependencyRow.card_id.in_(list(ids)))
                                         .order_by(CardDependencyRow.depends_on))
            for card_id, dep in rows:
                out[card_id].append(dep)
        return {k: tuple(v) for k, v in out.items()}

    async def _records(self, session: AsyncSession, rows: Sequence[CardRow]) -> list[CardRecord]:
        deps = await self._deps(session, [r.id for r in rows])
        return [CardRecord(id=r.id, title=r.title, body=r.body, status=r.status,  # type: ignore[arg-type]
                           profile=r.profile, depends_on=deps[r.id], parent_id=r.parent_id,
                           goal_mode=r.goal_mode, origin=dict(r.origin or {}), result=r.result, reason=r.reason,
                           attempts=r.attempts, failures=r.failures, claim=r.claim,
                           lease_expires_at=r.lease_expires_at, created_at=r.created_at,
                           updated_at=r.updated_at,
                           spent=CardUsage(r.tokens_in or 0, r.tokens_out or 0, r.model_calls or 0),
                           owner_id=r.owner_id, shared_in=r.shared_in) for r in rows]

    @whole
    async def get_card(self, card_id: int, *, viewer: CardViewer | None = None) -> CardRecord | None:
        async with self._session() as session:
            row = await session.scalar(sa.select(CardRow).where(CardRow.id == card_id, _visible_to(viewer)))
            return (await self._records(session, [row]))[0] if row is not None else None

    @whole
    async def list_cards(self, *, profile: str | None = None, status: str | None = None,
                         parent_id: int | None = None, viewer: CardViewer | None = None) -> list[CardRecord]:
        stmt = sa.select(CardRow).where(_visible_to(viewer))
        if status is not None:
            _check_status(status)
            stmt = stmt.where(CardRow.status == status)
        else:
            stmt = stmt.where(CardRow.status != "archived")
        if profile is not None:
            stmt = stmt.where(CardRow.profile == profile)
        if parent_id is not None:
            stmt = stmt.where(CardRow.parent_id == parent_id)
        async with self._session() as session:
            rows = list(await session.scalars(stmt.order_by(CardRow.id)))
            return await self._records(session, rows)

    @whole
    async def card_events(self, card_id: int) -> list[CardEvent]:
        async with self._session() as session:
            rows = await session.scalars(sa.select(CardEventRow).where(CardEventRow.card_id == card_id)
                                         .order_by(CardEventRow.id))
            return [CardEvent(id=r.id, card_id=r.card_id, actor=r.actor, kind=r.kind, from_status=r.from_status,
                              to_status=r.to_status, reason=r.reason, handoff=dict(r.handoff or {}),
                              created_at=r.created_at) for r in rows]

    # ------------------------------------------------------------------ writing

    def _event(self, session: AsyncSession, card_id: int, actor: str, kind: str, from_status: str | None,
               to_status: str | None, reason: str = "", handoff: dict[str, Any] | None = None) -> None:
        session.add(CardEventRow(card_id=card_id, actor=actor[:255], kind=kind, from_status=from_status,
                                 to_status=to_status, reason=clean_text(reason),
                                 handoff=clean(dict(handoff or {})), created_at=self._now()))

    @whole
    async def create_cards(self, specs: Sequence[CardSpec], *, actor: str) -> list[CardRecord]:
        by_key, existing = _plan(specs)
        async with self._write() as session:
            return await self._records(session, await self._insert_cards(session, specs, by_key, existing, actor))

    async def _insert_cards(self, session: AsyncSession, specs: Sequence[CardSpec], by_key: dict[str, int],
                      existing: set[int], actor: str) -> list[CardRow]:
        if existing:
            found = set(await session.scalars(sa.select(CardRow.id).where(CardRow.id.in_(existing))))
            if existing - found:
                raise ValueError(f"unknown card(s) in depends_on: {sorted(existing - found)}")
        now = self._now()
        rows: list[CardRow] = []
        for spec in specs:
            row = CardRow(title=clean_text(spec.title.strip()), body=clean_text(spec.body), status=spec.status,
                          profile=spec.profile, parent_id=spec.parent_id, goal_mode=spec.goal_mode,
                          origin=clean(dict(spec.origin)), attempts=0, failures=0, created_at=now,
                          updated_at=now, tokens_in=0, tokens_out=0, model_calls=0, owner_id=spec.owner_id,
                          shared_in=spec.shared_in)
            session.add(row)
            rows.append(row)
        await session.flush()
        for row, spec in zip(rows, specs, strict=True):
            for dep in spec.depends_on:
                target = rows[by_key[dep]].id if isinstance(dep, str) else int(dep)
                session.add(CardDependencyRow(card_id=row.id, depends_on=target))
            self._event(session, row.id, actor, "created", None, spec.status)
        await session.flush()
        return rows

    @whole
    async def add_dependency(self, card_id: int, depends_on: int, *, actor: str) -> None:
        if card_id == depends_on:
            raise ValueError(f"dependency cycle refused: card {card_id} cannot wait for itself")
        async with self._write() as session:
            await self._advisory_lock(session, LOCK_KANBAN_CLAIM, "dependencies")
            found = set(await session.scalars(sa.select(CardRow.id).where(CardRow.id.in_([card_id, depends_on]))))
            if found != {card_id, depends_on}:
                raise ValueError(f"unknown card(s): {sorted({card_id, depends_on} - found)}")
            # Would `depends_on` (transitively) wait for `card_id`? Then the new edge closes a cycle.
            frontier, seen = {depends_on}, {depends_on}
            while frontier:
                nxt = set(await session.scalars(sa.select(CardDependencyRow.depends_on)
                                                .where(CardDependencyRow.card_id.in_(frontier))))
                if card_id in nxt:
                    raise ValueError(f"dependency cycle refused: card {depends_on} already waits for {card_id}")
                frontier = nxt - seen
                seen |= nxt
            await session.merge(CardDependencyRow(card_id=card_id, depends_on=depends_on))
            self._event(session, card_id, actor, "dependency", None, None, f"waits for card {depends_on}")

    @whole
    async def move_card(self, card_id: int, status: str, *, actor: str, reason: str = "",
                        viewer: CardViewer | None = None) -> CardRecord | None:
        _check_status(status)
        async with self._write() as session:
            row = await session.scalar(sa.select(CardRow).where(CardRow.id == card_id, _visible_to(viewer))
                                       .with_for_update())
            if row is None:
                return None
            before = row.status
            row.status, row.claim, row.lease_expires_at = status, None, None
            row.reason = clean_text(reason) or None
            if status in ("ready", "todo"):
                row.failures = 0  # a person retrying resets the circuit breaker
            row.updated_at = self._now()
            self._event(session, card_id, actor, "moved", before, status, reason)
            await session.flush()
            return (await self._records(session, [row]))[0]

    @whole
    async def promote_ready(self, profile: str) -> list[int]:
        dep = sa.orm.aliased(CardRow)
        unfinished = (sa.select(CardDependencyRow.card_id)
                      .join(dep, dep.id == CardDependencyRow.depends_on)
                      .where(CardDependencyRow.card_id == CardRow.id, dep.status != "done"))
        async with self._write() as session:
            ids = list(await session.scalars(
                sa.select(CardRow.id).where(CardRow.profile == profile, CardRow.status == "todo",
                                            ~sa.exists(unfinished)).order_by(CardRow.id)))
            if ids:
                await session.execute(sa.update(CardRow).where(CardRow.id.in_(ids), CardRow.status == "todo")
                                      .values(status="ready", updated_at=self._now()))
                for card_id in ids:
                    self._event(session, card_id, "dispatcher", "moved", "todo", "ready", "dependencies done")
            return ids

    @whole
    async def claim_cards(self, profile: str, holder: str, *, lease_seconds: float, max_running: int,
                          limit: int | None = None) -> list[CardRecord]:
        now = self._now()
        async with self._write() as session:
            await self._advisory_lock(session, LOCK_KANBAN_CLAIM, f"claim\x1f{profile}")
            running = await session.scalar(sa.select(sa.func.count()).select_from(CardRow)
                                           .where(CardRow.profile == profile, CardRow.status == "running"))
            free = max_running - int(running or 0)
            if limit is not None:
                free = min(free, limit)
            if free <= 0:
                return []
            stmt = (sa.select(CardRow.id).where(CardRow.profile == profile, CardRow.status == "ready")
                    .order_by(CardRow.id).limit(free))
            if self.dialect == "postgresql":
                stmt = stmt.with_for_update(skip_locked=True)
            ids = list(await session.scalars(stmt))
            if not ids:
                return []
            attempt = CardRow.attempts + 1
            await session.execute(
                sa.update(CardRow).where(CardRow.id.in_(ids), CardRow.status == "ready")
                .values(status="running", attempts=attempt,
                        claim=sa.literal(f"{holder}#") + sa.cast(attempt, sa.String()),
                        lease_expires_at=now + timedelta(seconds=lease_seconds), updated_at=now)
                .execution_options(synchronize_session=False))
            claimed = list(await session.scalars(
                sa.select(CardRow).where(CardRow.id.in_(ids), CardRow.status == "running")
                .order_by(CardRow.id).execution_options(populate_existing=True)))
            for row in claimed:
                self._event(session, row.id, holder, "claimed", "ready", "running", f"attempt {row.attempts}")
            return await self._records(session, claimed)

    @whole
    async def heartbeat_card(self, card_id: int, claim: str, *, lease_seconds: float, note: str = "") -> bool:
        now = self._now()
        async with self._write() as session:
            done = await session.execute(
                sa.update(CardRow).where(CardRow.id == card_id, CardRow.claim == claim, CardRow.status == "running")
                .values(lease_expires_at=now + timedelta(seconds=lease_seconds), updated_at=now)
                .returning(CardRow.id))
            alive = done.first() is not None
            if alive and note:
                self._event(session, card_id, claim, "heartbeat", None, None, note)
            return alive

    async def _end_attempt(self, session: AsyncSession, row: CardRow, actor: str, *, ok: bool, result: str,
                           handoff: dict[str, Any], max_failures: int, kind: str,
                           to_status: str | None = None) -> None:
        before = row.status
        if ok:
            row.status, row.result, row.failures, row.reason = to_status or "done", clean_text(result), 0, None
        else:
            row.failures += 1
            error = str(handoff.get("error") or result or "the attempt failed")
            row.reason = clean_text(error)
            if row.failures >= max_failures:
                row.status = "blocked"
                row.reason = clean_text(f"blocked after {row.failures} failed attempts in a row: {error}")
            else:
                row.status = "ready"
        row.claim, row.lease_expires_at, row.updated_at = None, None, self._now()
        self._event(session, row.id, actor, kind, before, row.status, row.reason or "",
                    {**handoff, "attempt": row.attempts, "ok": ok})

    @whole
    async def finish_attempt(self, card_id: int, claim: str, *, ok: bool, result: str = "",
                             handoff: dict[str, Any] | None = None, max_failures: int = 2,
                             to_status: str | None = None) -> CardRecord | None:
        if to_status is not None:
            _check_status(to_status)
        async with self._write() as session:
            row = await session.scalar(sa.select(CardRow).where(CardRow.id == card_id, CardRow.claim == claim,
                                                                CardRow.status == "running").with_for_update())
            if row is None:
                return None
            await self._end_attempt(session, row, claim, ok=ok, result=result, handoff=dict(handoff or {}),
                                    max_failures=max_failures, kind="completed" if ok else "failed",
                                    to_status=to_status)
            await session.flush()
            return (await self._records(session, [row]))[0]

    @whole
    async def release_card(self, card_id: int, claim: str, *, reason: str) -> bool:
        async with self._write() as session:
            row = await session.scalar(sa.select(CardRow).where(CardRow.id == card_id, CardRow.claim == claim,
                                                                CardRow.status == "running").with_for_update())
            if row is None:
                return False
            row.status, row.claim, row.lease_expires_at, row.updated_at = "ready", None, None, self._now()
            self._event(session, card_id, claim, "released", "running", "ready", reason)
            return True

    @whole
    async def reclaim_stale(self, profile: str, *, max_failures: int = 2) -> list[CardRecord]:
        now = self._now()
        async with self._write() as session:
            stmt = (sa.select(CardRow).where(CardRow.profile == profile, CardRow.status == "running")
                    .order_by(CardRow.id))
            if self.dialect == "postgresql":
                stmt = stmt.with_for_update(skip_locked=True)
            rows = []
            for row in await session.scalars(stmt):
                if row.claim is not None and holder_gone(row.claim):
                    why = f"worker {row.claim} is gone: its process no longer runs"
                elif row.lease_expires_at is None or row.lease_expires_at < now:
                    why = f"lease expired: worker {row.claim} stopped sending heartbeats"
                else:
                    continue
                rows.append((row, why))
            for row, why in rows:
                handoff = {"error": why}
                await self._end_attempt(session, row, "dispatcher", ok=False, result="", handoff=handoff,
                                        max_failures=max_failures, kind="reclaimed")
            await session.flush()
            return await self._records(session, [row for row, _why in rows])

    @whole
    async def split_card(self, card_id: int, claim: str, children: Sequence[CardSpec], *, result: str,
                         handoff: dict[str, Any]) -> tuple[CardRecord, list[CardRecord]] | None:
        by_key, existing = _plan(children)
        async with self._write() as session:
            row = await session.scalar(sa.select(CardRow).where(CardRow.id == card_id, CardRow.claim == claim,
                                                                CardRow.status == "running").with_for_update())
            if row is None:
                return None
            made = await self._insert_cards(session, [replace(c, parent_id=card_id) for c in children], by_key,
                                      existing, claim)
            for child in made:
                session.add(CardDependencyRow(card_id=card_id, depends_on=child.id))
            waiting = "waiting for its parts " + ", ".join(f"#{c.id}" for c in made)
            await self._end_attempt(session, row, claim, ok=True, result=result, handoff=handoff, max_failures=1,
                                    kind="split", to_status="todo")
            row.reason = waiting
            await session.flush()
            records = await self._records(session, [row, *made])
            return records[0], records[1:]

    @whole
    async def block_waiting_parents(self, profile: str, *, actor: str) -> list[CardRecord]:
        child = sa.orm.aliased(CardRow)
        async with self._write() as session:
            pairs = list((await session.execute(
                sa.select(CardRow, child.id, child.reason)
                .join(CardDependencyRow, CardDependencyRow.card_id == CardRow.id)
                .join(child, child.id == CardDependencyRow.depends_on)
                .where(CardRow.profile == profile, CardRow.status == "todo", child.parent_id == CardRow.id,
                       child.status == "blocked")
                .order_by(CardRow.id, child.id))).all())
            blocked: dict[int, CardRow] = {}
            for row, child_id, why in pairs:
                if row.id in blocked:
                    continue
                row.status, row.updated_at = "blocked", self._now()
                row.reason = clean_text(f"its part #{child_id} is blocked: {why or 'no reason given'}")
                self._event(session, row.id, actor, "moved", "todo", "blocked", row.reason)
                blocked[row.id] = row
            await session.flush()
            return await self._records(session, list(blocked.values()))

    @whole
    async def record_card_usage(self, card_id: int, attempt: int, usage: CardUsage, *, actor: str) -> None:
        async with self._write() as session:
            await session.execute(
                sa.update(CardRow).where(CardRow.id == card_id)
                .values(tokens_in=CardRow.tokens_in + usage.tokens_in, tokens_out=CardRow.tokens_out + usage.tokens_out,
                        model_calls=CardRow.model_calls + usage.model_calls))
            self._event(session, card_id, actor, "usage", None, None, usage.describe(),
                        {"attempt": attempt, "tokens_in": usage.tokens_in, "tokens_out": usage.tokens_out,
                         "model_calls": usage.model_calls})
