"""`hermes-gateway curator …`: run the skill curator or show its latest report from the shell.

    hermes-gateway curator run [--dry-run] [--bot NAME] [--no-llm]
    hermes-gateway curator report [--bot NAME] [--json]
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer

from hermes_engine.config import load_settings
from hermes_engine.errors import HermesError
from hermes_gateway.cli.home import checked_settings

app = typer.Typer(rich_markup_mode=None, add_completion=False, no_args_is_help=True,
                  help="Skill curator: mark stale skills, archive unused ones, merge overlaps.")


def skills_root() -> Path:
    """`<HERMES_HOME>/skills`; refused, with what to do instead, when the libraries live in the database
    (reading the folders would show an old copy, and curating them would change nothing the bot uses)."""
    settings = checked_settings()
    if settings.state_in_database:
        typer.echo("The skill libraries live in the database (HERMES_STATE_BACKEND); use /curator run | report "
                   "and /skills in a chat with the bot as an admin.", err=True)
        raise typer.Exit(2)
    return Path(settings.home) / "skills"


def library_bots(root: Path, bot: str | None) -> list[str]:
    """`[bot]`, or every bot with a skill library under `root` (the skills root)."""
    if bot:
        return [bot]
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def _provider(bot: str | None, no_llm: bool):  # type: ignore[no-untyped-def]
    """The model for the LLM pass: the bot profile's primary model (HERMES_MODEL overrides).
    None (the pass is skipped, and the report says so) when it cannot be built, e.g. no API key."""
    if no_llm:
        return None
    from hermes_engine.config import load_profile
    from hermes_engine.providers.registry import make_provider

    try:
        try:
            profile = load_profile(bot)
        except HermesError:
            profile = load_profile(None)
        return make_provider(profile.models(load_settings())[0])
    except HermesError as exc:
        typer.echo(f"curator: LLM pass skipped: {exc}", err=True)
        return None


@app.command()
def run(dry_run: bool = typer.Option(False, "--dry-run", help="Report what would change; change nothing."),
        bot: str | None = typer.Option(None, "--bot", help="Bot whose library to curate (default: all)."),
        no_llm: bool = typer.Option(False, "--no-llm", help="Skip the LLM merge pass.")) -> None:
    """Run the curator once: backup, stale/archive pass, LLM merge pass, report."""
    from hermes_engine.skills.curator import Curator
    from hermes_engine.skills.library import FileSkillLibrary, bot_library_dir

    try:
        root = skills_root()
        bots = library_bots(root, bot)
        if not bots:
            typer.echo(f"No skill libraries under {root}.")
            raise typer.Exit(0)
        provider = _provider(bot, no_llm)
    except HermesError as exc:
        typer.echo(f"curator: {exc}", err=True)
        raise typer.Exit(2)

    async def main() -> int:
        failures = 0
        try:
            for name in bots:
                curator = Curator(FileSkillLibrary(bot_library_dir(root, name)), provider=provider,
                                  llm_pass=not no_llm, bot=name)
                try:
                    report = await curator.run(dry_run=dry_run)
                except Exception as exc:  # the report (status failed) is written; go on with the next bot
                    typer.echo(f"[{name}] curator failed: {exc}", err=True)
                    failures += 1
                    continue
                typer.echo(f"[{name}] {report.summary()}")
                typer.echo(f"[{name}] report: {curator.root / report.files.get('markdown', '')}")
        finally:
            if provider is not None:
                await provider.aclose()
        return failures

    if asyncio.run(main()):
        raise typer.Exit(1)


@app.command()
def report(bot: str | None = typer.Option(None, "--bot", help="Bot whose report to show (default: all)."),
           as_json: bool = typer.Option(False, "--json", help="Print the JSON report.")) -> None:
    """Print the latest curator report."""
    from hermes_engine.skills.curator import latest_report
    from hermes_engine.skills.library import bot_library_dir

    root = skills_root()
    shown = 0
    for name in library_bots(root, bot):
        latest = latest_report(bot_library_dir(root, name))
        if latest is None:
            continue
        shown += 1
        typer.echo(json.dumps(latest.to_dict(), indent=1) if as_json else latest.to_markdown())
    if not shown:
        typer.echo("The curator has not run yet.")


if __name__ == "__main__":  # pragma: no cover
    app()
