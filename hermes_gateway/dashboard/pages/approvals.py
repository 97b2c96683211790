"""Approvals: what each request for approval asked, those waiting for an answer now, and how the others ended,
who answered and when, as the store keeps them (`ApprovalStore`: each a day past its expiry). Read-only: an
answer is a press on the question in the chat, where the bot's gate checks that the presser is one of its
approvers (platform user ids); a dashboard admin is no such presser, and a second way to answer would be a
second implementation of that rule."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from aiohttp import web

from hermes_engine.ports.storage import ApprovalRecord
from hermes_gateway.dashboard.pages import Page
from hermes_gateway.dashboard.rendering import SOURCES, render

SHOWN = 200


@dataclass(frozen=True)
class Approvals:
    pending: tuple[ApprovalRecord, ...]  # still waiting for an answer, soonest to expire first
    ended: tuple[ApprovalRecord, ...]  # answered, expired or ended by the turn that asked, newest first


def sort_out(records: list[ApprovalRecord], now: datetime) -> Approvals:
    waiting = [r for r in records if r.state == "pending" and r.expires_at > now]
    over = [r for r in records if r not in waiting]
    return Approvals(tuple(sorted(waiting, key=lambda r: r.expires_at)), tuple(over))


def outcome(record: ApprovalRecord, now: datetime) -> str:
    if record.state == "decided":
        return {"once": "approved once", "session": "approved for the session", "deny": "denied"}.get(
            record.decision or "", record.decision or "decided")
    if record.state == "pending":  # past its expiry: the turn that asked was gone before it could end it
        return "expired" if record.expires_at <= now else "waiting"
    return "ended without an answer"


async def approvals(request: web.Request) -> web.Response:
    sources, now = request.app[SOURCES], datetime.now(UTC)
    records = [r for bot in sources.bots for r in await sources.store.recent_approvals(bot=bot, limit=SHOWN)]
    records.sort(key=lambda r: r.created_at or r.expires_at, reverse=True)
    return render(request, "approvals.html", page="approvals", found=sort_out(records, now), now=now,
                  outcome=outcome)


def routes(router: web.UrlDispatcher) -> None:
    router.add_get("/approvals", approvals)


PAGE = Page("approvals", routes, "Approvals", "/approvals")
