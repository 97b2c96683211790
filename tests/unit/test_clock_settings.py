"""A profile's `clock:` settings: their defaults, what YAML may say, and what it may not."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hermes_engine.config import BotProfile, load_profile
from hermes_engine.errors import ConfigError


def test_the_defaults_bound_jobs_and_keep_tasks_from_making_jobs() -> None:
    clock = BotProfile().clock
    assert clock.max_jobs_per_person == 25
    assert clock.min_interval == timedelta(minutes=5)
    assert clock.allow_jobs_from_tasks is False
    assert clock.task_toolsets == ["core", "web"]


def test_a_profile_sets_them_in_yaml_with_the_interval_in_seconds_or_iso(tmp_path) -> None:
    (tmp_path / "profile.yaml").write_text("clock:\n  max_jobs_per_person: 3\n  min_interval: PT15M\n"
                                           "  allow_jobs_from_tasks: true\n  task_toolsets: [core]\n")
    clock = load_profile(str(tmp_path)).clock
    assert (clock.max_jobs_per_person, clock.min_interval, clock.allow_jobs_from_tasks, clock.task_toolsets) == (
        3, timedelta(minutes=15), True, ["core"])
    assert BotProfile(clock={"min_interval": 600}).clock.min_interval == timedelta(minutes=10)


@pytest.mark.parametrize("yaml", ["clock:\n  min_interval: 30\n", "clock:\n  max_jobs_per_person: 0\n",
                                  "clock:\n  every: 3\n"])
def test_a_setting_out_of_bounds_is_one_sentence_naming_it(tmp_path, yaml: str) -> None:
    (tmp_path / "profile.yaml").write_text(yaml)
    with pytest.raises(ConfigError, match=r"^Setting 'clock\.\w+' in .* is invalid: "):
        load_profile(str(tmp_path))
