"""Skill usage statistics: successes, tool calls per use against the baseline of the work a skill was learned
from, and `hermes-gateway skills stats` showing them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from home_kit import service_home
from skills_kit import used_library
from typer.testing import CliRunner

from hermes_engine.skills.usage import UsageLog, describe
from hermes_gateway.cli.skills import app

AT = datetime(2026, 11, 30, 9, 15, tzinfo=UTC)


def test_calls_per_use_count_against_the_first_baseline_a_skill_was_given(tmp_path: Path):
    log = UsageLog(tmp_path / ".usage.json")
    log.set_baseline(["rotate-logs"], 11)
    log.set_baseline(["rotate-logs"], 99)  # it keeps the work it was learned from
    log.record_turn({"rotate-logs": 1}, calls=4, at=AT)
    log.record_turn({"rotate-logs": 1}, calls=6, failed=True, at=AT)
    log.set_baseline(["renew-certs"], 7)

    rotate, certs = log.get("rotate-logs"), log.get("renew-certs")
    assert (rotate.baseline_calls, rotate.calls_per_use, rotate.calls_saved_per_use) == (11, 5.0, 6.0)
    assert (rotate.turns, rotate.successes) == (2, 1)
    assert certs.baseline_calls == 7 and certs.calls_saved_per_use is None  # not used yet
    assert describe("rotate-logs", rotate) == (
        "rotate-logs: 2 uses, 1 ok, last used 2026-11-30 09:15 UTC, 6.0 tool calls saved per use")
    assert describe("renew-certs", certs) == (
        "renew-certs: 0 uses, 0 ok, never used, tool calls saved per use: unknown")


def test_a_correction_takes_a_use_out_of_the_successes(tmp_path: Path):
    log = UsageLog(tmp_path / ".usage.json")
    log.record_turn({"rotate-logs": 1}, calls=2, at=AT)
    log.record_correction(["rotate-logs"], at=AT)
    assert log.get("rotate-logs").successes == 0


def test_skills_stats_lists_uses_successes_last_use_and_calls_saved(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HERMES_HOME", str(service_home(tmp_path)))
    runner = CliRunner()
    assert "No skills saved under" in runner.invoke(app, ["stats"]).output

    used_library(tmp_path / "skills" / "helper", baseline=10, calls=[4, 5], at=AT)

    shown = runner.invoke(app, ["stats"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines() == [
        "[helper] 2 skill(s)",
        "  rotate-logs: 2 uses, 2 ok, last used 2026-11-30 09:15 UTC, 5.5 tool calls saved per use",
        "  renew-certs: 0 uses, 0 ok, never used, tool calls saved per use: unknown"]
    data = json.loads(runner.invoke(app, ["stats", "--bot", "helper", "--json"]).output)
    assert data["helper"][0] == {"name": "rotate-logs", "uses": 2, "successes": 2,
                                 "last_used": "2026-11-30T09:15:00+00:00", "tool_calls_per_use": 4.5,
                                 "baseline_tool_calls": 10, "tool_calls_saved_per_use": 5.5}
