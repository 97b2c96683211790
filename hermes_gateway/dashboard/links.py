"""A one-time sign-in link: the token's hash kept in the store until it is used or expires."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hermes_engine.ports.dashboard import DashboardStore
from hermes_gateway.dashboard.config import Dashboard
from hermes_gateway.dashboard.tokens import hashed, new_token


async def sign_in_link(store: DashboardStore, dashboard: Dashboard, admin: str) -> str:
    """A link that signs `admin` in once, within `dashboard.link_seconds`."""
    token = new_token()
    expires = datetime.now(UTC) + timedelta(seconds=dashboard.link_seconds)
    await store.put_dashboard_link(hashed(token), admin, expires)
    return dashboard.login_url(token)


def minutes(dashboard: Dashboard) -> str:
    return f"{dashboard.link_seconds / 60:g} minutes"
