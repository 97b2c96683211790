"""`Metrics` on prometheus-client, served as `/metrics` by the gateway's HTTP server.

Each `PrometheusMetrics` keeps its own registry (not the library's global one), so one process can run
several and a test sees only its own counts. `prometheus_client` is imported when the first one is made:
a `hermes-gateway` command that serves nothing does not pay for it.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from hermes_engine.ports.metrics import Metrics

# Seconds; a turn spans a quick answer to minutes of tool use, the gateway's own latency milliseconds.
TURN_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
ADDED_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
# A job's run, from its slot to its record: a reminder within a second, a task after its model calls.
LATENESS_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)


class PrometheusMetrics(Metrics):
    """The engine's and adapters' reports as Prometheus series named `hermes_*`."""

    def __init__(self) -> None:
        import prometheus_client as prom

        self._prom = prom
        self.registry = registry = prom.CollectorRegistry(auto_describe=True)
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}
        self.turns = prom.Counter("hermes_turns", "Turns finished, by how they ended.",
                                  ["bot", "platform", "outcome"], registry=registry)
        self.turn_seconds = prom.Histogram("hermes_turn_seconds", "Time from a turn's start to its end.",
                                           ["bot", "platform"], buckets=TURN_BUCKETS, registry=registry)
        self.added_seconds = prom.Histogram(
            "hermes_gateway_added_seconds", "Time from receiving a message to its turn's first model request.",
            ["bot", "platform"], buckets=ADDED_BUCKETS, registry=registry)
        self.tokens = prom.Counter("hermes_tokens", "Model tokens: input (not cached), output, cached.",
                                   ["bot", "platform", "kind"], registry=registry)
        self.cost = prom.Counter("hermes_cost_usd", "What model calls cost, in US dollars, by model.",
                                 ["bot", "model"], registry=registry)
        self.tool_calls = prom.Counter("hermes_tool_calls", "Tool calls the model made, by tool.",
                                       ["bot", "tool"], registry=registry)
        self.errors = prom.Counter("hermes_errors", "Turns that did not end well, by kind.",
                                   ["bot", "kind"], registry=registry)
        self.rate_limits = prom.Counter("hermes_platform_rate_limited",
                                        "Calls a chat platform answered with a rate limit (429).",
                                        ["platform"], registry=registry)
        self.pending = prom.Gauge("hermes_turns_pending", "Turns queued and not yet started.", ["bot"],
                                  registry=registry)
        self.leases = prom.Gauge("hermes_leases_held", "Scheduled jobs running here under their lease.",
                                 ["job"], registry=registry)
        self.limits = prom.Counter("hermes_usage_limit_refusals", "Turns refused by a usage limit.",
                                   ["bot", "limit"], registry=registry)
        self.due = prom.Gauge("hermes_jobs_due", "Scheduled jobs the clock found due at its last look.", ["bot"],
                              registry=registry)
        self.job_runs = prom.Counter("hermes_job_runs", "Scheduled jobs' runs recorded, by kind and outcome.",
                                     ["bot", "kind", "outcome"], registry=registry)
        self.lateness = prom.Histogram("hermes_job_lateness_seconds",
                                       "Time from a scheduled job's due slot to its run's record.", ["bot", "kind"],
                                       buckets=LATENESS_BUCKETS, registry=registry)

    def turn_finished(self, bot: str, platform: str, outcome: str, seconds: float) -> None:
        self._child(self.turns, bot, platform, outcome).inc()
        self._child(self.turn_seconds, bot, platform).observe(seconds)

    def model_request_started(self, bot: str, platform: str, seconds_since_received: float) -> None:
        self._child(self.added_seconds, bot, platform).observe(seconds_since_received)

    def tokens_used(self, bot: str, platform: str, *, input_tokens: int, output_tokens: int,
                    cached_tokens: int) -> None:
        for kind, amount in (("input", input_tokens), ("output", output_tokens), ("cached", cached_tokens)):
            if amount:
                self._child(self.tokens, bot, platform, kind).inc(amount)

    def cost_spent(self, bot: str, model: str, usd: float) -> None:
        self._child(self.cost, bot, model).inc(usd)

    def tool_called(self, bot: str, tool: str) -> None:
        self._child(self.tool_calls, bot, tool).inc()

    def error(self, bot: str, kind: str) -> None:
        self._child(self.errors, bot, kind).inc()

    def rate_limited(self, platform: str) -> None:
        self._child(self.rate_limits, platform).inc()

    def turns_pending(self, bot: str, change: int) -> None:
        self._child(self.pending, bot).inc(change)

    def lease_held(self, job: str, held: bool) -> None:
        self._child(self.leases, job).inc(1 if held else -1)

    def limit_reached(self, bot: str, limit: str) -> None:
        self._child(self.limits, bot, limit).inc()

    def jobs_due(self, bot: str, count: int) -> None:
        self._child(self.due, bot).set(count)

    def job_run(self, bot: str, kind: str, outcome: str, lateness_seconds: float) -> None:
        self._child(self.job_runs, bot, kind, outcome).inc()
        self._child(self.lateness, bot, kind).observe(max(0.0, lateness_seconds))

    def _child(self, metric: Any, *labels: str) -> Any:
        """The series of `metric` for `labels`, found once: `labels()` takes a lock and builds a key on
        every call, and the label sets are few (closed sets), so they are kept here."""
        key = (metric, labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def exposition(self) -> tuple[bytes, str]:
        """The registry in Prometheus' text format, and its content type."""
        return self._prom.generate_latest(self.registry), self._prom.CONTENT_TYPE_LATEST

    async def handle(self, _: web.Request) -> web.Response:
        """`GET /metrics`."""
        body, content_type = self.exposition()
        return web.Response(body=body, headers={"Content-Type": content_type})
