"""Compression per session: `CompactionService` (one per bot) and `SessionContext`, the hook for one turn.

The in-memory `session.history` is a *view*; the stored messages are never deleted or changed. Before each
model call of a turn (`SessionContext.before_call`, hooked into `AgentLoop.run`) the next request is
measured (`TokenMeter`: the provider's count for the last request + chars/4 for what is new). Above
`threshold` (50%) of the window, old tool results become placeholders, and if that is not enough the
middle of the history is summarised and replaced by one summary message (`SessionContext.compress`; the
steps are in `planning`, `summariser` and `lineage`). A pass makes a new view and leaves the one it read
alone; the hooks hand the new view to the session's history (`SessionHistory.replace_view`). What the
window leaves beside the request bounds the call's output limit (`output_room`), so a model with a large
maximum is never asked for more than fits.

Gateway hygiene (`SessionContext.hygiene`, before a turn starts): a history above `hygiene_threshold` (85%)
of the window by rough estimate — e.g. after `/model` switched to a smaller model — is compressed first.

A user message too large to ever fit under the threshold reaches the model cut (`planning.truncate_for_model`),
and the person is told in a separate message before the answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from hermes_engine.agent.context_window import TokenMeter, fixed_tokens, messages_tokens, window_for
from hermes_engine.compression.lineage import provisional_summary, summary_message, sync_stored_ids
from hermes_engine.compression.planning import (
    COMPACTION,
    STORED_ID,
    CompactionReport,
    CompressionConfig,
    Split,
    is_summary,
    plan_split,
    prune_tool_results,
    truncate_for_model,
)
from hermes_engine.compression.summariser import (
    GOAL_LINE,
    SUMMARY_SYSTEM,  # noqa: F401  (re-exported: tests/integration/test_session_search.py imports it from here)
    Summariser,
    SummaryFailed,
    strip_goal,
)
from hermes_engine.policy.limits import charge
from hermes_engine.ports.conversation import Message, Usage, estimate_tokens
from hermes_engine.ports.models import ModelRequest, ModelResponse

if TYPE_CHECKING:
    from hermes_engine.ports.history import SessionHistory
    from hermes_engine.ports.host import Host
    from hermes_engine.ports.inbound import InboundMessage
    from hermes_engine.ports.session import SessionHandle

log = logging.getLogger(__name__)

OVERSIZE_NOTICE = ("⚠️ Your message is too long for me to read in one go (about {tokens:,} tokens; my context "
                   "window holds {window:,}). I kept all of it, but this time I can only read its beginning and "
                   "end — {omitted:,} characters in the middle are skipped. Send the part that matters as a "
                   "separate message if I miss it.")
MIN_SINGLE_MESSAGE_TOKENS = 1000
# An answer gets at least this many tokens however full the window, and the request is sized to leave
# OUTPUT_MARGIN of the window unclaimed: its size is an estimate, and a server refuses a request whose prompt
# and max_tokens together exceed the window (OpenAI, vLLM, llama.cpp).
MIN_OUTPUT_ROOM = 1024
OUTPUT_MARGIN = 0.05


class Compressed(NamedTuple):
    """What a compression pass made: the new view (the same messages, when nothing changed) and its report."""

    view: list[Message]
    report: CompactionReport


# ---------------------------------------------------------------------------------------- per session

class CompactionService:
    """One per bot: compression settings, the summariser and each session's token meter."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.config = CompressionConfig.from_profile(host.profile)
        self.summariser = Summariser(self.config)
        self._meters: dict[int, TokenMeter] = {}
        self._fixed: dict[int, int] = {}

    def meter(self, session_id: int) -> TokenMeter:
        return self._meters.setdefault(session_id, TokenMeter())

    def forget(self, session_id: int) -> None:
        """The session left memory: its meter and fixed size are measured afresh if it comes back."""
        self._meters.pop(session_id, None)
        self._fixed.pop(session_id, None)

    def context(self, session: SessionHandle, message: InboundMessage | None = None) -> SessionContext:
        return SessionContext(self, session, message)

    def fixed_tokens(self, session: SessionHandle) -> int:
        """System prompt + tool schemas: frozen for the session, so measured once (once it is frozen)."""
        key = session.record.id
        if key in self._fixed:
            return self._fixed[key]
        tokens = fixed_tokens(session.system_prompt or "", self.host.tools.schemas())
        if session.system_prompt is not None:
            self._fixed[key] = tokens
        return tokens


