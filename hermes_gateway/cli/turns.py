"""Counting the turns that failed, so `chat` can end with a status a script can test."""

from __future__ import annotations

from hermes_engine.ports.feature import Feature, TurnOutcome


class FailedTurns(Feature):
    """A feature that only listens: each turn that ended in an error instead of an answer adds one."""

    name = "failed-turns"

    def __init__(self) -> None:
        self.count = 0

    async def on_turn_end(self, outcome: TurnOutcome) -> None:
        if outcome.failed:
            self.count += 1
