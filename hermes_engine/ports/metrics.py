"""What the engine and the adapters report for monitoring; the composition root decides where it goes.

Every hook is declared here with a no-op default, so callers report unconditionally and a deployment
without metrics pays a method call. Labels are closed sets the operator can aggregate over (platform,
bot profile, outcome, tool, error kind): never a person, a chat, a user name or message text.
"""

from __future__ import annotations


class Metrics:
    """The no-op base; `hermes_gateway.metrics.PrometheusMetrics` is the real one."""

    def turn_finished(self, bot: str, platform: str, outcome: str, seconds: float) -> None:
        """A turn ended (`outcome`: answered, failed, interrupted, undelivered, error) after `seconds`."""

    def model_request_started(self, bot: str, platform: str, seconds_since_received: float) -> None:
        """A turn's first model request went out, this long after this gateway took its message in (not
        since the platform's timestamp): the latency the gateway adds before the model is asked."""

    def tokens_used(self, bot: str, platform: str, *, input_tokens: int, output_tokens: int,
                    cached_tokens: int) -> None:
        """A turn's tokens: input not from the cache, output, and input read from or written to the cache."""

    def cost_spent(self, bot: str, model: str, usd: float) -> None:
        """Model calls of `model` ("provider:model") cost `usd` US dollars (a model with no known price
        reports nothing)."""

    def tool_called(self, bot: str, tool: str) -> None:
        """The model called `tool` once in a turn."""

    def error(self, bot: str, kind: str) -> None:
        """A turn did not end well: `kind` is provider, model, storage, delivery or internal."""

    def rate_limited(self, platform: str) -> None:
        """The platform answered a call with a rate limit (HTTP 429 or its equivalent)."""

    def turns_pending(self, bot: str, change: int) -> None:
        """Turns queued behind a running one (or waiting to start) went up or down by `change`."""

    def lease_held(self, job: str, held: bool) -> None:
        """This replica took (True) or let go of (False) the lease of scheduled job `job` to run it."""

    def limit_reached(self, bot: str, limit: str) -> None:
        """A turn was refused because a usage limit (`limit`: person_turns, bot_tokens, ...) was reached."""

    def jobs_due(self, bot: str, count: int) -> None:
        """The clock looked and found `count` of the bot's scheduled jobs due (at most a page of them)."""

    def job_run(self, bot: str, kind: str, outcome: str, lateness_seconds: float) -> None:
        """A scheduled job's run was recorded (`kind`: reminder, task; `outcome`: delivered, silent, skipped,
        interrupted, failed, undelivered, refused), `lateness_seconds` after the slot it ran was due."""


NO_METRICS = Metrics()
