"""Prices per model: the maintained price table by default, cached input billed at its own rate, a profile's
override before the table, and a model neither knows costing nothing (its tokens still counted elsewhere)
and logged once."""

from __future__ import annotations

import logging

import pytest

from hermes_engine.config import BotProfile
from hermes_engine.config.prices import ModelPriceSettings
from hermes_engine.policy.pricing import Cost, Prices, dollars
from hermes_engine.policy.spending import spend_of
from hermes_engine.ports.conversation import Usage

MILLION = 1_000_000


def test_a_known_model_is_priced_from_the_table_per_million_tokens_in_micro_dollars() -> None:
    # gpt-4.1-mini: $0.40 per million input tokens, $1.60 per million output tokens
    cost = Prices().cost("openai:gpt-4.1-mini", Usage(input_tokens=MILLION, output_tokens=MILLION))
    assert cost == Cost(micros=2_000_000, known=True)
    assert dollars(cost.micros) == "$2.00"


def test_cached_input_costs_less_than_the_same_input_uncached() -> None:
    prices = Prices()
    uncached = prices.cost("openai:gpt-4.1-mini", Usage(input_tokens=MILLION))
    cached = prices.cost("openai:gpt-4.1-mini", Usage(cache_read_tokens=MILLION))
    assert uncached.micros == 400_000 and cached.micros == 100_000  # OpenAI bills cached input at a quarter
    # Anthropic: a cache read at a tenth of input, a cache write at 1.25 times it
    sonnet = [prices.cost("anthropic:claude-sonnet-4-5", Usage(**{kind: 100_000})).micros
              for kind in ("input_tokens", "cache_read_tokens", "cache_write_tokens")]
    assert sonnet == [300_000, 30_000, 375_000]


def test_a_profiles_price_overrides_the_table_and_names_a_model_it_lacks() -> None:
    prices = Prices({"openai:gpt-4.1-mini": ModelPriceSettings(input=1, output=2),
                     "my-local-model": ModelPriceSettings(input=0.5, output=1, cached_input=0.1)})
    assert prices.cost("openai:gpt-4.1-mini", Usage(input_tokens=MILLION, output_tokens=MILLION)).micros == 3_000_000
    local = prices.cost("openai-compatible:my-local-model",
                        Usage(input_tokens=MILLION, cache_read_tokens=MILLION, cache_write_tokens=MILLION))
    assert local == Cost(micros=500_000 + 100_000 + 500_000)  # cache writes at the input price unless given
    assert prices.known("openai-compatible:my-local-model")


def test_a_model_with_no_known_price_costs_nothing_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    prices = Prices()
    with caplog.at_level(logging.WARNING, logger="hermes_engine.policy.pricing"):
        first = prices.cost("openai-compatible:llama-unpriced-7b", Usage(input_tokens=5000, output_tokens=50))
        again = prices.cost("openai-compatible:llama-unpriced-7b", Usage(input_tokens=5000))
    assert first == again == Cost(micros=0, known=False)
    assert not prices.known("openai-compatible:llama-unpriced-7b")
    assert [r.getMessage() for r in caplog.records].count(
        "no known price for model openai-compatible:llama-unpriced-7b: its tokens are counted, its cost is not") == 1


def test_a_turns_usage_is_priced_per_model_that_answered() -> None:
    turn = Usage()
    turn.add(Usage(input_tokens=MILLION, model="openai:gpt-4.1-mini"))
    turn.add(Usage(input_tokens=100_000, model="anthropic:claude-sonnet-4-5"))
    turn.add(Usage(output_tokens=MILLION, model="openai:gpt-4.1-mini"))
    spend = spend_of(Prices(), turn)
    assert {m.model: m.cost_micros for m in spend.models} == {"openai:gpt-4.1-mini": 400_000 + 1_600_000,
                                                              "anthropic:claude-sonnet-4-5": 300_000}
    assert spend.cost_micros == 2_300_000 and spend.unpriced == []
    assert turn.total == 2_100_000


def test_a_profile_reads_prices_per_million_tokens_from_yaml_shaped_settings() -> None:
    profile = BotProfile(prices={"openai:gpt-x": {"input": 2.5, "output": 10, "cached_input": 1.25}},
                         limits={"cost_per_day": 5, "total_cost_per_day": 50})
    assert profile.prices["openai:gpt-x"].cached_input == 1.25
    assert profile.limits.enabled and profile.limits.cost_per_day == 5
    with pytest.raises(ValueError):
        BotProfile(prices={"openai:gpt-x": {"input": -1, "output": 1}})


def test_dollars_read_in_cents_from_a_dollar_and_closer_below() -> None:
    assert [dollars(m) for m in (0, 66_000, 100_000, 123_456, 1_234_567, 5_000_000)] == [
        "$0.00", "$0.066", "$0.10", "$0.1235", "$1.23", "$5.00"]


def test_a_responses_usage_added_to_another_keeps_both_models_apart() -> None:
    first = Usage(input_tokens=10, cache_read_tokens=4, model="openai:gpt-4.1-mini")
    first.add(Usage(output_tokens=5, model="anthropic:claude-sonnet-4-5"))
    first.add(Usage(output_tokens=1, model="openai:gpt-4.1-mini"))
    parts = {name: (u.input_tokens, u.cache_read_tokens, u.output_tokens) for name, u in first.per_model().items()}
    assert parts == {"openai:gpt-4.1-mini": (10, 4, 1), "anthropic:claude-sonnet-4-5": (0, 0, 5)}
    assert first.total == 20
