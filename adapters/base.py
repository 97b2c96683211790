"""The adapter base every platform adapter subclasses: what is the adapter's own — its lifecycle, the
elections among replicas, where inbound rejects and deliveries are kept — and the engine's `Outlet`,
handed to the `Outbound` (`self.delivery`) it composes around its platform's transport.

A concrete adapter supplies:

- class attributes `platform` and `capabilities` (an adapter configured per bot may set its own);
- `start()` / `stop()` (call ``await super().stop()`` to drain outbound calls);
- its `Transport` (`adapters.transport`: send, edit, delete, typing, a native stream where it has one),
  given to ``super().__init__``, with its `Lanes` when it paces other than per chat;
- `render(markdown)` for the final format (see `adapters.render`), and optionally `is_markup_error(exc)`
  and `is_transient_error(exc)`.

What the engine uses (the `hermes_engine.ports.reply.Outlet` protocol): `open_stream`, `send`, `typing`;
and, given a `FileTransport` (``files=``), its `FileOutlet`: `max_file_bytes`, `send_file`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, ClassVar, Protocol

from adapters.delivery import Lanes, Outbound
from adapters.election import Election
from adapters.outbound import DROPPED, OutboundScheduler, default_is_transient
from adapters.part_rendering import PartRenderer
from adapters.parts import Capabilities, InMemoryDeliveryLedger, OutPart
from adapters.render import Rendered
from adapters.streaming import StreamingReply
from adapters.transport import FileTransport, NoTransport, Transport
from hermes_engine.ports.approval import ApprovalAsker
from hermes_engine.ports.fetching import AttachmentFetcher
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.metrics import NO_METRICS, Metrics
from hermes_engine.ports.reply import DeliveryLedger, OutgoingFile
from hermes_engine.ports.storage import LeaseStore

__all__ = ["DROPPED", "Capabilities", "PlatformAdapter", "RejectedLog"]


class RejectedLog(Protocol):
    """Where an adapter keeps inbound events too malformed to read, for an operator to see (the gateway's
    durable inbox: `hermes-gateway inbox rejected`)."""

    async def record_rejected(self, platform: str, event_id: str, payload: dict[str, Any]) -> None: ...


class PlatformAdapter(ABC):
    """Base of the Telegram, Slack and Discord adapters. Implements the engine's `Outlet`."""

    platform: ClassVar[str] = ""
    capabilities: Capabilities  # a class attribute; an adapter configured per bot may set its own
    stream_cursor: ClassVar[str] = ""  # appended to interim frames, e.g. " ▌"
    connected: bool = False  # set by the adapter while the platform accepts it; `/ready` reports it

    def __init__(self, transport: Transport | None = None, *, ledger: DeliveryLedger | None = None,
                 scheduler: OutboundScheduler | None = None, lanes: Lanes | None = None,
                 renderer: PartRenderer | None = None, files: FileTransport | None = None) -> None:
        caps = getattr(self, "capabilities", None)
        if not isinstance(caps, Capabilities):
            raise TypeError(f"{type(self).__name__} must set the class attribute `capabilities`")
        self.delivery = Outbound(
            transport if transport is not None else NoTransport(),
            renderer if renderer is not None else PartRenderer(self.render, caps, platform=self.platform),
            scheduler if scheduler is not None else OutboundScheduler(
                caps.edit_interval_seconds, global_rate=caps.global_rate_per_second,
                is_transient=self.is_transient_error),
            ledger if ledger is not None else InMemoryDeliveryLedger(),
            lanes=lanes if lanes is not None else Lanes(caps.edit_interval_seconds),
            stream_cursor=self.stream_cursor, is_markup_error=self.is_markup_error, files=files)
        self.metrics: Metrics = NO_METRICS
        self.leases: LeaseStore | None = None  # where receiving that must run on one replica is elected
        self.holder = ""
        self.elections: list[Election] = []
        self.rejects: RejectedLog | None = None  # see `keep_rejects_in`

    @property
    def scheduler(self) -> OutboundScheduler:
        return self.delivery.scheduler

    @property
    def ledger(self) -> DeliveryLedger:
        return self.delivery.ledger

    def approval_asker(self) -> ApprovalAsker | None:
        """How this platform shows approval requests (buttons); None: it cannot, and they are denied."""
        return None

    def attachment_fetcher(self) -> AttachmentFetcher | None:
        """How the turn fetches the files people send here (`ports/fetching.py`); None: the adapter fetches
        none, or fetches them itself before handing the message over."""
        return None

    def report_to(self, metrics: Metrics) -> None:
        """Count the platform's rate-limit answers in `metrics` (every outbound call goes through the
        scheduler, which sees them all)."""
        platform = self.platform
        self.metrics = metrics
        self.scheduler.on_rate_limited = lambda: metrics.rate_limited(platform)

    def elect_with(self, leases: LeaseStore, holder: str) -> None:
        """Replicas sharing `leases` elect which of them receives where only one may (a Telegram poller, a
        Discord gateway connection); `holder` names this replica. Without it the adapter receives alone."""
        self.leases, self.holder = leases, holder

    def election(self, name: str, ttl_seconds: float) -> Election | None:
        """The election of lease `name` among the replicas, or None when this adapter is not elected."""
        if self.leases is None:
            return None
        election = Election(self.leases, name, self.holder, ttl_seconds=ttl_seconds, metrics=self.metrics)
        self.elections.append(election)
        return election

    def roles(self) -> dict[str, str]:
        """Per elected lease, this replica's role in it ("leader", "stand-by"): `/ready` reports them."""
        return {election.name: election.role for election in self.elections}

    def keep_deliveries_in(self, ledger: DeliveryLedger) -> None:
        """Record deliveries in `ledger` (the gateway's durable one) instead of this process's memory."""
        self.delivery.ledger = ledger

    def keep_rejects_in(self, rejects: RejectedLog) -> None:
        """Record inbound events too malformed to read in `rejects`, before the platform is told they were
        taken (an adapter whose platform can send such events; without it they are only logged)."""
        self.rejects = rejects

    # -- lifecycle (platform half) ------------------------------------------------------------------
    async def log_in(self) -> None:
        """What of `start` may happen before the gateway takes messages: the platform's log-in round trips,
        which the serving process overlaps with the model SDK's import and the database's migration.
        Nothing is received yet. Never raises: whatever failed, `start` does again (and reports)."""
        return None

    @abstractmethod
    async def start(self) -> None:
        """Connect and start receiving updates."""

    async def stop_receiving(self) -> None:
        """Stop taking new messages where the platform keeps them for later (shutdown, first step), while
        replies in flight may still go out. Adapters whose platform pushes to the gateway's HTTP server, or
        does not send a message again (Discord), need do nothing: what comes while the gateway stops is
        recorded for its next start."""
        return None

    async def stop(self) -> None:
        """Disconnect. Subclasses call ``await super().stop()`` first: it drains queued finals."""
        await self.scheduler.stop()

    # -- the platform's format and its errors -------------------------------------------------------
    @abstractmethod
    def render(self, markdown: str) -> str | Rendered:
        """Render one part of a final from Markdown to the platform's format (see `adapters.render`)."""

    def is_markup_error(self, exc: BaseException) -> bool:
        """Whether a rendered send/edit failed because of its formatting (e.g. Telegram's "can't parse
        entities"); the part is then resent as plain text."""
        return False

    def is_transient_error(self, exc: BaseException) -> bool:
        """Whether a failed call is worth retrying with backoff (rate limits are handled separately)."""
        return default_is_transient(exc)

    # -- Outlet -------------------------------------------------------------------------------------
    def open_stream(self, target: ReplyTarget, *, idempotency_key: str) -> StreamingReply:
        return self.delivery.open_stream(target, idempotency_key=idempotency_key)

    async def send(self, target: ReplyTarget, text: str, *, idempotency_key: str | None = None) -> None:
        await self.delivery.send(target, text, idempotency_key=idempotency_key)

    async def typing(self, target: ReplyTarget) -> None:
        await self.delivery.typing(target)

    def max_file_bytes(self, media_type: str) -> int:
        """The largest file of this type the platform takes from the bot (0: it sends no files)."""
        return self.delivery.max_file_bytes(media_type)

    async def send_file(self, target: ReplyTarget, file: OutgoingFile, *, idempotency_key: str) -> bool:
        """The engine's `FileOutlet`: paced and at most once per key (see `Outbound.send_file`)."""
        return await self.delivery.send_file(target, file, idempotency_key=idempotency_key)

    def render_parts(self, markdown: str) -> list[OutPart]:
        """A final split into messages, each rendered to fit (see `adapters.part_rendering`)."""
        return self.delivery.render_parts(markdown)

    async def call(self, target: ReplyTarget, fn: Callable[[], Awaitable[Any]], *, interim: bool = False,
                   merge_key: Hashable | None = None, tag: Hashable | None = None, paced: bool = True) -> Any:
        """Run one platform call through this target's lane (a `PacedCall`: approval questions, notices
        and anchors wait out a 429 there like replies do)."""
        return await self.delivery.call(target, fn, interim=interim, merge_key=merge_key, tag=tag, paced=paced)
