"""`hermes-gateway curator run|report`: the typer app mounted as `hermes-gateway curator`."""

from __future__ import annotations

from pathlib import Path

from home_kit import service_home
from typer.testing import CliRunner

from hermes_engine.errors import ConfigError
from hermes_engine.skills.contract import SkillChange
from hermes_engine.skills.files import FileSkillLibrary
from hermes_gateway.cli.curator import app

SKILL = "---\nname: {n}\ndescription: Do {n}.\n---\n\n## When to use\nx\n\n## Steps\n1. y\n\n## Pitfalls\n- z\n"


def test_curator_cli_runs_and_reports(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HERMES_HOME", str(service_home(tmp_path)))
    library = FileSkillLibrary(tmp_path / "skills" / "helper")
    library.apply_sync(SkillChange("create", "rotate-logs", content=SKILL.format(n="rotate-logs")))
    runner = CliRunner()

    assert "has not run yet" in runner.invoke(app, ["report"]).output
    dry = runner.invoke(app, ["run", "--dry-run", "--bot", "helper", "--no-llm"])
    assert dry.exit_code == 0, dry.output
    assert "[helper] Curator dry run (ok): 1 skills" in dry.output
    assert library.backups() == []

    def no_key(spec: str, **_: object) -> None:
        raise ConfigError("ANTHROPIC_API_KEY is not set: export it or choose another model with HERMES_MODEL.")

    monkeypatch.setattr("hermes_engine.providers.registry.make_provider", no_key)
    real = runner.invoke(app, ["run"])  # no API key: the LLM pass is skipped, the run still happens
    assert real.exit_code == 0, real.output
    assert "LLM pass skipped: ANTHROPIC_API_KEY is not set" in real.output
    assert len(library.backups()) == 1
    report = runner.invoke(app, ["report", "--bot", "helper"])
    assert report.exit_code == 0 and "# Skill curator report — helper" in report.output
    assert "LLM pass: skipped: no model configured" in report.output
    assert '"status": "ok"' in runner.invoke(app, ["report", "--json"]).output