class SessionContext:
    """Compression for one session during one turn (or one /compress). Also `AgentLoop.run`'s `context`."""

    def __init__(self, service: CompactionService, session: SessionHandle,
                 message: InboundMessage | None = None) -> None:
        self.service = service
        self.host = service.host
        self.config = service.config
        self.session = session
        self.message = message
        self.meter = service.meter(session.record.id)
        self.reports: list[CompactionReport] = []
        self._history: SessionHistory | None = None
        self._cut: dict[tuple[int, int], tuple[Message, Message]] = {}  # oversize message → its cut copy
        self._told = False
        self._room: int | None = None
        self.notify: Callable[[str], Awaitable[None]] | None = self._send_notice if message is not None else None

    # -- sizes

    def primary_model(self) -> str:
        return self.session.record.model or self.host.profile.models(self.host.settings)[0]

    def window(self, router: Any = None) -> int:
        spec = getattr(router, "spec", None) or self.primary_model()
        return window_for(spec, self.host.profile, self.host.settings)

    @property
    def fixed(self) -> int:
        return self.service.fixed_tokens(self.session)

    def estimate(self, history: Sequence[Message], window: int | None = None) -> int:
        """Rough size of a request of `history` as the model gets it (system prompt, tool schemas,
        messages with oversize ones cut; chars/4 scaled by the provider's last count, see `TokenMeter`)."""
        return self.meter.scaled(self.fixed + messages_tokens(self.view(history, window or self.window())))

    def measure(self, history: Sequence[Message], window: int | None = None) -> int:
        """The provider's count for the last request plus an estimate of what is new."""
        window = window or self.window()
        return self.meter.measure(history, self.fixed, lambda new: messages_tokens(self.view(new, window)))[0]

    def view(self, history: Sequence[Message], window: int) -> list[Message]:
        """The messages as the model gets them: a user message too large to fit under the threshold is cut
        to its beginning and end with a note (the history and the store keep it whole)."""
        limit = self._single_limit(window)
        out = list(history)
        for i, message in enumerate(out):
            if message.role == "user" and len(message.content) > limit * 4 and not is_summary(message):
                key = (id(message), limit)
                cut = self._cut.get(key)
                if cut is None or cut[0] is not message:
                    cut = self._cut[key] = (message, truncate_for_model(message, limit))
                out[i] = cut[1]
        return out

    # -- hooks

    async def hygiene(self) -> CompactionReport | None:
        """Before a turn: compress a stored history above `hygiene_threshold` of the window (rough estimate)."""
        history = self.session.history
        if not history.loaded:
            return None
        window = self.window()
        tokens = self.estimate(history.view(), window)
        if tokens <= self.config.hygiene_threshold * window:
            return None
        log.info("session %s: history of ~%d tokens is above %.0f%% of the %d-token window; compressing first",
                 self.session.key, tokens, self.config.hygiene_threshold * 100, window)
        return self._hand_over(history, await self.compress(
            history.view(), self.host.chain_for(self.session).route(), reason="hygiene", window=window))

    async def before_call(self, history: SessionHistory, router: Any) -> list[Message]:
        """Before each model call of the turn: keep the request under `threshold` of the window. Returns
        the messages to send (`view`)."""
        self._history = history
        window = self.window(router)
        if self.measure(history.view(), window) > self.config.threshold * window:
            self._hand_over(history, await self.compress(history.view(), router, reason="agent", window=window))
        current = history.view()
        messages = self.view(current, window)
        await self._tell_if_cut(current, messages, window)
        self._room = max(MIN_OUTPUT_ROOM, int(window * (1 - OUTPUT_MARGIN)) - self.measure(current, window))
        return messages

    def output_room(self) -> int | None:
        """What the window leaves the answer beside the request `before_call` prepared."""
        return self._room

    def after_call(self, request: ModelRequest, response: ModelResponse) -> None:
        """The provider counted the request: later measurements build on that count."""
        if self._history is not None:
            self.meter.observe(self._history.view(), len(request.messages), response.usage,
                               estimated=self.fixed + messages_tokens(request.messages))

    async def compress_now(self) -> CompactionReport:
        """`/compress`: compress regardless of size, keeping only the last exchange verbatim."""
        history = self.session.history
        assert history.loaded, "ensure_loaded first"
        return self._hand_over(history, await self.compress(
            history.view(), self.host.chain_for(self.session).route(), reason="command", force=True))

    def _hand_over(self, history: SessionHistory, compressed: Compressed) -> CompactionReport:
        """The session's history takes the new view (a pass runs while nothing else appends: before a turn,
        as a queued command, or while the turn waits for `before_call`)."""
        if compressed.report.changed:
            history.replace_view(compressed.view)
            self.meter.touch()
        return compressed.report

    # -- the pass

    async def compress(self, history: Sequence[Message], router: Any, *, reason: str, window: int | None = None,
                       force: bool = False) -> Compressed:
        """A new view of `history`: pruned, then with the middle summarised if still needed (or forced).
        Never raises for a failed summary: the report says what happened and the view is valid either way."""
        window = window or self.window(router)
        threshold = int(self.config.threshold * window)
        report = CompactionReport(reason=reason, tokens_before=self.measure(history, window), tokens_after=0)
        view = list(history)
        try:
            report.pruned = prune_tool_results(view, protect_last=self.config.protect_tail_messages,
                                               min_chars=self.config.placeholder_chars)
            report.tokens_after = self.estimate(view, window)
            if force or report.tokens_after > threshold:
                view = await self._summarise(view, router, report, window, threshold, force)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # compression must never cost the person their answer
            log.exception("session %s: compression failed", self.session.key)
            report.failed = report.failed or f"{type(exc).__name__}: {exc}"
            report.tokens_after = self.estimate(view, window)
        self.reports.append(report)
        if report.summary_usage.total:  # off the turn's path, as the turn's own tokens are counted
            self.host.spawn(self._charge(report.summary_usage), "usage-tokens")
        if report.changed or report.failed:
            log.info("session %s: %s compression %s: ~%d → ~%d tokens (%d pruned, %d summarised)%s",
                     self.session.key, reason, "failed" if report.failed else "done", report.tokens_before,
                     report.tokens_after, report.pruned, report.summarised,
                     f": {report.failed}" if report.failed else "")
        return Compressed(view, report)

    async def _charge(self, spent: Usage) -> None:
        """A summary is made for the person whose message (or /compress) needed it: its cost is theirs."""
        message, person = self.message, self.session.scope.person_id
        if message is not None:
            person = await self.host.person_of(message.platform, message.account, message.user_id,
                                               message.user_name)
        await charge(self.host, person, spent)

    async def _summarise(self, history: list[Message], router: Any, report: CompactionReport, window: int,
                         threshold: int, force: bool) -> list[Message]:
        """`history` with its middle summarised, or `history` itself when there is nothing worth it."""
        split = plan_split(history, protect_tail=self.config.protect_tail_messages,
                           tail_budget=int(threshold * self.config.tail_share),
                           head_budget=int(threshold * self.config.head_share), force=force)
        if split is None:
            return history
        if not force and messages_tokens(split.middle) < max(200, threshold // 20):
            return history  # too little to gain for a model call; the tail itself is what is large
        goal = await self._open_goal()
        previous = strip_goal(split.previous.meta[COMPACTION]["summary"]) if split.previous else None
        try:
            text = await self.service.summariser.summarise(router, previous=previous, messages=split.middle,
                                                           window=window, goal=goal, usage=report.summary_usage)
        except SummaryFailed as exc:
            report.failed = str(exc)
            return history
        stored_summary = f"{GOAL_LINE}{goal}\n\n{text}" if goal else text
        first_id, last_id, parent_id = await self._covered(history, split)
        earlier = (split.previous.meta[COMPACTION].get("count") or 0) if split.previous is not None else 0
        count = len(split.middle) + earlier
        record = None
        if first_id is not None and last_id is not None:
            provisional = [*split.head, provisional_summary(stored_summary, count), *split.tail]
            record = await self.host.store.record_compaction(
                session_id=self.session.record.id, parent_id=parent_id, first_message_id=first_id,
                last_message_id=last_id, summary=stored_summary, reason=report.reason,
                tokens_before=report.tokens_before, tokens_after=self.estimate(provisional, window))
        else:
            log.warning("session %s: compaction not recorded (no stored ids); it lasts until a restart",
                        self.session.key)
        if record is not None:
            message = summary_message(record, count)
        else:
            message = provisional_summary(stored_summary, count, first_id, last_id)
        view = [*split.head, message, *split.tail]
        report.summarised = len(split.middle)
        report.compaction_id = record.id if record is not None else None
        report.tokens_after = self.estimate(view, window)
        return view

    async def _covered(self, history: Sequence[Message],
                       split: Split) -> tuple[int | None, int | None, int | None]:
        """(first, last) stored ids the new summary covers — cumulative over earlier compactions — and the
        compaction it updates."""
        await sync_stored_ids(self.host.store, self.session.record.id, history)
        ids: list[int] = [m.meta[STORED_ID] for m in split.middle if m.meta.get(STORED_ID)]
        previous = split.previous.meta[COMPACTION] if split.previous is not None else None
        first = previous["first"] if previous and previous["first"] is not None else (min(ids) if ids else None)
        last = max(ids) if ids else (previous["last"] if previous else None)
        return first, last, previous["id"] if previous else None

    async def _open_goal(self) -> str | None:
        try:
            goal = await self.host.store.active_goal(self.session.key, self.host.bot)
        except Exception:  # a store without goals
            return None
        return goal.text if goal is not None and goal.status in ("active", "paused") else None

    # -- oversize messages

    def _single_limit(self, window: int) -> int:
        """Tokens one user message may take: whatever is left under the threshold by the fixed part."""
        return max(MIN_SINGLE_MESSAGE_TOKENS, int(self.config.threshold * window) - self.fixed - 256)

    async def _tell_if_cut(self, history: Sequence[Message], sent: list[Message], window: int) -> None:
        """Tell the person once when their message of this turn reaches the model cut."""
        if self.message is None or self.notify is None or self._told:
            return
        for original, shown in zip(history, sent, strict=False):
            if shown is not original and original.meta.get("event_id") == self.message.event_id:
                self._told = True
                omitted = len(original.content) - self._single_limit(window) * 4
                text = OVERSIZE_NOTICE.format(tokens=estimate_tokens(original.content), window=window,
                                              omitted=omitted)
                try:
                    await self.notify(text)
                except Exception:
                    log.exception("session %s: could not send the oversize notice", self.session.key)
                return

    async def _send_notice(self, text: str) -> None:
        message = self.message
        assert message is not None
        await self.host.notify(message.reply_target(), text, idempotency_key=f"{message.event_id}:too-long")
