"""Who may talk to a bot, decided once for every platform.

Deny by default: a person is served when listed (the profile's `access.allowed_users` or `access.admins`,
or a platform's own allowlist from its environment) or approved through pairing. A stranger gets no model
call: in a direct message, when the profile allows pairing, they get their own pairing code (rate-limited,
see `policy.pairing`), anywhere else silence. Where the platform itself is a membership boundary (a Slack
workspace), an empty allowlist lets every member in and pairing does not apply.

Adapters report facts (who wrote, where, whether the platform says they administer the bot, whether the
operator listed the place); the decisions (who is served, who administers the bot), the text a stranger
reads and the "you now have access" notice are made here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection

from hermes_engine.config import AccessRules
from hermes_engine.policy.pairing import ApprovedUser, Pairing
from hermes_engine.ports.engine import AccessDecision
from hermes_engine.ports.inbound import InboundMessage
from hermes_engine.ports.reply import ChatAccess

log = logging.getLogger(__name__)

APPROVED_NOTICE = "You now have access. Say hello!"
APPROVAL_CHECK_SECONDS = 5.0

Notify = Callable[[str, str], Awaitable[object]]  # (chat id, text): a text to one chat of the platform


def pairing_text(platform: str, code: str, user_id: str) -> str:
    """The only thing a stranger hears: their own code and id."""
    return (
        "Hi! I only talk with people my admin has approved.\n\n"
        f"To ask for access, send this code to the admin: `{code}`\n"
        f"They approve it on the server with `hermes-gateway pairing approve {code}`.\n\n"
        f"The code is valid for one hour. Your {platform.capitalize()} user id is `{user_id}`."
    )


class AccessGate:
    def __init__(self, rules: AccessRules, pairing: Pairing) -> None:
        self.rules = rules
        self.pairing = pairing

    def is_admin(self, msg: InboundMessage) -> bool:
        """The one decision on adminship, which every admin-only command, tool and limit exemption rests on.
        The operator names admins (`access.admins`, on every platform and in every place). A platform's role
        counts only where the operator listed the place and the profile lets roles count: the owner of any
        other server can make a role of that name and give it to himself."""
        if msg.user_id in {str(u) for u in self.rules.admins}:
            return True
        return self.rules.platform_admins and msg.platform_admin and msg.place_listed

    def allows_bot(self) -> bool:
        return self.rules.allow_bots

    def listed(self, user_id: str, also_allowed: Collection[str] = ()) -> bool:
        listed = set(also_allowed) | {str(u) for u in self.rules.allowed_users} | {str(u) for u in self.rules.admins}
        return user_id in listed

    def granted(self, platform: str, user_id: str, also_allowed: Collection[str] = ()) -> bool:
        """Listed or approved through pairing. A damaged pairing store denies, loudly."""
        return self.listed(user_id, also_allowed) or self._approval(platform, user_id, claim_notice=False)[0]

    def _approval(self, platform: str, user_id: str, *, claim_notice: bool) -> tuple[bool, ApprovedUser | None]:
        """Approved through pairing, read from the store now (an approval made a moment ago by the CLI or
        another replica counts at once), and, when `claim_notice`, the approval whose notice this message is
        the first chance to send (claimed, so no one else sends it). A damaged pairing store denies, loudly."""
        try:
            if not self.pairing.is_approved(platform, user_id):
                return False, None
            return True, self.pairing.claim_notice(platform, user_id) if claim_notice else None
        except Exception:  # noqa: BLE001 - any failure to read approvals must deny, not crash the adapter
            log.exception("could not read the pairing store; denying %s user %s", platform, user_id)
            return False, None

    async def may_write(self, platform: str, user_id: str, chat: ChatAccess) -> bool:
        """Would this person's next message in that chat be answered? `admit`'s decision without its side
        effects (no pairing offered, no notice claimed), for what the bot sends unasked on their behalf."""
        if chat.membership_boundary:
            return not self.rules.allowed_users or self.listed(user_id, chat.also_allowed)
        return self.listed(user_id, chat.also_allowed) or await asyncio.to_thread(self.granted, platform, user_id)

    async def admit(self, platform: str, user_id: str, *, user_name: str = "", chat_id: str | None = None,
                    direct: bool, is_bot: bool = False, also_allowed: Collection[str] = (),
                    membership_boundary: bool = False, tell: Notify | None = None) -> AccessDecision:
        """May this person be answered here? `direct`: a direct message (where pairing is offered). `tell`:
        how to send a text to a chat of this platform; a person approved since they last wrote is sent the
        access notice through it before this returns, so before the answer to their message."""
        if is_bot and not self.allows_bot():
            return AccessDecision(False)
        if membership_boundary:
            allowed = not self.rules.allowed_users or self.listed(user_id, also_allowed)
            if not allowed:
                log.info("%s user %s is not in access.allowed_users; ignored", platform, user_id)
            return AccessDecision(allowed)
        # Listed people are known without touching the pairing store; only strangers cost a read.
        if self.listed(user_id, also_allowed):
            return AccessDecision(True)
        approved, unannounced = await asyncio.to_thread(self._approval, platform, user_id,
                                                        claim_notice=tell is not None)
        if unannounced is not None and unannounced.chat_id and tell is not None:
            await tell(unannounced.chat_id, APPROVED_NOTICE)
        if approved:
            return AccessDecision(True)
        if not direct:
            return AccessDecision(False)
        if not self.rules.pairing:
            log.info("ignoring %s user %s: not allowed and pairing is off", platform, user_id)
            return AccessDecision(False)
        try:
            answer = await asyncio.to_thread(self.pairing.request, platform, user_id, user_name, chat_id=chat_id)
        except Exception:  # noqa: BLE001 - a broken pairing store leaves the stranger unanswered, never served
            log.exception("pairing request for %s user %s failed", platform, user_id)
            return AccessDecision(False)
        if answer.approved:
            return AccessDecision(True)
        if not answer.should_reply:
            log.info("pairing: not answering %s user %s again (rate limit)", platform, user_id)
            return AccessDecision(False)
        return AccessDecision(False, pairing_text(platform, answer.code or "", user_id))

    async def watch_approvals(self, platform: str, notify: Notify, *, every: float = APPROVAL_CHECK_SECONDS) -> None:
        """Tell people approved with `hermes-gateway pairing approve` who have not written since that they
        are in: `notify(chat_id, text)` for each, once. An approval younger than one round is left to the
        person's next message (`admit`), which is told first; one who writes nothing hears it a round or
        two after the approval. Runs until cancelled."""
        while True:
            try:
                for approval in await asyncio.to_thread(self.pairing.claim_unnotified, platform, older_than=every):
                    if approval.chat_id:
                        await notify(approval.chat_id, APPROVED_NOTICE)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - keep watching; the next round retries
                log.exception("checking %s pairing approvals failed", platform)
            await asyncio.sleep(every)
