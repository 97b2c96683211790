"""`/dashboard`: an admin of the bot, in a direct message, gets a one-time sign-in link to the dashboard.

Only in a DM: a link in a group could be opened by anyone who reads it first.
"""

from __future__ import annotations

from hermes_engine.ports.commands import Command, CommandContext, CommandRegistry
from hermes_engine.ports.dashboard import DashboardStore
from hermes_engine.ports.inbound import ChatKind
from hermes_gateway.dashboard.config import Dashboard
from hermes_gateway.dashboard.links import minutes, sign_in_link

NOT_ADMIN = "Only an admin of this bot can open the dashboard."


def register_dashboard_command(registry: CommandRegistry, store: DashboardStore, dashboard: Dashboard) -> None:
    async def handler(ctx: CommandContext) -> str | None:
        if not ctx.is_admin:
            return NOT_ADMIN
        if ctx.message.chat_kind is not ChatKind.DM:
            return "Send /dashboard to me in a direct message: the link signs in whoever opens it."
        link = await sign_in_link(store, dashboard, f"{ctx.message.platform}:{ctx.message.user_id}")
        # Sent here rather than returned: a command's answer is redacted, and the token looks like the secret
        # it is. Under the command's idempotency key, so a replay after a crash does not send a second link.
        await ctx.host.notify(ctx.message.reply_target(), f"Your dashboard link (works once, for "
                              f"{minutes(dashboard)}):\n{link}", idempotency_key=f"{ctx.message.event_id}:command")
        return None

    # Not `admin_only`: that hides it from nobody and answers a stranger the same way; this says one sentence.
    registry.add(Command("dashboard", "a one-time link to the web dashboard (admins, in a DM)", handler))
