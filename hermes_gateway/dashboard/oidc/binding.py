"""A sign-on in progress, bound to the browser that started it.

The browser gets a random secret in a short-lived cookie; the PKCE verifier and the nonce are derived from
it, and the store keeps only the hash of the `state` with the hash of that secret. So the callback can land
on any replica (the store says the state is live, the cookie brings the rest), a copy of the database
redeems nothing, and a callback URL handed to another browser (a login CSRF: signing a victim into the
attacker's account) finds no cookie and opens nothing.
"""

from __future__ import annotations

import hashlib
import hmac

from hermes_gateway.dashboard.guard import PREFIX

COOKIE = "hermes_oidc"
COOKIE_PATH = f"{PREFIX}/oidc/"
STATE_SECONDS = 600.0  # from leaving for the provider to coming back
# Sign-ons under way at once, across replicas. Anyone may start one; a team's admins start a few an hour, so
# this bounds what a stranger's loop can make the store keep, and only they wait while it is reached.
STATES_AT_MOST = 1000


def _derived(secret: str, purpose: bytes) -> str:
    return hmac.new(secret.encode(), purpose, hashlib.sha256).hexdigest()


def code_verifier(secret: str) -> str:
    """64 hex characters: within PKCE's 43 to 128 unreserved ones."""
    return _derived(secret, b"hermes-oidc-pkce")


def nonce(secret: str) -> str:
    return _derived(secret, b"hermes-oidc-nonce")
