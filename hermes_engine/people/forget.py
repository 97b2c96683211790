"""Forget me: a person (`/forget`) or an operator (`hermes-gateway people forget`) deletes everything kept about
that person.

What is kept about a person, and where it goes:
- the database (`PeopleStore.forget_person`): the person and everyone merged into them, their accounts and
  /link codes, their own conversations (messages, summaries, goals), their words in conversations shared
  with others (blanked in place), the inbox rows holding their messages, their usage counts, the kanban
  cards their requests made (archived, wiped), and their reminders and the time zone they chose;
- files under HERMES_HOME: their memory (`memories/<person id>/`: MEMORY.md, USER.md, proposed changes), the
  attachment folders of their own conversations and the attachment files their other messages brought, their
  DM workspace of every bot (`workspace/folders.py`: under the workspaces' root, or in the old layout
  `workspaces/<bot>/person-<id>/`; a group's workspace is the group's and stays), and their pairing approval
  (`pairing.json`).
The database goes first, in one transaction: if it fails nothing is half-forgotten there, and the files that
follow are found from what it deleted. Confirmation is a one-time code the person must send back, so a
stray `/forget` (or someone else's message quoting it) deletes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hermes_engine.attachments.blobs import blob_key
from hermes_engine.attachments.folders import ATTACHMENTS, attachment_folder_name
from hermes_engine.memory.documents import MemoryOwner, MemoryStore
from hermes_engine.memory.store import FileMemoryStore
from hermes_engine.memory.tool import MEMORY
from hermes_engine.policy.pairing import ALPHABET, Pairing
from hermes_engine.ports.blobs import AttachmentBlobs
from hermes_engine.ports.commands import CommandContext, CommandRegistry
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.host import Host
from hermes_engine.ports.session import SessionHandle
from hermes_engine.ports.storage import ForgottenPerson, Store
from hermes_engine.voice.state import AREA as VOICE
from hermes_engine.workspace.folders import WorkspaceFolders
from hermes_engine.workspace.space import WorkspaceError, scope_name

log = logging.getLogger(__name__)

CODE_LENGTH = 6
CODE_TTL_SECONDS = 600

EXPLAIN = """This deletes everything I keep about you, for good:
- what I remember about you (notes and profile, and changes waiting for you),
- our conversations and your messages (in group chats your messages are blanked; the others keep theirs),
- files you sent me or made with me in our chats, tasks you handed me, your reminders and time zone, your
  /link codes and linked accounts, and your access approval if you were paired.
I will not recognise you afterwards; if you write again you start as someone new.

