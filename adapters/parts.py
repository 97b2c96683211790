"""What the adapter machinery passes around: a platform's capabilities, the parts of a final answer, the
messages sent, and the ledger of delivered answers. Shared by the adapter base and the streaming reply,
so neither needs the other's module."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from adapters.render import Rendered
from hermes_engine.ports.reply import Delivery

NO_EXTRAS: Mapping[str, Any] = MappingProxyType({})


# --- capabilities ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Capabilities:
    """What a platform can do and the rules it imposes. Set once, as a class attribute."""

    max_message_length: int
    length_unit: Literal["utf16", "chars"] = "chars"
    can_edit: bool = True
    can_delete: bool = True
    native_streaming: bool = False  # e.g. Slack chat.startStream/appendStream/stopStream (threads only)
    threads: bool = False
    typing_indicator: bool = True
    edit_interval_seconds: float = 1.0  # minimum seconds between two calls to one chat
    format: str = "markdown"  # name of the final format: "telegram-entities", "slack-mrkdwn", ...
    global_rate_per_second: float | None = None  # overall cap for the adapter, None = none
    render_headroom: float = 0.9  # share of the limit the Markdown source is split to before rendering

    def __post_init__(self) -> None:
        if self.max_message_length < 32:
            raise ValueError("max_message_length must be at least 32")
        if self.length_unit not in ("utf16", "chars"):
            raise ValueError("length_unit must be 'utf16' or 'chars'")
        if not 0.1 <= self.render_headroom <= 1.0:
            raise ValueError("render_headroom must be between 0.1 and 1.0")


# Suggested settings per platform (from its published limits); adapters use them or `dataclasses.replace` them.
TELEGRAM = Capabilities(4096, "utf16", can_edit=True, native_streaming=False, threads=True,
                        typing_indicator=True, edit_interval_seconds=1.0, format="telegram-entities",
                        global_rate_per_second=30)
SLACK = Capabilities(40_000, "chars", can_edit=True, native_streaming=True, threads=True,
                     typing_indicator=False, edit_interval_seconds=1.2, format="slack-mrkdwn")
DISCORD = Capabilities(2000, "chars", can_edit=True, native_streaming=False, threads=True,
                       typing_indicator=True, edit_interval_seconds=1.0, format="discord-markdown",
                       global_rate_per_second=50)


# --- idempotency ledger ------------------------------------------------------------------------------

class InMemoryDeliveryLedger:
    """A `DeliveryLedger` for one process (tests, the console): the `max_keys` most recently recorded keys.
    The gateway gives its adapters the durable one from the store."""

    def __init__(self, max_keys: int = 10_000) -> None:
        self.max_keys = max_keys
        self._keys: OrderedDict[str, Delivery] = OrderedDict()

    async def get(self, key: str) -> Delivery | None:
        return self._keys.get(key)

    async def record(self, key: str, message_ids: Sequence[str], *, final: bool) -> None:
        known = self._keys.get(key)
        if known is not None and known.final:
            return
        self._keys[key] = Delivery(tuple(message_ids), final)
        self._keys.move_to_end(key)
        while len(self._keys) > self.max_keys:
            self._keys.popitem(last=False)

    def __len__(self) -> int:
        return len(self._keys)


# --- delivered parts ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class OutPart:
    """One message of a final: its Markdown `source` and its `rendered` form (None → send `source`
    as plain text, e.g. when rendering failed)."""

    source: str
    rendered: Rendered | None


@dataclass
class SentMessage:
    """A message on the platform and what it currently shows."""

    id: str
    text: str
    rendered: bool = False
    extras: Mapping[str, Any] = field(default_factory=lambda: NO_EXTRAS)

    def shows(self, text: str, rendered: bool, extras: Mapping[str, Any]) -> bool:
        return self.text == text and self.rendered == rendered and dict(self.extras) == dict(extras)
