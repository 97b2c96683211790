"""May a job's owner still write in the job's chat? Asked before each run, so a person the operator took off
the allowlist (or whose pairing was revoked) stops getting their reminders and tasks.

The answer is the access gate's for the owner's next message there (`Host.may_write`), from the profile's
rules and what the chat's adapter says of it: its platform's own allowlist, and whether the platform is the
membership boundary there (every Slack chat of the workspace, a Discord server's channels). A job sent to a chat
its owner named (`targets.py`) also needs the bot still there and allowed to post, which its adapter asks the
platform (`Host.chat_presence`).
"""

from __future__ import annotations

from hermes_engine.clock.targets import absence
from hermes_engine.ports.host import Host
from hermes_engine.ports.inbound import ChatKind, InboundMessage, ReplyTarget
from hermes_engine.ports.jobs import JobRecord


async def owner_ids(host: Host, job: JobRecord) -> list[str]:
    """The owner's user ids on the platform of the job's chat (of its account first)."""
    target = ReplyTarget.from_dict(job.target)
    accounts = [a for a in await host.store.list_accounts(job.owner_id) if a.platform == target.platform]
    return [a.user_id for a in accounts if a.account == target.account] or [a.user_id for a in accounts]


async def owner_is_admin(host: Host, job: JobRecord) -> bool:
    """The owner's admin standing, asked of `Host.is_admin` as a turn's is. A platform's role (a Discord
    `admin_role`) is a fact of the message a turn answers, which a scheduled run has not: the operator's
    `access.admins` decide it here."""
    target = ReplyTarget.from_dict(job.target)
    return any(host.is_admin(InboundMessage(platform=target.platform, account=target.account, chat_kind=ChatKind.DM,
                                            chat_id=target.chat_id, user_id=user_id, text="", message_id="",
                                            synthetic=True))
               for user_id in await owner_ids(host, job))


async def refusal(host: Host, job: JobRecord) -> str | None:
    """Why the job may not be delivered to its chat any more: its owner may not write there, or (in a chat they
    named) the bot is not there or may not post (None: it may be delivered)."""
    target = ReplyTarget.from_dict(job.target)
    ids = await owner_ids(host, job)
    if not ids:
        return f"its owner has no {target.platform} account any more"
    direct = ":dm:" in job.session_key  # `InboundMessage.session_key` names a direct chat so
    for user_id in ids:
        if await host.may_write(target, user_id, direct=direct):
            return await absence(host, job.target, user_id)
    return "its owner may no longer write in its chat"
