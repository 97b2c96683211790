"""What a turn reports to `Metrics`: how it ended and how long it took, the latency the gateway added
before the first model request, tokens, tools called and errors. Kept apart from the turn's phases so
they stay about the turn."""

from __future__ import annotations

import time
from collections.abc import Callable

from hermes_engine.agent.loop import TurnResult
from hermes_engine.ports.conversation import Usage
from hermes_engine.ports.inbound import InboundMessage
from hermes_engine.ports.metrics import Metrics
from hermes_engine.ports.models import EventStream, ModelRequest, Router
from hermes_engine.ports.tools import Tools


class FirstRequestRouter:
    """A turn's router that calls `on_first` once, just before the first model request goes out."""

    def __init__(self, router: Router, on_first: Callable[[], None]) -> None:
        self.router = router
        self._on_first: Callable[[], None] | None = on_first

    def stream(self, request: ModelRequest) -> EventStream:
        if self._on_first is not None:
            on_first, self._on_first = self._on_first, None
            on_first()
        return self.router.stream(request)


def first_request_reporter(metrics: Metrics, bot: str, message: InboundMessage, *,
                           replayed: bool) -> Callable[[], None]:
    """Report the time from this gateway taking the message in (`arrived`, not the platform's timestamp,
    which adds the platform's delay, rounding and clock skew) to the first model request. A replayed turn
    is left out: its message waited through a restart, which says nothing about the gateway's overhead."""

    def report() -> None:
        if not replayed:
            waited = time.monotonic() - message.arrived
            metrics.model_request_started(bot, message.platform, max(0.0, waited))

    return report


def report_turn(metrics: Metrics, bot: str, platform: str, *, outcome: str, started: float,
                error_kind: str | None, result: TurnResult | None, tools: Tools) -> None:
    """One finished turn (not a duplicate, not one paused by the store) into `metrics`. A tool name the
    bot does not have counts as "unknown": the model may call any name, and labels must stay a closed set."""
    metrics.turn_finished(bot, platform, outcome, time.monotonic() - started)
    if error_kind is not None:
        metrics.error(bot, error_kind)
    if result is None:
        return
    usage: Usage = result.usage
    metrics.tokens_used(bot, platform, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                        cached_tokens=usage.cache_read_tokens + usage.cache_write_tokens)
    for message in result.new_messages:
        if message.role == "tool" and message.tool_name:
            metrics.tool_called(bot, message.tool_name if tools.get(message.tool_name) else "unknown")
