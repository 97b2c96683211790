"""A profile's own prices (`prices:`), for a model the price table lacks or bills differently (a local
server, a negotiated rate): US dollars per million tokens."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ModelPriceSettings(BaseModel):
    """One model's price; cached input and cache writes cost as much as input unless given."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)  # USD per million input tokens not read from the cache
    output: float = Field(ge=0)  # USD per million output tokens
    cached_input: float | None = Field(None, ge=0)  # USD per million input tokens read from the cache
    cache_write: float | None = Field(None, ge=0)  # USD per million input tokens written to the cache
