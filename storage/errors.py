"""Database errors that mean "the store cannot write" become the engine's `StorageError`.

The engine must tell an outage (the disk is full, the database read-only or gone) from a bug, without
knowing SQLAlchemy or a driver: an outage pauses the work, a bug is a bug. So every store call passes
through `as_storage_errors`, which turns what a driver says about the medium into a `StorageError` with
a reason a person can read, and lets everything else (integrity errors, programming errors) through.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy.exc as sa_exc

from hermes_engine.errors import StorageError

__all__ = ["NoDatabase", "as_storage_errors", "storage_error"]

DISK_FULL = "the disk is full"
READ_ONLY = "the database is read-only"
IO_ERROR = "the disk cannot be read or written"
LOCKED = "the database is locked by someone else"
CANNOT_OPEN = "the database file cannot be opened"
LOST = "the connection to the database was lost"
NO_RESOURCES = "the database server is out of resources"

# SQLite primary result codes (https://sqlite.org/rescode.html); extended codes keep them in the low byte.
_SQLITE_CODES = {13: DISK_FULL, 8: READ_ONLY, 10: IO_ERROR, 5: LOCKED, 6: LOCKED, 14: CANNOT_OPEN}
# The same, for a Python whose sqlite3 exceptions carry no code.
_SQLITE_TEXTS = (("database or disk is full", DISK_FULL), ("readonly database", READ_ONLY),
                 ("disk i/o error", IO_ERROR), ("database is locked", LOCKED), ("database table is locked", LOCKED),
                 ("unable to open database file", CANNOT_OPEN))
# PostgreSQL SQLSTATEs (https://www.postgresql.org/docs/current/errcodes-appendix.html): exact codes first,
# then whole classes.
_SQLSTATES = {"53100": DISK_FULL, "25006": READ_ONLY, "58030": IO_ERROR, "55P03": LOCKED,
              "57P01": LOST, "57P02": LOST, "57P03": LOST}
_SQLSTATE_CLASSES = {"08": LOST, "53": NO_RESOURCES}


class NoDatabase(Exception):
    """A store opened with `create=False` found no database of the gateway there; the message says what is
    missing (the SQLite file, or the schema)."""


_ERRNOS = {errno.ENOSPC: DISK_FULL, errno.EDQUOT: DISK_FULL, errno.EROFS: READ_ONLY, errno.EIO: IO_ERROR}


def storage_error(exc: BaseException) -> StorageError | None:
    """The `StorageError` that `exc` means, or None when it is not about the store's ability to write."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, sa_exc.TimeoutError):  # no pooled connection came free within the pool's timeout
        return StorageError(LOCKED, detail=_first_line(exc))
    if isinstance(exc, sa_exc.DBAPIError):
        reason = _reason(exc.orig) or (LOST if exc.connection_invalidated else None)
        return StorageError(reason, detail=_first_line(exc.orig)) if reason else None
    reason = _reason(exc)
    return StorageError(reason, detail=_first_line(exc)) if reason else None


@contextmanager
def as_storage_errors() -> Iterator[None]:
    """Re-raise a database error that means "cannot write" as the engine's `StorageError`."""
    try:
        yield
    except Exception as exc:
        error = storage_error(exc)
        if error is None or error is exc:
            raise
        raise error from exc


def _reason(error: BaseException | None) -> str | None:
    if error is None:
        return None
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _SQLITE_CODES:
        return _SQLITE_CODES[code & 0xFF]
    sqlstate = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
    if isinstance(sqlstate, str) and sqlstate:
        return _SQLSTATES.get(sqlstate) or _SQLSTATE_CLASSES.get(sqlstate[:2])
    if isinstance(error, OSError):
        return _ERRNOS.get(error.errno or 0) or (LOST if isinstance(error, ConnectionError) else None)
    if isinstance(error, sqlite3.Error):
        text = str(error).lower()
        return next((reason for fragment, reason in _SQLITE_TEXTS if fragment in text), None)
    return None


def _first_line(error: BaseException | None) -> str:
    text = str(error or "").strip()
    return text.splitlines()[0][:200] if text else type(error).__name__
