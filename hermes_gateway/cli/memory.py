"""`hermes-gateway memory …`: look at, hand-edit and export a person's memory documents.

Documents live where the gateway keeps them (`HERMES_STATE_BACKEND`): under `<HERMES_HOME>/memories`
(HERMES_HOME from the environment, see `load_settings`), or in the database.
PERSON is a person id or `platform:user_id` (see `hermes_gateway.cli.people`). `edit` opens $VISUAL/$EDITOR
on a copy, then saves it atomically under the store's lock, refusing if the bot changed the document
meanwhile, and warns about entries the security scan would block (they stay saved, but the prompt shows
them as `[blocked entry: <rule>]`). A document that cannot be read is reported as such and never edited.
"""

import asyncio
import json
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from hermes_engine.config import MemorySettings
from hermes_engine.memory.store import (
    FILE_NAMES,
    FileMemoryStore,
    MemoryOwner,
    MemoryStore,
    UnreadableDocument,
    blocked_placeholder,
    format_entries,
    parse_entries,
    usage_text,
    used_chars,
)
from hermes_engine.policy.security import scan_text
from hermes_engine.secrets import redact
from hermes_gateway.cli.people import PERSON_HELP, person_id, settings

app = typer.Typer(rich_markup_mode=None,
                  help="Inspect and edit what the agent remembers about a person.", no_args_is_help=True)


class Target(StrEnum):
    memory = "memory"
    user = "user"


@dataclass
class _Memory:
    """The gateway's memory store, how to run a call on it, and where a document lives (for messages)."""

    store: MemoryStore
    run: Callable[[Coroutine[Any, Any, Any]], Any]
    where: Callable[[MemoryOwner, str], str]


@contextmanager
def _memory() -> Iterator[_Memory]:
    config = settings()
    if not config.state_in_database:
        files = FileMemoryStore.for_home(config.home)
        yield _Memory(files, asyncio.run, lambda owner, target: str(files.path(owner, target)))
        return
    from hermes_engine.memory.database import DatabaseMemoryStore
    from hermes_gateway.cli.state import store_on_thread

    with store_on_thread(config.db_url, create=False) as (db, loop):
        store = DatabaseMemoryStore(db, db)
        yield _Memory(store, lambda call: asyncio.run_coroutine_threadsafe(call, loop).result(),
                      lambda owner, target: f"(in the database: {store.path(owner, target)})")


def _read(memory: _Memory, owner: MemoryOwner, target: str) -> list[str] | str:
    """The entries, or why the document cannot be read."""
    try:
        return list(memory.run(memory.store.read(owner, target)))
    except UnreadableDocument as exc:
        return exc.reason


def _limit(target: str) -> int:
    limits = MemorySettings()
    return limits.user_chars if target == "user" else limits.memory_chars


def _blocked(entries: list[str]) -> list[tuple[int, list[str]]]:
    out = []
    for i, entry in enumerate(entries):
        findings = scan_text(entry, kind="memory")
        if findings:
            out.append((i, list(dict.fromkeys(f.rule for f in findings))))
    return out


@app.command()
def show(person: str = typer.Argument(..., help=PERSON_HELP)) -> None:
    """Print MEMORY.md and USER.md of a person, entries numbered, blocked ones marked."""
    owner = MemoryOwner.person(person_id(person))
    with _memory() as memory:
        found = {target: _read(memory, owner, target) for target in ("memory", "user")}
    for target, entries in found.items():
        if isinstance(entries, str):
            typer.echo(f"== {FILE_NAMES[target]} cannot be read ({entries}) {memory.where(owner, target)}\n")
            continue
        typer.echo(f"== {FILE_NAMES[target]} [{usage_text(used_chars(entries), _limit(target))}] "
                   f"{memory.where(owner, target)}")
        if not entries:
            typer.echo("(empty)")
        blocked = dict(_blocked(entries))
        for i, entry in enumerate(entries):
            mark = f"  !! blocked in prompts ({', '.join(blocked[i])})" if i in blocked else ""
            typer.echo(f"{i + 1}. " + entry.replace("\n", "\n   ") + mark)
        typer.echo("")


