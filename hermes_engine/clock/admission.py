"""May a job's owner still write in the job's chat? Asked before each run, so a person the operator took off
the allowlist (or whose pairing was revoked) stops getting their reminders and tasks.

The answer is the one `policy.access.AccessGate.admit` gives the owner's next message there, made from the
same facts the adapters hand it: listed in `access.allowed_users` or `access.admins`, or approved through
pairing; where the platform is itself a membership boundary (every Slack chat of the workspace, a Discord
server's channels and threads), an empty allowlist lets every member in and pairing does not count, as on
the inbound path. A platform's own allowlist from its environment (`TELEGRAM_ALLOWED_USERS`,
`DISCORD_ALLOWED_USERS`) is the adapter's and is read from it where it keeps one.
"""

from __future__ import annotations

from collections.abc import Collection

from hermes_engine.ports.host import Host
from hermes_engine.ports.inbound import ChatKind, InboundMessage, ReplyTarget
from hermes_engine.ports.jobs import JobRecord

# Where the adapters pass `membership_boundary=True` to `admit`: on Slack every chat of the workspace, on
# Discord every chat that is not a direct message.
BOUNDARY_EVERYWHERE = frozenset({"slack"})
BOUNDARY_OUTSIDE_DMS = frozenset({"discord"})


def membership_boundary(job: JobRecord) -> bool:
    platform = ReplyTarget.from_dict(job.target).platform
    direct = ":dm:" in job.session_key
    return platform in BOUNDARY_EVERYWHERE or (platform in BOUNDARY_OUTSIDE_DMS and not direct)


def platform_allowlist(host: Host, platform: str) -> Collection[str]:
    """The ids the platform's adapter serves besides the profile's (its environment's allowlist), if any."""
    outlets = getattr(host, "outlets", {})
    outlet = outlets.get(platform) if isinstance(outlets, dict) else None
    for holder in (outlet, getattr(outlet, "options", None)):
        listed = getattr(holder, "allowed_users", None)
        if isinstance(listed, (set, frozenset, list, tuple)):
            return {str(u) for u in listed}
    return ()


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
    """Why the owner may not write in the job's chat any more (None: they may)."""
    target = ReplyTarget.from_dict(job.target)
    ids = await owner_ids(host, job)
    if not ids:
        return f"its owner has no {target.platform} account any more"
    rules = host.profile.access
    listed = {str(u) for u in rules.allowed_users} | {str(u) for u in rules.admins}
    listed |= set(platform_allowlist(host, target.platform))
    for user_id in ids:
        if membership_boundary(job):
            if not rules.allowed_users or user_id in listed:
                return None
        elif user_id in listed or await host.is_allowed(target.platform, user_id):
            return None
    return "its owner may no longer write in its chat"
