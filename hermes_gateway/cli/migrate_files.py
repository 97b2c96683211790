"""`hermes-gateway migrate-files`: move a file-based home's memory, USER.md, pending proposals, pairing and
skill libraries (every file: SKILL.md, references/, scripts/, templates/, the archive, backups, the approval
queue, usage) into the database, so replicas on one database share them.

Idempotent: a document already in the database with the same content is counted as already there; one the
database holds with different content is kept as the database has it (the gateway may have written it
since) and reported; a file that cannot be read is reported and skipped. So a second run changes nothing
and says so, and a run that stopped half-way finishes. Pairing approvals and codes are merged: what the
file has and the database lacks is added. The files are left in place (nothing is renamed or deleted), so
the move can be checked and a return to files is possible; the gateway stops reading them once
`HERMES_STATE_BACKEND` is `database` (the default on PostgreSQL).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hermes_engine.memory.database import AREA as MEMORY_AREA
from hermes_engine.memory.documents import (
    FILE_NAMES,
    PENDING_FILE,
    format_entries,
    parse_entries,
    pending_items,
    pending_text,
)
from hermes_engine.memory.documents import UnreadableDocument as _Unreadable
from hermes_engine.policy.pairing import FILE_NAME as PAIRING_FILE
from hermes_engine.policy.pairing import PairingState
from hermes_engine.policy.pairing_db import AREA as PAIRING_AREA
from hermes_engine.policy.pairing_db import PATH as PAIRING_PATH
from hermes_engine.policy.pairing_db import parse_state, state_text
from hermes_engine.ports.storage import DocumentStore
from hermes_engine.skills.database import REVISION, area_of, encode, library_files
from hermes_engine.skills.library import bot_library_dir

MEMORY_DOCUMENTS = (*FILE_NAMES.values(), PENDING_FILE)


@dataclass
class MigrationReport:
    """What a run did, per kind of thing ("memory documents", "pairing approvals", ...)."""

    moved: Counter[str] = field(default_factory=Counter)
    already: Counter[str] = field(default_factory=Counter)
    kept: list[str] = field(default_factory=list)  # in the database with other content: left as it is
    skipped: list[str] = field(default_factory=list)  # files that could not be read

    @property
    def changed(self) -> bool:
        return bool(sum(self.moved.values()))

    def lines(self) -> list[str]:
        kinds = sorted(set(self.moved) | set(self.already))
        out = [f"{kind}: {self.moved[kind]} moved, {self.already[kind]} already in the database" for kind in kinds]
        if not kinds:
            out.append("No memory, USER.md, pairing or skill files were found.")
        out += [f"kept the database's copy (it differs from the file): {what}" for what in self.kept]
        out += [f"skipped (cannot be read): {what}" for what in self.skipped]
        if kinds and not self.changed:
            out.append("Nothing changed: everything was already in the database.")
        out.append("The files were left in place; nothing under the home was renamed or deleted.")
        return out


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise _Unreadable("not UTF-8 text") from None


def _pairing_text(file: Path) -> str | None:
    return None if not file.is_file() or file.is_symlink() else _read_text(file)


def _memory_files(root: Path) -> list[tuple[str, Path]]:
    """(database path, file) for every document under the memories folder, in the layout the file store
    writes: `<person_id>/<doc>` and `shared/<scope>/<doc>`; never through a symlink."""
    folders: list[tuple[str, Path]] = []
    if root.is_dir() and not root.is_symlink():
        folders += [(p.name, p) for p in sorted(root.iterdir()) if p.name.isdigit()]
        shared = root / "shared"
        if shared.is_dir() and not shared.is_symlink():
            folders += [(f"shared/{p.name}", p) for p in sorted(shared.iterdir())]
    return [(f"{key}/{name}", folder / name) for key, folder in folders
            if folder.is_dir() and not folder.is_symlink() for name in MEMORY_DOCUMENTS
            if (folder / name).is_file() and not (folder / name).is_symlink()]


def _canonical(name: str, text: str) -> str:
    """The text as the database backend writes it, so equal content compares equal."""
    if name == PENDING_FILE:
        items = pending_items(text, name)
        return pending_text(items) if items else ""
    return format_entries(parse_entries(text))


async def migrate_memory(documents: DocumentStore, root: Path, report: MigrationReport) -> None:
    kind = "memory documents"
    for path, file in _memory_files(root):
        name = file.name
        try:
            text = _canonical(name, _read_text(file))
        except (OSError, _Unreadable) as exc:
            report.skipped.append(f"{file} ({getattr(exc, 'reason', None) or exc})")
            continue
        if not text:
            continue  # an empty document is the same as none
        stored = await documents.get_document(MEMORY_AREA, path)
        if stored is not None:
            if _canonical(name, stored.text) == text:
                report.already[kind] += 1
            else:
                report.kept.append(str(file))
            continue
        if await documents.put_document(MEMORY_AREA, path, text, expected_version=0) is None:
            report.kept.append(str(file))  # written by the gateway meanwhile
        else:
            report.moved[kind] += 1


async def migrate_pairing(documents: DocumentStore, file: Path, report: MigrationReport) -> None:
    try:
        text = _pairing_text(file)
        if text is None:
            return
        incoming = parse_state(text, str(file))
    except (OSError, RuntimeError, _Unreadable) as exc:
        report.skipped.append(f"{file} ({getattr(exc, 'reason', None) or exc})")
        return
    while True:  # compare and set: a gateway writing meanwhile makes this round start again
        stored = await documents.get_document(PAIRING_AREA, PAIRING_PATH)
        state = parse_state(stored.text, "the pairing state in the database") if stored else PairingState()
        added = _merge(state, incoming)
        if not any(added.values()):
            break
        if await documents.put_document(PAIRING_AREA, PAIRING_PATH, state_text(state),
                                        expected_version=stored.version if stored else 0) is not None:
            report.moved.update(added)
            break
    report.already["pairing approvals"] += len(incoming.approved) - added["pairing approvals"]
    report.already["pairing codes"] += len(incoming.pending) - added["pairing codes"]


def _merge(state: PairingState, incoming: PairingState) -> Counter[str]:
    """Add what `incoming` has and `state` lacks; an approval already in the database stays as it is."""
    added: Counter[str] = Counter()
    for key, approval in incoming.approved.items():
        if key not in state.approved:
            state.approved[key] = approval
            added["pairing approvals"] += 1
    for code, request in incoming.pending.items():
        person = (request.platform, request.user_id)
        if code not in state.pending and not any((r.platform, r.user_id) == person for r in state.pending.values()):
            state.pending[code] = request
            added["pairing codes"] += 1
    return added


def _skill_files(folder: Path) -> list[str]:
    return sorted(library_files(folder)) if folder.is_dir() and not folder.is_symlink() else []


def skill_bots(home: Path) -> list[str]:
    """The bots with a skill library folder under `<home>/skills`."""
    root = Path(home) / "skills"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith("."))


async def migrate_skills(documents: DocumentStore, folder: Path, bot: str, report: MigrationReport) -> None:
    """Every file of one bot's library folder; a library that gained files gets a new revision, so running
    replicas read it again."""
    kind, area = f"skill files ({bot})", area_of(bot)
    moved = 0
    for rel in _skill_files(folder):
        try:
            text = encode((folder / rel).read_bytes())
        except OSError as exc:
            report.skipped.append(f"{folder / rel} ({exc.strerror or exc})")
            continue
        stored = await documents.get_document(area, rel)
        if stored is not None:
            if stored.text == text:
                report.already[kind] += 1
            else:
                report.kept.append(str(folder / rel))
        elif await documents.put_document(area, rel, text, expected_version=0) is None:
            report.kept.append(str(folder / rel))
        else:
            moved += 1
    report.moved[kind] += moved
    if moved:
        while True:
            head = await documents.get_document(area, REVISION)
            if await documents.put_document(area, REVISION, str((head.version if head else 0) + 1),
                                            expected_version=head.version if head else 0) is not None:
                break


async def migrate_home(documents: DocumentStore, home: Path, bots: list[str] | None = None) -> MigrationReport:
    """Memory and pairing of the home, and the skill libraries of `bots` (all found when None)."""
    report = MigrationReport()
    await migrate_memory(documents, Path(home) / "memories", report)
    await migrate_pairing(documents, Path(home) / PAIRING_FILE, report)
    for bot in skill_bots(home) if bots is None else bots:
        await migrate_skills(documents, bot_library_dir(Path(home) / "skills", bot), bot, report)
    return report


__all__ = ["MigrationReport", "migrate_home", "migrate_memory", "migrate_pairing", "migrate_skills", "skill_bots"]
