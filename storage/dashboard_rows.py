"""The dashboard's rows (migrations 0022, 0023, 0025): sign-in links, sessions (hashes only), the audit of changes,
the faults counted per minute and the single sign-ons under way (hashes only).

On `storage.models.Base` like every other row, in a module of its own so the models file stays small;
`storage.store` imports it (through its repository), so the store's metadata always holds these tables.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from storage.models import _NEVER_REUSED_IDS, Base, Id, UTCDateTime


class DashboardLinkRow(Base):
    """A one-time sign-in link to the dashboard (migration 0022), by the SHA-256 of its token; deleted when used."""

    __tablename__ = "dashboard_links"
    __table_args__ = (sa.Index(None, "expires_at"),)

    token_hash: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    admin: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


class DashboardSessionRow(Base):
    """A signed-in admin's dashboard session (migration 0022), by the SHA-256 of its cookie."""

    __tablename__ = "dashboard_sessions"
    __table_args__ = (sa.Index(None, "expires_at"),)

    session_hash: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    admin: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


class DashboardAuditRow(Base):
    """One change an admin made through the dashboard (migration 0022): who, what, on what, when."""

    __tablename__ = "dashboard_audit"
    __table_args__ = (sa.Index(None, "at"), _NEVER_REUSED_IDS)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    admin: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    action: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    subject: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    detail: Mapped[str] = mapped_column(sa.Text(), nullable=False)


class FaultMinuteRow(Base):
    """How many faults of one kind (`error:provider`, `429:telegram`) the replicas counted in one minute
    (migration 0023); each replica adds its own counts to the row, so it holds them all."""

    __tablename__ = "fault_minutes"

    minute: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    kind: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    count: Mapped[int] = mapped_column(sa.BigInteger(), nullable=False)


class DashboardOidcStateRow(Base):
    """A single sign-on under way (migration 0025): the SHA-256 of its `state`, and the SHA-256 of the secret
    the browser that started it holds in a cookie (its PKCE verifier and nonce are derived from that secret,
    so none of them is kept); deleted when the provider sends the browser back."""

    __tablename__ = "dashboard_oidc_states"
    __table_args__ = (sa.Index(None, "expires_at"),)

    state_hash: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    browser_hash: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
