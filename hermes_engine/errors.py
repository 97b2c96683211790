"""Error taxonomy.

Three families, because each needs a different response: a person fixes configuration, the agent loop
reports model misbehaviour back to the model, and provider/platform failures are retried or routed to a
fallback. Everything the engine raises on purpose derives from `HermesError`.
"""

from __future__ import annotations


class HermesError(Exception):
    """Base of every error the engine raises deliberately."""


class ConfigError(HermesError):
    """A missing or wrong setting. The message is one sentence naming the setting."""


class ProviderError(HermesError):
    """The model provider or the transport to it failed.

    `status` is the HTTP status when there was one. `fallback_eligible` says whether the next model of
    the fallback chain should take over (429, 5xx, 401, 403, transport failures).
    """

    def __init__(self, message: str, *, status: int | None = None, provider: str = "",
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.provider = provider
        self.retry_after = retry_after

    @property
    def fallback_eligible(self) -> bool:
        if self.status is None:
            return True  # transport failure: connection refused, cut stream, timeout
        return self.status in (401, 403, 408, 409, 429) or self.status >= 500


class ModelMisbehaviour(HermesError):
    """The model answered, but not usably. Reported back to the model rather than raised to the user."""


class MalformedToolArguments(ModelMisbehaviour):
    pass


class UnknownTool(ModelMisbehaviour):
    pass


class EmptyAnswer(ModelMisbehaviour):
    pass


class PlatformError(HermesError):
    """A chat platform refused or failed a call. `retry_after` is set when the platform asked to wait."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TurnInterrupted(HermesError):
    """A turn was stopped by /stop, a newer message or shutdown; nothing partial enters history."""
