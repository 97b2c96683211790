"""What a gateway killed with `kill -9` leaves behind while a request for approval waits: the request pending
in the database, and its waiting lease held by a process that no longer runs."""

from __future__ import annotations

import asyncio
import secrets
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hermes_engine.approvals.shared import waiting_lease
from hermes_engine.ports.approval import ApprovalRequest
from hermes_engine.ports.inbound import ReplyTarget

ROOT = Path(__file__).resolve().parents[1]


async def dead_holder() -> str:
    """The lease holder name of a process that has ended: it names itself as a gateway does, then exits."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from hermes_engine.holders import new_holder; print(new_holder())",
        cwd=ROOT, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    return out.decode().strip()


async def left_by_a_killed_process(store, bot: str, target: ReplyTarget, asked_by: str) -> ApprovalRequest:
    """A request as its asking process recorded it before it was killed (the question may still be on screen)."""
    request = ApprovalRequest(secrets.token_hex(6), bot, f"{target.platform}:{target.chat_id}", target,
                              "rm -rf cache", "dangerous", "deletes many files",
                              datetime.now(UTC) + timedelta(minutes=10), asked_by=asked_by)
    await store.record_approval(request.id, bot, request.session_key, request.expires_at, asked_by)
    assert await store.acquire_lease(waiting_lease(request.id), await dead_holder(), 600)
    return request
