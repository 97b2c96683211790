"""`hermes-gateway`: chat in the terminal, run the gateway, check the configuration.

The composition root: it lives beside the adapters because it wires them to the engine."""

from __future__ import annotations

import asyncio
import os
import sys

import typer

from hermes_engine import __version__
from hermes_engine.config import load_profile, load_settings
from hermes_engine.errors import ConfigError, HermesError
from hermes_gateway.cli.lazy import LazyGroups

# Plain help pages on every command (each `typer.Typer` of this package says so): typer's Rich pages put a
# type after each flag (`--dry-run <bool>`), as if it took a value; the plain ones show `--dry-run`.
app = typer.Typer(cls=LazyGroups, rich_markup_mode=None, add_completion=False, no_args_is_help=True,
                  help="Hermes Gateway: a self-improving agent for Telegram, Slack and Discord.")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"hermes-gateway {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                               help="Print the version and exit.")) -> None:
    """Hermes Gateway."""
    from hermes_gateway.dumpable import make_non_dumpable

    make_non_dumpable()  # from here on no other process of its user reads its environment or memory


def _fail(exc: Exception) -> None:
    typer.echo(f"hermes-gateway: {exc}", err=True)
    raise typer.Exit(2)


def _setup_logging(level: str, to_stderr: bool = True) -> None:
    """Log lines to stderr (or stdout), quiet and redacted; text or JSON lines (see hermes_gateway.logs)."""
    from hermes_gateway.logs import setup_logging

    setup_logging(level, stream=sys.stderr if to_stderr else sys.stdout, environ=os.environ)


@app.command()
def chat(bot: str | None = typer.Option(None, "--bot", help="Bot profile folder or name under ./bots.")) -> None:
    """Chat with the agent in the terminal (streamed). Reads one message per line when piped; exits with
    status 1 when a turn failed, so a script notices."""
    from adapters.console import chat as console_chat
    from adapters.console_approval import ConsoleAsker
    from hermes_gateway import preflight
    from hermes_gateway.cli.turns import FailedTurns
    from hermes_gateway.wiring import build_features, build_gateway, open_store

    failed = FailedTurns()

    async def main() -> None:
        settings, [profile] = await preflight.check(load_settings(), [load_profile(bot)], serving=False)
        store = open_store(settings)
        await store.init()
        # The chat waits for each answer before reading on, so an approval question may read the next line.
        import getpass

        asker = ConsoleAsker(sys.stdin, sys.stdout, operator_id=getpass.getuser())
        features = [*build_features(settings, profile, asker=asker, store=store), failed]
        gateway = build_gateway(settings, profile, store, features=features)
        try:
            await console_chat(gateway)
        finally:
            await gateway.stop()
            await store.close()

    try:
        _setup_logging("WARNING")
        asyncio.run(main())
    except (ConfigError, HermesError) as exc:
        _fail(exc)
    except KeyboardInterrupt:
        pass
    if failed.count:
        typer.echo(f"hermes-gateway: {failed.count} turn(s) failed (see the answers above).", err=True)
        raise typer.Exit(1)


@app.command()
def run(bot: list[str] = typer.Option(None, "--bot", help="Bot profile(s) to serve; repeatable.")) -> None:
    """Start the gateway: every configured platform adapter, the HTTP server and the scheduler."""
    from hermes_gateway.serve import serve

    try:
        settings = load_settings()
        _setup_logging(settings.log_level)
        asyncio.run(serve(settings, [load_profile(b) for b in bot] if bot else [load_profile(None)]))
    except (ConfigError, HermesError) as exc:
        _fail(exc)
    except KeyboardInterrupt:
        pass


@app.command()
def doctor(bot: list[str] = typer.Option(None, "--bot", help="Bot profile(s) to check, as `run` takes them; "
                                                            "repeatable."),
           service_user: str | None = typer.Option(None, "--service-user", help="Try HERMES_HOME (and a SQLite "
                                                   "database's folder) as this user, the one the service runs as "
                                                   "(needs root).")) -> None:
    """Make every check `run` makes, without creating anything, and say what is missing."""
    from hermes_gateway.cli.doctor import diagnose

    async def main() -> int:
        problems = 0
        async for finding in diagnose(bot or [], service_user):
            typer.echo(f"{finding.level.upper() if finding.level != 'ok' else 'ok':6}{finding.text}")
            problems += finding.level == "fix"
        return problems

    raise typer.Exit(1 if asyncio.run(main()) else 0)


@app.command("migrate-files")
def migrate_files(bot: list[str] = typer.Option(None, "--bot", help="Skill libraries to move (repeatable); "
                                                                     "default: every one under the home.")) -> None:
    """Move the home's memory, USER.md, pairing and skills into the database (idempotent; files stay in place)."""
    from hermes_gateway.cli.migrate_files import migrate_home
    from hermes_gateway.wiring import open_store

    def resolve_bot(name: str) -> str:
        """`--bot` as `run` takes it (a profile folder or a name under ./bots), else a library's own name."""
        try:
            return load_profile(name).name
        except ConfigError:
            return name

    async def main() -> list[str]:
        settings = load_settings()
        store = open_store(settings)
        await store.init()
        try:
            lines = (await migrate_home(store, settings.home, [resolve_bot(b) for b in bot] if bot else None)).lines()
        finally:
            await store.close()
        if not settings.state_in_database:
            lines.append("Note: this gateway reads memory, pairing and skills from files (HERMES_STATE_BACKEND or "
                         "SQLite); set HERMES_STATE_BACKEND=database to use what was moved.")
        return lines

    try:
        for line in asyncio.run(main()):
            typer.echo(line)
    except (ConfigError, HermesError) as exc:
        _fail(exc)


# The command groups, each imported only when it is run or listed (`cli/lazy.py`): `run` loads none of them.
LazyGroups.GROUPS = {
    "memory": ("hermes_gateway.cli.memory", "Show, edit or export what the agent remembers about a person."),
    "curator": ("hermes_gateway.cli.curator", "Run the skill curator or read its report."),
    "skills": ("hermes_gateway.cli.skills", "Saved skills: uses, successes, last use, tool calls saved."),
    "pairing": ("hermes_gateway.cli.pairing", "Approve people who asked for access with a pairing code."),
    "export": ("hermes_gateway.cli.export", "Export conversations."),
    "dashboard": ("hermes_gateway.cli.dashboard", "The web dashboard: a one-time sign-in link."),
    "security": ("hermes_gateway.cli.security", "Scan memory and skill files; approve content held for an admin."),
    "mcp": ("hermes_gateway.cli.mcp", "Start a bot profile's MCP servers and list their tools."),
    "people": ("hermes_gateway.cli.people", "List people with their platform accounts, or forget a person."),
    "kanban": ("hermes_gateway.cli.kanban", "Show the kanban board; move or retry a card."),
    "inbox": ("hermes_gateway.cli.inbox", "Messages waiting for an answer, and events rejected as unreadable."),
    "jobs": ("hermes_gateway.cli.jobs", "Reminders and scheduled jobs: list, show, pause, resume, remove or run now."),
}


def main() -> None:
    app()


if __name__ == "__main__":
    main()
