"""`hermes-gateway skills stats`: how each saved skill is used, from its library's usage log.

    hermes-gateway skills stats [--bot NAME] [--json]

Per skill: uses (turns that loaded it), successes (uses that neither errored nor drew a correction), last
use, and the estimated tool calls saved per use (see `hermes_engine.skills.usage`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from hermes_gateway.cli.curator import library_bots, skills_root

if TYPE_CHECKING:
    from hermes_engine.skills.usage import SkillUsage

app = typer.Typer(rich_markup_mode=None,
                  add_completion=False, no_args_is_help=True, help="Saved skills and how they are used.")


@app.callback()
def skills() -> None:
    """Saved skills and how they are used."""


def _usages(library_root: Path) -> list[tuple[str, SkillUsage]]:
    from hermes_engine.skills.files import FileSkillLibrary
    from hermes_engine.skills.usage import UsageLog, ranked

    names = [s.name for s in FileSkillLibrary(library_root).list_sync()]
    return ranked(UsageLog.for_library(library_root).all(), names)


def _as_dict(name: str, usage: SkillUsage) -> dict[str, Any]:
    saved = usage.calls_saved_per_use
    per_use = usage.calls_per_use
    return {"name": name, "uses": usage.turns, "successes": usage.successes, "last_used": usage.last_used,
            "tool_calls_per_use": None if per_use is None else round(per_use, 2),
            "baseline_tool_calls": usage.baseline_calls,
            "tool_calls_saved_per_use": None if saved is None else round(saved, 2)}


@app.command()
def stats(bot: str | None = typer.Option(None, "--bot", help="Bot whose skills to show (default: all)."),
          as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Uses, successes, last use and tool calls saved per use of every saved skill."""
    from hermes_engine.skills.library import bot_library_dir
    from hermes_engine.skills.usage import describe

    root = skills_root()
    report = {name: _usages(bot_library_dir(root, name)) for name in library_bots(root, bot)}
    if as_json:
        typer.echo(json.dumps({b: [_as_dict(n, u) for n, u in rows] for b, rows in report.items()}, indent=1))
        return
    if not any(report.values()):
        typer.echo(f"No skills saved under {root}.")
        return
    for name, rows in report.items():
        if rows:
            typer.echo(f"[{name}] {len(rows)} skill(s)")
            typer.echo("\n".join(f"  {describe(n, u)}" for n, u in rows))


if __name__ == "__main__":  # pragma: no cover
    app()
