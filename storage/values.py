"""What the store hands the database: text and JSON every backend can hold.

Text is stored as given except for two things PostgreSQL cannot hold, replaced on every backend so a
conversation reads back the same wherever it was stored: NUL characters and lone surrogates become U+FFFD.
JSON values that are not JSON types (a `datetime` in a raw payload) are stored as their `str()`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, TypeVar

from hermes_engine.ports.inbound import encodable_text

__all__ = ["clean", "clean_text", "json_dumps", "utc", "utcnow"]

_J = TypeVar("_J")


def json_dumps(value: Any) -> str:
    """The engines' JSON serializer: non-JSON values become their `str()`."""
    return json.dumps(value, ensure_ascii=False, default=str)


def clean_text(text: str) -> str:
    """Text every backend can store: NUL (PostgreSQL refuses it) becomes U+FFFD, then `encodable_text`."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return encodable_text(text)


def clean(value: _J) -> _J:
    """`clean_text` over every string (keys too) of a JSON-like value."""
    if isinstance(value, str):
        return clean_text(value)  # type: ignore[return-value]
    if isinstance(value, dict):
        return {(clean_text(k) if isinstance(k, str) else k): clean(v)  # type: ignore[return-value]
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]  # type: ignore[return-value]
    return value


def utcnow() -> datetime:
    return datetime.now(UTC)


def utc(value: Any) -> datetime:
    """A timezone-aware UTC datetime from what a driver returns (raw SQL on SQLite hands back text)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
