"""What every mapped table shares: the declarative base with the constraint naming convention, the portable
id type, and `table_of`. Its own module so the models may be split by role without importing each other."""

from __future__ import annotations

from typing import cast

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


def table_of(row: type[Base]) -> sa.Table:
    """The table behind a mapped class, typed as one (SQLAlchemy types `__table__` as any FROM clause)."""
    return cast(sa.Table, row.__table__)
