"""Every help page of the command line reads as a person would type the command: a flag is shown as
`--x` (or `--x / --no-x`), never with a type after it as if it took a value. The pages are read in this
process (typer's `CliRunner`); the installed console script shows its own once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from hermes_gateway.cli.main import app


def _paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command under `command` (typer's own click: a group is what lists commands)."""
    found = [path]
    if hasattr(command, "list_commands"):
        ctx = command.context_class(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None
            found += _paths(sub, (*path, name))
    return found


EVERY_COMMAND = _paths(typer.main.get_command(app))


def test_every_command_and_subcommand_is_listed():
    assert ("pairing", "approve") in EVERY_COMMAND and ("kanban", "list") in EVERY_COMMAND
    assert len(EVERY_COMMAND) > 30


@pytest.mark.parametrize("path", EVERY_COMMAND, ids=lambda p: " ".join(p) or "hermes-gateway")
def test_help_shows_flags_without_a_type(path):
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    assert "<bool>" not in result.output
    assert "--help" in result.output and "Show this message and exit." in result.output


def test_the_installed_command_shows_its_help_page_listing_every_command():
    done = subprocess.run([str(Path(sys.executable).with_name("hermes-gateway")), "--help"], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "120"})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("Usage: hermes-gateway ") and "<bool>" not in done.stdout
    listed = {line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ") and line.split()}
    assert {path[0] for path in EVERY_COMMAND if len(path) == 1} <= listed, done.stdout
