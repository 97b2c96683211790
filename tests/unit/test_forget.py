"""Forgetting a person from the command line (`hermes-gateway people …`), and the rules `/forget` keeps: a
one-time code in a direct message, and files removed only inside the attachments folder."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from home_kit import service_home
from typer.testing import CliRunner

from hermes_engine.attachments.folders import attachment_folder_name
from hermes_engine.memory import FileMemoryStore, MemoryBook, MemoryOwner
from hermes_engine.people.forget import ForgetFeature, forget_person
from hermes_engine.policy.pairing import Pairing
from hermes_engine.ports.commands import CommandContext
from hermes_engine.ports.conversation import Message
from hermes_engine.ports.inbound import ChatKind, InboundMessage
from hermes_engine.ports.storage import AccountRecord, ForgottenPerson
from hermes_engine.voice.state import VoiceState, VoiceSwitches
from hermes_gateway.cli.people import app, with_store
from storage.store import SqlStore


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = service_home(tmp_path / "home")
    monkeypatch.setenv("HERMES_HOME", str(home))
    return home


def _person(home: Path, platform: str, user_id: str, name: str, memory: str) -> int:
    pid = with_store(lambda store: store.resolve_account(platform, "bot", user_id, name)).person_id
    asyncio.run(MemoryBook(FileMemoryStore.for_home(home)).add(MemoryOwner.person(pid), "user", memory))
    return pid


def test_people_list_finds_a_person_by_platform_user_id(home):
    ann = _person(home, "telegram", "123456789", "Ann", "Likes tea")
    _person(home, "slack", "U2", "Bob", "Likes coffee")
    runner = CliRunner()
    everyone = runner.invoke(app, ["list"])
    assert everyone.exit_code == 0 and "telegram:123456789" in everyone.output and "slack:U2" in everyone.output
    found = runner.invoke(app, ["list", "--platform", "Telegram", "--user-id", "123456789"])
    assert f"{ann:>6}  Ann  telegram:123456789 (bot account bot)" in found.output and "Bob" not in found.output
    assert runner.invoke(app, ["list", "--user-id", "nobody"]).output.strip() == "No one matches."
    _person(home, "discord", "9", "\x1b]0;owned\x07Eve\u202e", "x")  # a name chosen to drive the terminal
    eve = runner.invoke(app, ["list", "--platform", "discord"]).output
    assert "\\x1b]0;owned\\x07Eve\\u202e" in eve and not any(c in eve for c in "\x1b\x07\u202e")


def test_people_forget_deletes_the_person_their_memory_and_pairing_and_says_what_remains(home):
    ann = _person(home, "telegram", "123456789", "Ann", "Likes tea")
    bob = _person(home, "telegram", "222", "Bob", "Likes coffee")
    Pairing.for_home(home).approve_user("telegram", "123456789", "Ann")
    runner = CliRunner()

    kept = runner.invoke(app, ["forget", "telegram:123456789"], input="n\n")
    assert kept.exit_code == 1 and (home / "memories" / str(ann)).exists()  # declined: nothing deleted

    result = runner.invoke(app, ["forget", "telegram:123456789", "--yes"])
    assert result.exit_code == 0, result.output
    assert "1 memory folder(s)" in result.output and "1 pairing approval(s)" in result.output
    assert "backups" in result.output and "log" in result.output
    assert not (home / "memories" / str(ann)).exists() and (home / "memories" / str(bob)).exists()
    assert not Pairing.for_home(home).is_approved("telegram", "123456789")
    assert with_store(lambda store: store.get_person(ann)) is None
    assert "123456789" not in runner.invoke(app, ["list"]).output

    again = runner.invoke(app, ["forget", "telegram:123456789", "--yes"])
    assert again.exit_code == 1 and again.output.startswith("Error: No telegram account with user id 123456789")


@pytest.mark.parametrize("key", ["telegram:bot:dm:123456789", "slack:T1:thread:C1:1712.0042",
                                 "discord:G1:group:42:user:7", "../../etc:passwd", "a b/c\\d"])
def test_attachment_folders_are_named_as_the_adapters_name_them(key, tmp_path):
    from adapters.downloads import Downloads

    folder = Downloads(tmp_path).folder(key)
    assert folder.name == attachment_folder_name(key) and folder.parent == tmp_path / "attachments"


class _Forgotten:
    """A `PeopleStore` whose `forget_person` reports the given attachment paths."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    async def forget_person(self, person_id: int) -> ForgottenPerson:
        account = AccountRecord(1, person_id, "telegram", "bot", "1", "")
        return ForgottenPerson((person_id,), (account,), (), 0, 0, 0, 0, 0, tuple(self.paths))


