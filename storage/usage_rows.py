"""The usage ledger's rows: turns, tokens and cost per bot, person and day, and each model's share of it.

Beside `storage.models`, which imports them, so every table is known wherever the models are.
"""

from __future__ import annotations

from datetime import date

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from storage.schema_base import Base, Id


class UsageRow(Base):
    """Turns and tokens one person used with one bot on one day (UTC): what usage limits count."""

    __tablename__ = "usage_days"
    __table_args__ = (sa.Index(None, "bot", "day"),)

    bot: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    person_id: Mapped[int] = mapped_column(Id, sa.ForeignKey("people.id", ondelete="CASCADE"), primary_key=True)
    day: Mapped[date] = mapped_column(sa.Date(), primary_key=True)
    turns: Mapped[int] = mapped_column(sa.Integer(), nullable=False, default=0)
    tokens: Mapped[int] = mapped_column(sa.BigInteger(), nullable=False, default=0)
    cost_micros: Mapped[int] = mapped_column(sa.BigInteger(), nullable=False, default=0, server_default="0")


class UsageModelRow(Base):
    """One model's tokens and cost for one person, bot and day (UTC): what `/usage` breaks down."""

    __tablename__ = "usage_model_days"
    __table_args__ = (sa.Index(None, "bot", "day"),)

    bot: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    person_id: Mapped[int] = mapped_column(Id, sa.ForeignKey("people.id", ondelete="CASCADE"), primary_key=True)
    day: Mapped[date] = mapped_column(sa.Date(), primary_key=True)
    model: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    input_tokens: Mapped[int] = mapped_column(sa.BigInteger(), nullable=False)
    output_tokens: Mapped[int] = mapped_column(sa.BigInteger(), nullable=False)
    cache_read_tokens: Mapped[int] = mapped_column(sa.BigInteger(), nullable=False)
    cache_write_tokens: Mapped[int] = mapped_column(sa.BigInteger(), nullable=False)
    cost_micros: Mapped[int] = mapped_column(sa.BigInteger(), nullable=False)
