"""The secrets of the dashboard and what is kept of them.

A link token and a session token are 32 random bytes; the database keeps only their SHA-256, so a copy of
it opens nothing. A session's CSRF token is derived from its cookie (a keyed hash no page other than the
dashboard's can compute, since the cookie is HttpOnly), so it needs no row of its own.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

COOKIE = "hermes_dashboard"


def new_token() -> str:
    """Hex, not URL-safe Base64: a link goes out as Markdown, where `_` would be read as emphasis."""
    return secrets.token_hex(32)


def hashed(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def csrf_token(session_token: str) -> str:
    return hmac.new(session_token.encode(), b"hermes-dashboard-csrf", hashlib.sha256).hexdigest()


def csrf_matches(session_token: str, offered: str | None) -> bool:
    return bool(offered) and hmac.compare_digest(csrf_token(session_token), offered or "")