To go ahead, send `/forget {code}` within 10 minutes."""


@dataclass(frozen=True)
class ForgetOutcome:
    record: ForgottenPerson
    memory_folders: int
    attachment_files: int
    approvals: int
    workspaces: int = 0
    problems: tuple[str, ...] = ()  # files that could not be removed (the database part is done regardless)

    def summary(self) -> str:
        r = self.record
        text = (f"Deleted {len(r.person_ids)} person record(s), {len(r.accounts)} account(s), {r.sessions} "
                f"conversation(s), {r.messages} message(s), {r.goals} goal(s), {r.inbound} inbox row(s), "
                f"{r.link_codes} link code(s), {r.cards} kanban card(s), {r.jobs} reminder(s), "
                f"{self.memory_folders} memory folder(s), "
                f"{self.workspaces} workspace(s), {self.attachment_files} attachment(s) and {self.approvals} "
                f"pairing approval(s).")
        if self.problems:
            text += " Could not remove: " + "; ".join(self.problems) + "."
        return text


async def forget_person(store: Store, home: Path, person_id: int, *,
                        memory: MemoryStore | None = None, pairing: Pairing | None = None,
                        workspaces: Path | None = None, blobs: AttachmentBlobs | None = None) -> ForgetOutcome | None:
    """Delete everything kept about `person_id` (see the module docstring); None for an unknown person.

    `workspaces` is the workspaces' root (`Settings.workspaces`; None: under the home). `blobs`: where the
    attachments are kept for every replica (by default the store, when it shares blobs: PostgreSQL).

    `memory` is the running gateway's memory store, so a memory write in flight finishes before the files go;
    without it the files under `home` are used directly. `pairing` likewise: the gateway's, else `pairing.json`
    under `home`."""
    record = await store.forget_person(person_id)
    if record is None:
        return None
    memory = memory or FileMemoryStore.for_home(home)
    problems: list[str] = []
    folders = 0
    for pid in record.person_ids:
        try:
            folders += await memory.erase(MemoryOwner.person(pid))
        except OSError as exc:
            problems.append(f"memory of person {pid} ({exc.strerror or exc})")
    for key in record.session_keys:  # a conversation's voice switch (`voice/state.py`) goes with it
        await store.delete_documents(VOICE, key)
    removed_files = await asyncio.to_thread(_remove_attachments, Path(home) / ATTACHMENTS, record, problems)
    if blobs is None and isinstance(store, AttachmentBlobs) and store.blobs_shared:
        blobs = store
    if blobs is not None:
        removed_files |= await _remove_blobs(blobs, record)
    files = len(removed_files)
    removed = await asyncio.to_thread(_remove_workspaces, WorkspaceFolders.of(home, workspaces), record, problems)
    pairing = pairing or Pairing.for_home(home)
    approvals = 0
    for account in record.accounts:
        try:
            approvals += await asyncio.to_thread(pairing.revoke, account.platform, account.user_id)
        except OSError as exc:
            problems.append(f"pairing approval of {account.platform} user {account.user_id} ({exc})")
    return ForgetOutcome(record, folders, files, approvals, removed, tuple(problems))


def _remove_workspaces(folders: WorkspaceFolders, record: ForgottenPerson, problems: list[str]) -> int:
    """Each bot's DM workspace of the forgotten people, never through a symlink."""
    removed = 0
    for pid in record.person_ids:
        try:
            found = folders.of_scope(scope_name(chat_kind="dm", person_id=pid, session_key=""))
        except WorkspaceError as exc:  # the naming key is damaged: the database part is done regardless
            problems.append(f"workspaces of person {pid} ({exc})")
            continue
        for folder in found:
            try:
                shutil.rmtree(folder)
                removed += 1
            except OSError as exc:
                problems.append(f"workspace {folder} ({exc.strerror or exc})")
    return removed


async def _remove_blobs(blobs: AttachmentBlobs, record: ForgottenPerson) -> set[str]:
    """The same files in the database's blob store (another replica's downloads among them): the deleted
    conversations' folders and the files recorded for the person's messages; their relative paths."""
    folders = [name for key in record.session_keys if (name := attachment_folder_name(key))]
    paths = [key for raw in record.attachment_paths if (key := blob_key(raw)) is not None]
    return {*await blobs.delete_blob_folders(folders), *await blobs.delete_blobs(paths)}


def _remove_attachments(root: Path, record: ForgottenPerson, problems: list[str]) -> set[str]:
    """Folders of the deleted conversations, and files recorded for their messages; never anything outside
    `root`, never through a symlink. The files' paths relative to `root`."""
    if not root.is_dir() or root.is_symlink():
        return set()
    base = root.resolve()
    removed: set[str] = set()
    for key in record.session_keys:
        name = attachment_folder_name(key)
        folder = root / name
        if not name or folder.is_symlink() or not folder.is_dir():
            continue
        try:
            found = {p.relative_to(root).as_posix() for p in folder.rglob("*") if not p.is_dir()}
            shutil.rmtree(folder)
            removed |= found
        except OSError as exc:
            problems.append(f"{folder} ({exc.strerror or exc})")
    for path in _inside(base, record.attachment_paths):
        try:
            path.unlink()
            removed.add(blob_key(path) or str(path))
        except FileNotFoundError:
            pass
        except OSError as exc:
            problems.append(f"{path} ({exc.strerror or exc})")
    return removed


