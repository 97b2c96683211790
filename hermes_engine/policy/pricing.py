"""What a model call cost, in micro-dollars (millionths of a US dollar, integers, so sums never drift).

Prices come from `genai-prices`, a table of providers' published prices kept up to date by its
maintainers, which bills cached and uncached input and output the way each provider does (Anthropic's cache
reads at a tenth, OpenAI's cached input at its own rate, long-context tiers). A profile's `prices:` override
it per model. A model neither knows costs nothing here: its tokens are still counted, `/usage` says it has
no known price, and the process logs it once per model. The table is imported at the first price asked
for, so a start that answers nothing does not pay for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from hermes_engine.config.prices import ModelPriceSettings
from hermes_engine.ports.conversation import Usage

log = logging.getLogger(__name__)

MICROS = 1_000_000  # micro-dollars in a dollar
_logged_unknown: set[str] = set()  # models already logged as having no known price, in this process


@dataclass(frozen=True)
class Cost:
    """A usage's price: micro-dollars, and whether a price was known (False: tokens only, cost 0)."""

    micros: int = 0
    known: bool = True


class Prices:
    """Prices per model spec ("provider:model"): the profile's overrides first, then the price table."""

    def __init__(self, overrides: dict[str, ModelPriceSettings] | None = None) -> None:
        self.overrides = dict(overrides or {})

    def cost(self, model: str, usage: Usage) -> Cost:
        """What `usage` of `model` cost. `usage` keeps its four counters disjoint (uncached input, output,
        cache reads, cache writes), as `ports.conversation.Usage` does."""
        override = self._override(model)
        if override is not None:
            return Cost(_overridden(override, usage))
        micros = _from_table(model, usage)
        if micros is None:
            if model not in _logged_unknown:
                _logged_unknown.add(model)
                log.warning("no known price for model %s: its tokens are counted, its cost is not", model)
            return Cost(0, known=False)
        return Cost(micros)

    def known(self, model: str) -> bool:
        """Whether `model` has a price (an override or the table's)."""
        return self._override(model) is not None or _from_table(model, Usage(input_tokens=1)) is not None

    def _override(self, model: str) -> ModelPriceSettings | None:
        """The override for the spec itself, else for its model name alone."""
        return self.overrides.get(model) or self.overrides.get(model.partition(":")[2] or model)


def _overridden(price: ModelPriceSettings, usage: Usage) -> int:
    cached = price.cached_input if price.cached_input is not None else price.input
    written = price.cache_write if price.cache_write is not None else price.input
    dollars = (Decimal(str(price.input)) * usage.input_tokens + Decimal(str(price.output)) * usage.output_tokens
               + Decimal(str(cached)) * usage.cache_read_tokens + Decimal(str(written)) * usage.cache_write_tokens)
    return round(dollars)  # per million tokens, so dollars x tokens / 1e6 x 1e6 micros


def _from_table(model: str, usage: Usage) -> int | None:
    """The table's price in micro-dollars, or None when it does not know the provider or the model."""
    provider, _, name = model.partition(":")
    if not name:
        provider, name = "", model
    import genai_prices

    total_input = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    counted: Any = genai_prices.Usage(input_tokens=total_input, cache_read_tokens=usage.cache_read_tokens,
                                      cache_write_tokens=usage.cache_write_tokens,
                                      output_tokens=usage.output_tokens)
    try:
        price = genai_prices.calc_price(counted, name, provider_id=provider or None)
    except LookupError:
        return None
    return round(Decimal(price.total_price) * MICROS)


def dollars(micros: int) -> str:
    """Micro-dollars as a person reads them: cents from a dollar up; below, up to four places where cents
    would hide what a few turns cost ($0.0123), never fewer than two ($0.10)."""
    value = micros / MICROS
    if value >= 1:
        return f"${value:,.2f}"
    text = f"{value:.4f}".rstrip("0")
    return f"${text}{'0' * max(0, 2 - len(text.partition('.')[2]))}"
