"""Error taxonomy.

Four families, because each needs a different response: a person fixes configuration, the agent loop
reports model misbehaviour back to the model, provider/platform failures are retried or routed to a
fallback, and a store that cannot write pauses the work until it can again. Everything the engine raises
on purpose derives from `HermesError`.
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


class StorageError(HermesError):
    """The store cannot write: the disk is full, the database is read-only, an I/O error, a lock held past
    the busy timeout, the connection lost. Raised by the storage layer in place of its database errors, so
    the engine can tell an outage (pause, no model calls) from a bug. `reason` is a few plain words for a
    person ("the disk is full")."""

    def __init__(self, reason: str, *, detail: str = "") -> None:
        super().__init__(f"the store cannot write: {reason}" + (f" ({detail})" if detail else ""))
        self.reason = reason
        self.detail = detail


class TurnInterrupted(HermesError):
    """A turn was stopped by /stop, a newer message or shutdown; nothing partial enters history."""
