"""What both SDK-backed providers need when a call fails: the wait the server asked for, and error text
with no trace of the API key."""

from __future__ import annotations

import re
from typing import Any

_KEY_PATTERN = re.compile(r"\bsk-[A-Za-z0-9_\-*]{8,}")


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


def redact(text: str, api_key: str | None) -> str:
    """Error bodies sometimes echo the key (or a prefix of it); none of it goes into messages or logs."""
    if api_key and len(api_key) >= 6:
        text = text.replace(api_key, "***")
    return _KEY_PATTERN.sub("sk-***", text)
