"""One way to make the `openai` SDK's client for the side endpoints (embeddings, transcription, speech): any
OpenAI-compatible server, its base URL the SDK's own (`OPENAI_BASE_URL`, else OpenAI's) when none is given.
Imported only where one of them is configured, so a bot without them does not load the SDK."""

from __future__ import annotations

from typing import Any

import openai

PLACEHOLDER_API_KEY = "not-needed"  # local servers accept any key; the SDK insists on one


def openai_client(*, base_url: str | None, api_key: str | None, timeout: float,
                  max_retries: int) -> openai.AsyncOpenAI:
    options: dict[str, Any] = {"timeout": timeout, "max_retries": max_retries,
                               "api_key": api_key or PLACEHOLDER_API_KEY}
    if base_url:
        options["base_url"] = base_url
    return openai.AsyncOpenAI(**options)
