"""Who, of those a provider vouches for, is an admin of the bot, and the name their session carries.

An e-mail address counts only when the provider says it verified it: an unverified address is whatever the
person typed. With Sign in with Slack (issuer `https://slack.com`), the Slack user id the id_token names is
an admin when a bot profile serving Slack lists it in `access.admins`, as it is for the bot's commands.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from hermes_gateway.dashboard.config import Oidc

SLACK_ISSUER = "https://slack.com"
SLACK_USER_ID = "https://slack.com/user_id"


def admin_of(claims: Mapping[str, Any], oidc: Oidc, slack_admins: Collection[str] = ()) -> str | None:
    """`oidc:<email>` or `slack:<user id>`; None for anyone else."""
    if oidc.issuer == SLACK_ISSUER:
        user = claims.get(SLACK_USER_ID)
        if isinstance(user, str) and user and user in slack_admins:
            return f"slack:{user}"
    email = claims.get("email")
    if isinstance(email, str) and verified(claims.get("email_verified")) and email.strip().lower() in oidc.admins:
        return f"oidc:{email.strip().lower()}"
    return None


def verified(flag: object) -> bool:
    """True, or the string "true" some providers send."""
    return flag is True or flag == "true"


def who(claims: Mapping[str, Any]) -> str:
    """The identity as the refusal page names it: the e-mail address, else the subject."""
    email, subject = claims.get("email"), claims.get("sub")
    return email if isinstance(email, str) and email else str(subject or "this account")