async def test_forgetting_removes_attachment_files_only_inside_the_attachments_folder(tmp_path):
    home = tmp_path / "home"
    inside = home / "attachments" / "chat" / "m1-photo.jpg"
    inside.parent.mkdir(parents=True)
    inside.write_bytes(b"jpeg")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    link = home / "attachments" / "chat" / "m2-link.txt"
    link.symlink_to(outside)
    climbing = home / "attachments" / ".." / "secrets.txt"
    (home / "secrets.txt").write_text("keep")

    outcome = await forget_person(_Forgotten([str(inside), str(outside), str(link), str(climbing)]),  # type: ignore[arg-type]
                                  home, 5)
    assert outcome is not None and outcome.attachment_files == 1
    assert not inside.exists()
    assert outside.read_text() == "keep" and link.is_symlink() and (home / "secrets.txt").read_text() == "keep"


def _command(args: str, chat_kind: ChatKind = ChatKind.DM) -> CommandContext:
    msg = InboundMessage(platform="console", account="t", chat_kind=chat_kind, chat_id="c", user_id="u",
                         text=f"/forget {args}".strip(), message_id="m1")
    return CommandContext(host=None, session=None, message=msg, person_id=1, args=msg.args)  # type: ignore[arg-type]


async def test_a_forget_code_is_given_only_in_a_direct_message_and_expires():
    now = [1000.0]
    feature = ForgetFeature(clock=lambda: now[0])
    assert "direct message" in await feature.handle(_command("", ChatKind.GROUP))
    assert feature.codes == {}
    explained = await feature.handle(_command(""))
    code = feature.codes[1][0]
    assert f"/forget {code}" in explained
    now[0] += 601
    assert "expired" in await feature.handle(_command(code))  # never reaches the host: nothing is deleted


