"""How the engine talks back: a `ReplyStream` per answer, opened on an `Outlet` (an adapter).

The engine pushes deltas and exactly one final; the adapter side owns pacing, editing in place, splitting
and rendering. The engine never sees a platform SDK.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from hermes_engine.ports.inbound import ChatKind, ReplyTarget


class ReplyStream(ABC):
    """One answer on its way to a person.

    `push` may be called any number of times with text deltas (Markdown); `rewind` takes back everything
    pushed so far (the model's stream broke and the answer starts again); `finish` is called once with
    the complete final text (Markdown) and returns only after the final is delivered; `abort` ends a
    stream without a final (a turn interrupted) and may leave a short note.
    """

    @abstractmethod
    async def push(self, delta: str) -> None: ...

    async def rewind(self) -> None:
        """Forget what was pushed: later pushes start the answer again. Messages already shown are to be
        edited into the new text (surplus ones removed at `finish` at the latest), never left standing
        above or below it. The default suits a reply that shows nothing before its final."""
        return None

    @abstractmethod
    async def finish(self, text: str) -> None: ...

    async def abort(self, note: str | None = None) -> None:
        if note:
            await self.finish(note)


@dataclass(frozen=True)
class Delivery:
    """What an outlet has shown for one idempotency key: its messages, in order, and whether the final
    text has landed in them (False: a send returned, the final edit may not have)."""

    message_ids: tuple[str, ...]
    final: bool


class DeliveryLedger(Protocol):
    """The record of what went out, kept by an outlet so that an answer is shown once across restarts.

    An outlet records a message id the moment its send returns, and marks the key final once the last
    edit of the final text returns. After a crash the same key finds those messages and edits them into
    the answer instead of sending it again. The durable ledger is a storage role (`DeliveryLog`).
    """

    async def get(self, key: str) -> Delivery | None: ...

    async def record(self, key: str, message_ids: Sequence[str], *, final: bool) -> None: ...


@runtime_checkable
class Outlet(Protocol):
    """What the gateway needs of an adapter to answer."""

    @property
    def platform(self) -> str: ...

    def open_stream(self, target: ReplyTarget, *, idempotency_key: str) -> ReplyStream: ...

    async def send(self, target: ReplyTarget, text: str, *, idempotency_key: str | None = None) -> None:
        """Send a complete (non-streamed) message, e.g. a command answer or goal progress."""
        ...

    async def typing(self, target: ReplyTarget) -> None: ...


@dataclass(frozen=True)
class ChatAccess:
    """What an adapter hands the access gate about a chat besides the profile's rules (`EnginePort.admit`):
    its platform's own allowlist from the environment, and whether the platform is itself the membership
    boundary there (every Slack chat of the workspace, a Discord server's channels). Asked again when
    nobody wrote, as before a scheduled run is delivered."""

    also_allowed: frozenset[str] = frozenset()
    membership_boundary: bool = False


@runtime_checkable
class ChatAccessFacts(Protocol):
    """An outlet that can say `ChatAccess` for one of its chats; one that cannot gives the profile's rules alone."""

    def chat_access(self, target: ReplyTarget, *, direct: bool) -> ChatAccess: ...


@dataclass(frozen=True)
class ChatPresence:
    """What an adapter found, through its platform, of a chat it was asked to post in unasked (a scheduled job
    delivered elsewhere than where it was made): the chat's own id (a name such as `@channel` or `#general`
    resolved), its kind (a thread: its parent's id and its own `thread_id`, as inbound messages carry them), and
    whether the bot is in it and may post there; `why` says in a few words why not."""

    present: bool
    chat_id: str = ""
    chat_kind: ChatKind = ChatKind.GROUP
    why: str = ""
    thread_id: str | None = None


@runtime_checkable
class ChatPresenceFacts(Protocol):
    """An outlet that can say whether the bot is present in a chat named by id or name (`target.chat_id` as a
    person wrote it); one that cannot has the bot present nowhere but where people write to it. `writer`: the
    platform user the bot would post for, who must be able to post there too where the platform says so (a
    Telegram member, a Discord member with `send_messages`; a Slack workspace is its own boundary)."""

    async def chat_presence(self, target: ReplyTarget, *, writer: str | None = None) -> ChatPresence: ...


@runtime_checkable
class ReplyThreads(Protocol):
    """An outlet whose platform puts a person's reply to a message the bot posted in a conversation apart: on
    Slack a reply to a channel's top-level message goes into that message's thread, a session of its own. Where
    replies to what it sent to `posted` under `idempotency_key` go (read from its delivery ledger, which outlives
    the process); empty where they stay in the same conversation, as on an outlet without this capability."""

    async def replies_to(self, posted: ReplyTarget, idempotency_key: str) -> tuple[ReplyTarget, ...]: ...


@dataclass(frozen=True)
class OutgoingFile:
    """A file the agent sends to a person: its bytes, already read from the workspace and checked against
    the outlet's limits, the name it shows under, the media type read from its bytes (not its name), and a
    caption (plain text, may be empty). `voice`: an OGG/Opus recording of an answer, shown as a voice bubble
    where the platform has one (Telegram's sendVoice); elsewhere it goes as the audio file it is."""

    name: str
    data: bytes
    media_type: str
    caption: str = ""
    voice: bool = False

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def is_image(self) -> bool:
        return self.media_type.startswith("image/")


class FileOutlet(Protocol):
    """What the engine needs of an adapter to send a file: how large one may be, and the send itself.

    `send_file` goes through the same pacer and delivery ledger as replies: at most once per
    `idempotency_key`, a 429 waited out in the chat's lane. It returns False when the key was already
    delivered (nothing was sent again) or when an earlier attempt under the key was cut short mid-upload
    (not repeated, so the person never gets it twice; the caller tells the model it may not have arrived).
    """

    @property
    def platform(self) -> str: ...

    def max_file_bytes(self, media_type: str) -> int:
        """The largest file of this type the platform takes from a bot (its documented limit)."""
        ...

    async def send_file(self, target: ReplyTarget, file: OutgoingFile, *, idempotency_key: str) -> bool: ...


class BufferedStream(ReplyStream):
    """Collects deltas and the final in memory. Used by the console in script mode, by background loops
    that must not speak, and by tests."""

    def __init__(self) -> None:
        self.deltas: list[str] = []
        self.final: str | None = None
        self.aborted: str | None = None

    async def push(self, delta: str) -> None:
        self.deltas.append(delta)

    async def rewind(self) -> None:
        self.deltas.clear()

    async def finish(self, text: str) -> None:
        if self.final is not None:
            raise RuntimeError("finish called twice on one reply")
        self.final = text

    async def abort(self, note: str | None = None) -> None:
        self.aborted = note or ""
