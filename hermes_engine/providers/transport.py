"""What both SDK-backed providers need when a call fails: the wait the server asked for. (Error text loses
its secrets through `hermes_engine.policy.secrets.redact`, with the provider's key as a known value.)"""

from __future__ import annotations

from typing import Any


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after`, whichever the server sent."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return float(value) / scale
            except ValueError:
                continue
    return None

