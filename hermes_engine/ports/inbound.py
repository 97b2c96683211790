"""What crosses the boundary between adapters and the engine.

An adapter turns a platform update into an `InboundMessage`; the engine answers through a
`ReplyTarget`, which is plain data so that slower loops (goals, reviews) can post later, after a restart.

Text is made valid Unicode here, where it enters, whichever adapter built the message: a lone surrogate
(which a platform's JSON escapes can carry) cannot be encoded as UTF-8, so it would fail every later
model request of its session, and NUL is refused by PostgreSQL and by some model APIs.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any


class ChatKind(StrEnum):
    DM = "dm"
    GROUP = "group"
    CHANNEL = "channel"
    THREAD = "thread"


def encodable_text(text: str) -> str:
    """`text` that UTF-8 can encode: a surrogate pair held as two characters joined into one, a lone
    surrogate replaced with U+FFFD. Text that needs no change is returned as it is (the same object);
    most text is ASCII, which `isascii` tells without encoding it."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def valid_text(text: str) -> str:
    """`text` as valid Unicode where it enters: NUL removed, then `encodable_text`."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    return encodable_text(text)


@dataclass(frozen=True)
class Attachment:
    """A file the person sent: pending (`source` set, no `path`) from the moment the adapter hands the message
    over, so the durable inbox records it before any byte is fetched and a crash mid-download loses nothing;
    fetched (`path` in the session's attachment folder) or refused (`refused_reason`) once the turn's prepare
    phase has asked the platform's `AttachmentFetcher` for it (`core/fetching.py`).

    `source` is where the platform serves it, without credentials (a URL, or the platform's file id): the
    inbox keeps it, and the fetcher adds the bot token only at download time. A pending attachment's `kind`
    may be empty (the bytes decide) and its `size` 0 (not declared)."""

    kind: str  # "photo" | "voice" | "document" | "video" | "audio"; "" while pending: the bytes decide
    file_name: str
    mime_type: str
    size: int
    path: str | None = None  # local path once downloaded; None while pending, or when refused (too large)
    refused_reason: str | None = None
    source: str | None = None  # where the platform serves it (no credentials); None: nothing to fetch

    @property
    def pending(self) -> bool:
        """Offered but not fetched yet: the turn fetches it before the model sees the message."""
        return self.source is not None and self.path is None and self.refused_reason is None

    def __post_init__(self) -> None:
        object.__setattr__(self, "file_name", valid_text(self.file_name))
        object.__setattr__(self, "mime_type", valid_text(self.mime_type))


_COMMAND = re.compile(r"^/([A-Za-z0-9_][A-Za-z0-9_-]{0,63})(?:@\S+)?(?:\s+(.*))?$", re.S)


def parse_command(text: str) -> tuple[str | None, str]:
    """Split "/goal do x" into ("goal", "do x"); "/new@mybot" into ("new", ""). Non-commands: (None, "")."""
    match = _COMMAND.match(text.strip())
    if not match:
        return None, ""
    return match.group(1).lower(), (match.group(2) or "").strip()


@dataclass(frozen=True)
class ReplyTarget:
    """Where an answer goes. Serializable, so a goal can keep posting to its thread after a restart."""

    platform: str
    account: str
    chat_id: str
    thread_id: str | None = None
    reply_to_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"platform": self.platform, "account": self.account, "chat_id": self.chat_id,
                "thread_id": self.thread_id, "reply_to_id": self.reply_to_id}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplyTarget:
        return cls(str(data.get("platform") or ""), str(data.get("account") or ""), str(data.get("chat_id") or ""),
                   data.get("thread_id"), data.get("reply_to_id"))


@dataclass(frozen=True)
class InboundMessage:
    platform: str
    account: str  # bot / workspace / guild the message arrived through
    chat_kind: ChatKind
    chat_id: str
    user_id: str
    text: str
    message_id: str
    user_name: str = ""
    thread_id: str | None = None
    mentioned: bool = False
    attachments: tuple[Attachment, ...] = ()
    reply_to_id: str | None = None
    received_at: datetime = field(default_factory=lambda: datetime.now(UTC))  # the platform's, when it has one
    raw: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    command: str | None = None
    args: str = ""
    synthetic: bool = False  # made by the engine (a goal continuation), not sent by a person
    platform_admin: bool = False  # the platform names the sender an admin of the bot (e.g. a Discord role)
    # Written where the operator listed the place (a Discord server in DISCORD_ALLOWED_GUILDS): a platform's
    # roles are made by whoever owns the place, so only in one the operator chose may they name an admin.
    place_listed: bool = False
    # `time.monotonic()` when this gateway took the update in (by default: when the adapter built the message).
    # `received_at` is the platform's clock, rounding and delay; the gateway's own latency is measured from
    # this. Not kept in the inbox: an instant of one process means nothing in another.
    arrived: float = field(default_factory=time.monotonic, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("text", "args", "user_name"):
            object.__setattr__(self, name, valid_text(getattr(self, name)))
        if self.command is None:
            command, args = parse_command(self.text)
            object.__setattr__(self, "command", command)
            object.__setattr__(self, "args", args)

    @property
    def event_id(self) -> str:
        """De-duplication key for this inbound event within its platform account."""
        return f"{self.account}:{self.chat_id}:{self.message_id}"

    def session_key(self, shared_groups: bool = False) -> str:
        """Deterministic session key: DM per chat; group/channel per chat and user unless shared; thread
        per thread."""
        base = f"{self.platform}:{self.account}"
        if self.chat_kind is ChatKind.DM:
            return f"{base}:dm:{self.chat_id}"
        if self.chat_kind is ChatKind.THREAD or self.thread_id:
            return f"{base}:thread:{self.chat_id}:{self.thread_id}"
        if shared_groups:
            return f"{base}:{self.chat_kind.value}:{self.chat_id}"
        return f"{base}:{self.chat_kind.value}:{self.chat_id}:user:{self.user_id}"

    @property
    def is_multi_speaker(self) -> bool:
        return self.chat_kind is not ChatKind.DM

    def reply_target(self) -> ReplyTarget:
        return ReplyTarget(self.platform, self.account, self.chat_id, self.thread_id,
                           None if self.synthetic else self.message_id)


@dataclass(frozen=True)
class LastInbound:
    """The newest message the inbox recorded in one conversation (a chat, or one thread of it): where an
    adapter whose platform does not send again what came while it was away starts reading back."""

    chat_id: str
    thread_id: str | None
    message_id: str
    recorded_at: datetime


def message_to_payload(msg: InboundMessage) -> dict[str, Any]:
    """JSON-safe form for the durable inbox (the raw platform payload is not kept)."""
    return {
        "platform": msg.platform, "account": msg.account, "chat_kind": msg.chat_kind.value,
        "chat_id": msg.chat_id, "user_id": msg.user_id, "text": msg.text, "message_id": msg.message_id,
        "user_name": msg.user_name, "thread_id": msg.thread_id, "mentioned": msg.mentioned,
        "attachments": [a.__dict__ for a in msg.attachments], "reply_to_id": msg.reply_to_id,
        "received_at": msg.received_at.isoformat(), "synthetic": msg.synthetic,
        "platform_admin": msg.platform_admin, "place_listed": msg.place_listed,
    }


_ATTACHMENT_FIELDS = frozenset(f.name for f in fields(Attachment))


def message_from_payload(data: dict[str, Any]) -> InboundMessage:
    return InboundMessage(
        platform=data["platform"], account=data["account"], chat_kind=ChatKind(data["chat_kind"]),
        chat_id=data["chat_id"], user_id=data["user_id"], text=data["text"], message_id=data["message_id"],
        user_name=data.get("user_name", ""), thread_id=data.get("thread_id"),
        mentioned=bool(data.get("mentioned")),
        attachments=tuple(Attachment(**{k: v for k, v in a.items() if k in _ATTACHMENT_FIELDS})
                          for a in data.get("attachments") or ()),
        reply_to_id=data.get("reply_to_id"),
        received_at=datetime.fromisoformat(data["received_at"]) if data.get("received_at") else datetime.now(UTC),
        synthetic=bool(data.get("synthetic")), platform_admin=bool(data.get("platform_admin")),
        place_listed=bool(data.get("place_listed")),
    )
