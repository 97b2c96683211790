"""Command groups of `hermes-gateway` imported only when they are asked for.

Each group's module pulls in what its commands need (the memory store, the kanban board, the scheduler's
phrases, …): importing every one of them for `hermes-gateway run` cost a fifth of a second and a few MB
before the first reply. Mounted here by name, a group's module is imported when click looks the name up,
that is when the group is run or a help page lists it.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer import _click
from typer.core import TyperGroup
from typer.main import get_group_from_info
from typer.models import TyperInfo


class LazyGroups(TyperGroup):
    """The root command: its own commands, and the groups of `GROUPS` (name → module, help), each turned
    into a click group the first time it is looked up, exactly as `Typer.add_typer` would have made it."""

    GROUPS: dict[str, tuple[str, str]] = {}

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return [*self.commands, *(name for name in self.GROUPS if name not in self.commands)]  # as declared

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.GROUPS:
            group = load_group(cmd_name, *self.GROUPS[cmd_name], rich_markup_mode=self.rich_markup_mode)
            if group is None:
                return None
            self.commands[cmd_name] = group
        return self.commands.get(cmd_name)


def load_group(name: str, module: str, help_text: str, **options: Any) -> _click.Command | None:
    """The click group of `module`'s `app`; None when the module cannot be imported (an optional extra
    that is not installed), so the group is simply not there."""
    try:
        sub = importlib.import_module(module).app
    except ImportError:
        return None
    assert isinstance(sub, typer.Typer)
    return get_group_from_info(TyperInfo(sub, name=name, help=help_text), pretty_exceptions_short=True,
                               suggest_commands=True, **options)
