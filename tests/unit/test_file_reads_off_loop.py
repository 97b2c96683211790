"""Files read on the way of every message (the pairing file, the skill library the hints ask about) are read
in worker threads: a slow disk under one person's message never holds up the event loop, so no other chat."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from skills_kit import skill_md, write_skill

from hermes_engine.config import AccessRules
from hermes_engine.policy.access import AccessGate
from hermes_engine.policy.pairing import MemoryPairingStore, Pairing, PairingState
from hermes_engine.skills.files import FileSkillLibrary
from hermes_engine.skills.model import Skill

T = TypeVar("T")


class ThreadRecordingStore(MemoryPairingStore):
    """A pairing store that notes which thread touched it."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    def read(self) -> PairingState:
        self.threads.append(threading.get_ident())
        return super().read()

    def update(self, change: Callable[[PairingState], T]) -> T:
        self.threads.append(threading.get_ident())
        return super().update(change)


async def test_pairing_is_read_and_written_off_the_event_loop_for_strangers_and_approved_people():
    store = ThreadRecordingStore()
    pairing = Pairing(store)
    gate = AccessGate(AccessRules(allowed_users=["1"]), pairing)
    loop_thread = threading.get_ident()

    stranger = await gate.admit("telegram", "77", user_name="Eve", chat_id="77", direct=True)
    assert not stranger.allowed and stranger.reply  # the code came from the store
    touched = list(store.threads)
    pairing.approve(stranger.reply.split("`")[1])  # the operator's side, here on the test's own thread
    store.threads.clear()

    approved = await gate.admit("telegram", "77", chat_id="77", direct=True)
    notified: asyncio.Queue[str] = asyncio.Queue()

    async def notify(chat_id: str, text: str) -> None:
        await notified.put(chat_id)

    watcher = asyncio.create_task(gate.watch_approvals("telegram", notify, every=0.01))
    assert await asyncio.wait_for(notified.get(), 10) == "77"
    watcher.cancel()
    touched += store.threads

    assert approved.allowed
    assert len(touched) >= 4 and loop_thread not in touched  # request, then approval check and the notice claim
    store.threads.clear()
    listed = await gate.admit("telegram", "1", direct=True)
    assert listed.allowed and store.threads == []  # a listed person costs no read at all


class ThreadRecordingLibrary(FileSkillLibrary):
    """A skill library that notes which thread read its folders."""

    threads: list[int]

    def list_sync(self, category: str | None = None) -> list[Skill]:
        self.threads.append(threading.get_ident())
        return super().list_sync(category)

    def get_sync(self, name: str) -> Skill | None:
        self.threads.append(threading.get_ident())
        return super().get_sync(name)

    def read_file_sync(self, name: str, file_path: str) -> str:
        self.threads.append(threading.get_ident())
        return super().read_file_sync(name, file_path)

    def revision_sync(self) -> str:
        self.threads.append(threading.get_ident())
        return super().revision_sync()


async def test_the_skill_library_is_read_off_the_event_loop(tmp_path: Path):
    library = ThreadRecordingLibrary(tmp_path / "skills")
    library.threads = []
    folder = write_skill(library.root / "devops" / "deploy", skill_md("deploy"))
    (folder / "references").mkdir()
    (folder / "references" / "notes.md").write_text("Staging first.\n", encoding="utf-8")

    assert await library.revision()
    assert [s.name for s in await library.list_skills()] == ["deploy"]
    assert (skill := await library.get("deploy")) is not None and skill.name == "deploy"
    assert "Staging first." in await library.read_file("deploy", "references/notes.md")

    assert len(library.threads) == 4 and threading.get_ident() not in library.threads
