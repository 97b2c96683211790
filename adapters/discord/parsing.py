"""Gateway events read one at a time, so that one the adapter cannot read is rejected alone.

discord.py parses each event inside its receive loop (``ConnectionState.parse_<event>``), and
`Client.connect` lets whatever a parser raises end the connection: a guild MESSAGE_CREATE without
``author`` (AttributeError), without ``channel_id`` (KeyError), with an id that is not a number
(ValueError) or ``mentions`` that are not a list (TypeError) each drop it, and Discord does not replay to
the new session what was sent in between. Some malformed messages it does not refuse: without ``author``
or ``member`` it dispatches a message that has no author, and content that is not text goes through as
it is, to fail later in the adapter.

`TolerantParsing`, put before discord.py's connection state in a subclass, reads every data event on its
own: a MESSAGE_CREATE that lacks what the adapter reads, or any event whose parser raises, is handed to
`on_rejected` and skipped, and the connection goes on with the next event. READY and RESUMED stay as
discord.py has them: they set up the session itself, so one that cannot be read still ends the connection.
The client makes this state through `Client._get_state`, the factory discord.py's own
`AutoShardedClient` overrides for its sharded state.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from discord.state import AutoShardedConnectionState, ConnectionState
from pydantic import BaseModel, PlainValidator, StrictStr, ValidationError

RAW_KEPT = 4_000  # characters of a rejected event kept for the log and the inbox
SESSION_EVENTS = frozenset({"READY", "RESUMED"})


@dataclass(frozen=True)
class RejectedEvent:
    """A gateway event that could not be read: its type, why, what it held, and who sent it if it shows."""

    event: str
    reason: str
    raw: str
    digest: str  # of the whole event, so Discord sending it again (a RESUME replays) records it once
    sender: str | None = None

    def event_id(self, account: str) -> str:
        return f"{account}:rejected:{self.digest}"


def _snowflake(value: Any) -> int:
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError("not a Discord id")


Snowflake = Annotated[int, PlainValidator(_snowflake)]


class _Person(BaseModel):
    id: Snowflake


class MessageCreate(BaseModel):
    """What the adapter reads of a MESSAGE_CREATE; anything else in it is discord.py's to read."""

    id: Snowflake
    channel_id: Snowflake
    author: _Person
    content: StrictStr = ""
    guild_id: Snowflake | None = None


def rejected(event: str, data: Any, reason: str) -> RejectedEvent:
    text = json.dumps(data, ensure_ascii=False, default=str)
    digest = hashlib.sha256(f"{event}:{text}".encode(errors="surrogatepass")).hexdigest()[:16]
    raw = text if len(text) <= RAW_KEPT else text[:RAW_KEPT] + "…"
    return RejectedEvent(event, reason, raw, digest, _sender(data))


def _sender(data: Any) -> str | None:
    """The id of the person who sent the event, where it still shows one (a message's author, an
    interaction's user or member): what lets `/forget` find the rejected event with their other messages."""
    if not isinstance(data, dict):
        return None
    member = data.get("member")
    for person in (data.get("author"), data.get("user"), member.get("user") if isinstance(member, dict) else None):
        if isinstance(person, dict):
            try:
                return str(_snowflake(person.get("id")))
            except ValueError:
                continue
    return None


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return f"{'.'.join(str(part) for part in first['loc'])}: {first['msg']}"
    return f"{type(exc).__name__}: {exc}"


class TolerantParsing:
    """Mixed in before discord.py's connection state: each data event's parser runs guarded (see the module)."""

    on_rejected: Callable[[RejectedEvent], None]

    def __init__(self, *args: Any, on_rejected: Callable[[RejectedEvent], None], **kwargs: Any) -> None:
        self.on_rejected = on_rejected
        super().__init__(*args, **kwargs)

    def _read_alone(self, event: str, parse: Callable[[Any], None], data: Any) -> None:
        try:
            if event == "MESSAGE_CREATE":
                MessageCreate.model_validate(data)
            parse(data)
        except Exception as exc:  # noqa: BLE001 - whatever the library trips on, this event alone is refused
            self.on_rejected(rejected(event, data, _reason(exc)))


def _guarded(name: str) -> Callable[[TolerantParsing, Any], None]:
    event = name.removeprefix("parse_").upper()

    def parse(self: TolerantParsing, data: Any) -> None:
        self._read_alone(event, getattr(super(TolerantParsing, self), name), data)

    parse.__name__ = name
    return parse


for _name in [name for name in vars(ConnectionState) if name.startswith("parse_")]:
    if _name.removeprefix("parse_").upper() not in SESSION_EVENTS:
        setattr(TolerantParsing, _name, _guarded(_name))


class TolerantState(TolerantParsing, ConnectionState):
    """discord.py's connection state, reading each data event on its own."""


class TolerantShardedState(TolerantParsing, AutoShardedConnectionState):
    """The same for the sharded client."""


__all__ = ["MessageCreate", "RejectedEvent", "TolerantShardedState", "TolerantState", "rejected"]