def _inside(base: Path, paths: Iterable[str]) -> list[Path]:
    found = []
    for raw in paths:
        path = Path(raw)
        with contextlib.suppress(OSError, ValueError):
            if path.parent.resolve().is_relative_to(base) and not path.is_symlink() and path.is_file():
                found.append(path)
    return found


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


class ForgetFeature(Feature):
    """`/forget`: explains and hands out a one-time code; `/forget CODE` deletes, in a direct message only."""

    name = "forget"

    def __init__(self, clock: Callable[[], float] = time.monotonic, pairing: Pairing | None = None) -> None:
        self.clock = clock
        self.pairing = pairing  # where approvals live (None: pairing.json under the home)
        self.codes: dict[int, tuple[str, float]] = {}

    def register_commands(self, registry: CommandRegistry) -> None:
        registry.command("forget", "delete everything I keep about you (asks you to confirm)")(self.handle)

    async def handle(self, ctx: CommandContext) -> str:
        if str(ctx.message.chat_kind) != "dm":
            return "Send /forget to me in a direct message; it deletes everything I keep about you."
        given = ctx.args.strip().upper()
        if not given:
            code = new_code()
            self.codes[ctx.person_id] = (code, self.clock() + CODE_TTL_SECONDS)
            return EXPLAIN.format(code=code)
        code, expires = self.codes.get(ctx.person_id, ("", 0.0))
        if not code or self.clock() > expires or not secrets.compare_digest(given, code):
            return ("That is not the code I gave you, or it has expired; nothing was deleted. Send /forget for a new "
                    "one.")
        del self.codes[ctx.person_id]
        outcome = await self._forget(ctx)
        if outcome is None:
            return "I keep nothing about you."
        if outcome.problems:
            log.warning("forgetting person %s left files behind: %s", ctx.person_id, "; ".join(outcome.problems))
            return ("Done: I have deleted everything I kept about you, except some files that could not be "
                    "removed; the operator has been told.")
        return "Done: I have deleted everything I kept about you."

    async def _forget(self, ctx: CommandContext) -> ForgetOutcome | None:
        return await forget_in([ctx.host], ctx.person_id, pairing=self.pairing, also=(ctx.session.record.id,))


async def forget_in(hosts: Sequence[Host], person_id: int, *, pairing: Pairing | None,
                    also: Iterable[int] = ()) -> ForgetOutcome | None:
    """`forget_person` in a running process, whose gateways (`hosts`, the first of which owns the memory and
    home) may hold the person's conversations loaded: those only this person wrote in restart on a fresh record
    first, so nothing keeps pointing at a deleted one; shared ones reload without the person's words. `also`:
    sessions to look at besides the person's own (the one `/forget` was sent in)."""
    host = hosts[0]
    shared: list[tuple[Host, SessionHandle]] = []
    session_ids = {*also, *await host.store.export_session_ids(person_id=person_id)}
    for each in hosts:
        for session_id in session_ids:
            handle = each.session_by_id(session_id)
            if handle is None:
                continue
            await each.interrupt(handle)
            stored = await each.store.load_stored_messages(session_id)
            if all(m.person_id in (None, person_id) for m in stored if m.message.role == "user"):
                await each.new_session(handle)
            else:
                shared.append((each, handle))
    book = host.services.get(MEMORY)
    outcome = await forget_person(host.store, Path(host.settings.home), person_id,
                                  memory=book.store if book is not None else None,
                                  pairing=pairing, workspaces=host.settings.workspaces)
    for each, handle in shared:
        each.drop_session(handle.key)
    for each in hosts:
        each.forget_people()
    return outcome


__all__ = ["ForgetFeature", "ForgetOutcome", "attachment_folder_name", "forget_in", "forget_person"]