@app.command()
def edit(person: str = typer.Argument(..., help=PERSON_HELP),
         target: Target = typer.Option(Target.memory, "--target", "-t", help="Which document to edit.")) -> None:
    """Open $EDITOR on a person's MEMORY.md (or USER.md with --target user); each entry ends with a § line."""
    owner = MemoryOwner.person(person_id(person))
    with _memory() as memory:
        _edit(memory, owner, target.value)


def _edit(memory: _Memory, owner: MemoryOwner, name: str) -> None:
    store = memory.store
    original = _read(memory, owner, name)
    if isinstance(original, str):
        typer.echo(f"Error: {FILE_NAMES[name]} cannot be read ({original}); fix or remove "
                   f"{memory.where(owner, name)} by hand.", err=True)
        raise typer.Exit(1)
    workdir = Path(tempfile.mkdtemp(prefix="hermes-memory-"))
    copy = workdir / FILE_NAMES[name]
    copy.write_text(format_entries(original), encoding="utf-8")
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        status = subprocess.run([*shlex.split(editor), str(copy)], check=False).returncode
    except OSError as exc:
        typer.echo(f"Error: could not start the editor {editor!r}: {exc}. Set $EDITOR.", err=True)
        raise typer.Exit(1) from None
    if status != 0:
        typer.echo(f"The editor exited with status {status}; nothing was saved (your copy: {copy}).", err=True)
        raise typer.Exit(1)
    edited = parse_entries(copy.read_text(encoding="utf-8"))
    if edited == original:
        typer.echo("No changes.")
        _cleanup(copy)
        return

    async def save() -> bool:
        async with store.lock(owner):
            try:
                if await store.read(owner, name) != original:
                    return False
            except UnreadableDocument:
                return False
            await store.write(owner, name, edited)
            return True

    if not memory.run(save()):
        typer.echo(f"{FILE_NAMES[name]} changed while you were editing; nothing was saved. Your edited copy is "
                   f"at {copy}.", err=True)
        raise typer.Exit(1)
    _cleanup(copy)
    limit = _limit(name)
    typer.echo(f"Saved {len(edited)} entries to {memory.where(owner, name)} "
               f"[{usage_text(used_chars(edited), limit)}].")
    if used_chars(edited) > limit:
        typer.echo(f"Warning: over the limit of {limit:,} chars; the agent will be asked to consolidate and prompts "
                   f"cut the document at {2 * limit:,} chars.", err=True)
    for index, rules in _blocked(edited):
        typer.echo(f"Warning: entry {index + 1} fails the security scan ({', '.join(rules)}); prompts will show it "
                   f"as {blocked_placeholder(rules)} instead of its text.", err=True)


def _cleanup(copy: Path) -> None:
    try:
        copy.unlink()
        copy.parent.rmdir()
    except OSError:
        pass


@app.command("export")
def export(person: str = typer.Argument(..., help=PERSON_HELP)) -> None:
    """Print both documents of a person as JSON."""
    pid = person_id(person)
    owner = MemoryOwner.person(pid)
    data: dict[str, object] = {"person_id": pid}
    with _memory() as memory:
        found = {target: _read(memory, owner, target) for target in ("memory", "user")}
    for target, entries in found.items():
        if isinstance(entries, str):
            data[target] = {"file": FILE_NAMES[target], "unreadable": entries}
            continue
        data[target] = {
            "file": FILE_NAMES[target],
            "entries": entries,
            "usage": usage_text(used_chars(entries), _limit(target)),
            "blocked": [{"entry": i + 1, "rules": rules} for i, rules in _blocked(entries)],
        }
    typer.echo(redact(json.dumps(data, ensure_ascii=False, indent=2)))  # an export leaves no secret in clear
