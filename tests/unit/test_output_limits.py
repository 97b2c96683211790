"""The output limit each model is asked for, and what a profile may change about it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hermes_engine.config import load_profile
from hermes_engine.errors import ConfigError
from hermes_engine.providers.output_limits import DEFAULT_OUTPUT_LIMIT, output_limit


@pytest.mark.parametrize(("spec", "maximum"), [
    ("anthropic:claude-opus-4-6", 128_000),
    ("anthropic:claude-opus-4-5-20251101", 64_000),
    ("anthropic:claude-opus-4-1-20250805", 32_000),
    ("anthropic:claude-opus-4-20250514", 32_000),
    ("anthropic:claude-sonnet-4-6", 64_000),
    ("anthropic:claude-sonnet-4-5-20250929", 64_000),
    ("anthropic:claude-sonnet-4-20250514", 64_000),
    ("anthropic:claude-haiku-4-5", 64_000),
    ("anthropic:claude-3-7-sonnet-latest", 64_000),
    ("anthropic:claude-3-5-sonnet-20241022", 8_192),
    ("anthropic:claude-3-5-haiku-latest", 8_192),
    ("anthropic:claude-3-haiku-20240307", 4_096),
    ("openai:gpt-5", 128_000),
    ("openai:gpt-5-mini", 128_000),
    ("openai:gpt-5-chat-latest", 16_384),
    ("openai:gpt-4.1-nano", 32_768),
    ("openai:gpt-4o", 16_384),
    ("openai:gpt-4o-mini", 16_384),
    ("openai:gpt-4o-2024-05-13", 4_096),
    ("openai:gpt-4-turbo", 4_096),
    ("openai:o1-mini", 65_536),
    ("openai:o3", 100_000),
    ("openai:o4-mini", 100_000),
    ("openai-compatible:openai/gpt-4.1-mini", 32_768),  # a proxy's organisation path is not the model's name
])
def test_a_known_model_is_asked_for_its_published_maximum(spec: str, maximum: int) -> None:
    assert output_limit(spec) == maximum


def test_a_model_of_a_known_family_but_not_in_the_table_gets_the_smallest_figure_of_its_family() -> None:
    assert output_limit("anthropic:claude-opus-4-9") == 32_000
    assert output_limit("anthropic:claude-2.1") == 4_096


def test_a_lower_limit_wins_and_a_higher_one_stops_at_the_model_maximum() -> None:
    assert output_limit("anthropic:claude-sonnet-4-5", 2_000) == 2_000
    assert output_limit("anthropic:claude-sonnet-4-5", 1_000_000) == 64_000


def test_an_unknown_model_gets_the_conservative_default_unless_a_limit_is_given() -> None:
    assert output_limit("openai-compatible:llama3:8b") == DEFAULT_OUTPUT_LIMIT == 4_096
    assert output_limit("openai-compatible:qwen3-32b", 16_000) == 16_000  # the operator knows their server


@pytest.mark.parametrize("value", [0, -5, "lots"])
def test_a_profile_output_limit_that_is_not_a_positive_number_is_one_sentence_naming_it(tmp_path: Path,
                                                                                       value: object) -> None:
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump({"model": "openai:gpt-4.1", "max_output_tokens": value}),
                                           encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_profile(str(tmp_path))
    message = str(caught.value)
    assert "max_output_tokens" in message and "\n" not in message


def test_a_profile_without_an_output_limit_leaves_each_model_its_own(tmp_path: Path) -> None:
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump({"model": "openai:gpt-4.1"}), encoding="utf-8")
    assert load_profile(str(tmp_path)).max_output_tokens is None