def test_forgetting_removes_their_dm_workspaces_usage_and_the_cards_they_asked_for_or_own_and_nothing_of_others(home):
    from datetime import date

    from hermes_engine.ports.cards import CardSpec

    ann = _person(home, "telegram", "123456789", "Ann", "Likes tea")
    bob = _person(home, "telegram", "222", "Bob", "Likes coffee")
    for bot in ("helper", "assistant"):
        (home / "workspaces" / bot / f"person-{ann}").mkdir(parents=True)
        (home / "workspaces" / bot / f"person-{ann}" / "diary.txt").write_text("Ann's plans")
    (home / "workspaces" / "helper" / f"person-{bob}").mkdir(parents=True)
    (home / "workspaces" / "helper" / "chat-0123456789abcdef").mkdir()  # a group's: the group keeps it

    def asked_by(pid: int, title: str) -> CardSpec:
        return CardSpec(title=title, body=f"{title}, in detail", origin={"for": {"person_id": pid, "user_id": "x"},
                                                                         "reply": {"platform": "telegram"}},
                        owner_id=pid, shared_in="telegram:bot:-100")

    async def prepare(store):
        cards = await store.create_cards([asked_by(ann, "Plan Ann's trip"), asked_by(bob, "Plan Bob's move"),
                                          CardSpec("Ann's card with no origin", owner_id=ann)], actor="test")
        await store.add_usage("helper", ann, date(2026, 12, 1), turns=3, tokens=300)
        await store.add_usage("helper", bob, date(2026, 12, 1), turns=1, tokens=100)
        return cards

    anns_card, bobs_card, owned = with_store(prepare)
    result = CliRunner().invoke(app, ["forget", "telegram:123456789", "--yes"])
    assert result.exit_code == 0, result.output
    assert "2 kanban card(s)" in result.output and "2 workspace(s)" in result.output

    assert sorted(p.name for p in (home / "workspaces" / "helper").iterdir()) == ["chat-0123456789abcdef",
                                                                                  f"person-{bob}"]
    assert list((home / "workspaces" / "assistant").iterdir()) == []

    async def after(store):
        return (await store.get_card(anns_card.id), await store.card_events(anns_card.id),
                await store.get_card(bobs_card.id), await store.usage_of("helper", ann, date(2026, 12, 1)),
                await store.usage_of("helper", bob, date(2026, 12, 1)), await store.get_card(owned.id))

    wiped, events, kept, anns_use, bobs_use, owned_wiped = with_store(after)
    assert wiped.status == "archived" and "Ann" not in wiped.title + wiped.body and wiped.origin == {}
    assert (wiped.owner_id, wiped.shared_in, kept.owner_id) == (None, None, bob)
    assert owned_wiped.status == "archived" and "Ann" not in owned_wiped.title and owned_wiped.owner_id is None
    assert events == []
    assert kept.title == "Plan Bob's move" and kept.origin["for"]["person_id"] == bob
    assert (anns_use.turns, anns_use.tokens) == (0, 0) and (bobs_use.turns, bobs_use.tokens) == (1, 100)


def test_forgetting_removes_their_opaquely_named_workspaces_of_every_bot_and_keeps_the_others(home, tmp_path):
    from hermes_engine.workspace.folders import WorkspaceFolders

    ann = _person(home, "telegram", "123456789", "Ann", "Likes tea")
    bob = _person(home, "telegram", "222", "Bob", "Likes coffee")
    own_root = WorkspaceFolders.of(home, tmp_path / "elsewhere")
    anns = [own_root.folder(bot, f"person-{ann}") for bot in ("helper", "assistant")]
    kept = [own_root.folder("helper", f"person-{bob}"), own_root.folder("helper", "chat-0123456789abcdef")]
    for folder in (*anns, *kept):
        folder.mkdir(parents=True)
        (folder / "diary.txt").write_text("plans")

    async def forget(store):
        return await forget_person(store, home, ann, workspaces=own_root.root)

    outcome = with_store(forget)
    assert outcome is not None and outcome.workspaces == 2 and not outcome.problems
    assert sorted(own_root.root.iterdir()) == sorted(kept)


async def test_forgetting_deletes_the_voice_switch_of_their_own_conversations_and_keeps_a_shared_ones(tmp_path):
    store = SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'hermes.db'}")
    await store.init()
    try:
        alice = await store.resolve_account("telegram", "bot", "1", "Alice")
        bob = await store.resolve_account("telegram", "bot", "2", "Bob")
        own, shared = "telegram:bot:dm:1", "telegram:bot:group:9"
        for key, writers in ((own, [alice]), (shared, [alice, bob])):
            session = await store.active_session(key, "bot")
            for writer in writers:
                await store.append_message(session.id, Message(role="user", content="hi"), person_id=writer.person_id)
        switches = VoiceSwitches(store, default_on=False)
        assert await switches.put(own, VoiceState(on=True)) and await switches.put(shared, VoiceState(on=True))

        await forget_person(store, tmp_path / "home", alice.person_id)
        assert await switches.get(own) == VoiceState(on=False)  # gone with the conversation: the default again
        assert await switches.get(shared) == VoiceState(on=True)  # Bob's conversation too: kept
    finally:
        await store.close()
