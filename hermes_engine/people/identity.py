"""/link: one person across platforms.

`/link` on one platform gives a one-time code; saying `/link CODE` on another joins the two accounts into
one person with one memory. The code lives in the database (any replica can redeem it), is single-use
and expires after ten minutes.
"""

from __future__ import annotations

import secrets

from hermes_engine.memory.store import MemoryOwner
from hermes_engine.memory.tool import MEMORY
from hermes_engine.policy.pairing import ALPHABET, CODE_LENGTH
from hermes_engine.ports.commands import CommandContext, CommandRegistry
from hermes_engine.ports.feature import Feature

CODE_TTL_SECONDS = 600


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


class IdentityFeature(Feature):
    name = "identity"

    def register_commands(self, registry: CommandRegistry) -> None:
        registry.command("link", "join your accounts on different platforms: /link, then /link CODE there",
                         immediate=True)(self._link)

    async def _link(self, ctx: CommandContext) -> str:
        store = ctx.host.store
        code = ctx.args.strip().upper()
        if not code:
            code = new_code()
            await store.create_link_code(code, ctx.person_id, CODE_TTL_SECONDS)
            return (f"Your link code is {code}. Within 10 minutes, send `/link {code}` to me on your other "
                    "platform; both accounts then share one memory.")
        keep = await store.redeem_link_code(code)
        if keep is None:
            return "That code is unknown or expired. Send /link on your other platform for a new one."
        if keep == ctx.person_id:
            return "These accounts are already linked."
        moved = await merge_memory(ctx, keep, ctx.person_id)
        await store.link_accounts(keep, ctx.person_id)
        await store.merge_usage(keep, ctx.person_id)  # one person, one daily limit: today's use carries over
        ctx.host.forget_people()
        await ctx.host.new_session(ctx.session)  # the next message sees the joined memory
        note = f" {moved}" if moved else ""
        return f"Linked: this account and your other one are now one person with one memory.{note}"


async def merge_memory(ctx: CommandContext, keep: int, merge: int) -> str:
    """Copy the merged person's memory entries into the kept person's documents, as far as they fit."""
    book = ctx.host.services.get(MEMORY)
    if book is None:
        return ""
    left_out = 0
    for target in ("memory", "user"):
        for entry in await book.entries(MemoryOwner.person(merge), target):
            result = await book.add(MemoryOwner.person(keep), target, entry, show_entries=False)
            if not result.ok:
                left_out += 1
    return f"{left_out} memory entries did not fit and stay in the old profile." if left_out else ""
