"""/forget through the real engine: a person deletes everything kept about them, after a one-time code, and the
conversation (theirs and the group's) goes on without a trace of them."""

from __future__ import annotations

import re
from dataclasses import replace

from engine_harness import make_profile
from fakes.fake_llm import Reply

from hermes_engine.attachments.folders import attachment_folder_name
from hermes_engine.policy.pairing import Pairing
from hermes_engine.ports.inbound import Attachment, ChatKind
from storage.repos.people import REMOVED

SECRET = "zebra123"


def remember(content: str, target: str = "user") -> Reply:
    return Reply(tool_calls=[("memory", {"action": "add", "target": target, "content": content})])


async def test_forget_deletes_everything_about_the_person_after_a_one_time_code(engine, fake_llm):
    e = await engine(profile=make_profile(shared_sessions=True))
    store = e.store
    fake_llm.script(remember(f"Passport number {SECRET}"), Reply(text="noted"))
    await e.say(f"remember my passport {SECRET}")
    [account] = await store.find_accounts(platform="test", user_id="u1")
    alice = account.person_id
    dm_key = "test:acct:dm:c1"
    folder = e.home / "attachments" / attachment_folder_name(dm_key)
    folder.mkdir(parents=True)
    (folder / "m9-passport.jpg").write_bytes(b"jpeg")
    group_file = e.home / "attachments" / "group" / "m10-scan.pdf"
    group_file.parent.mkdir(parents=True)
    group_file.write_bytes(b"pdf")
    fake_llm.responder = lambda request: Reply(text="hi group")
    said = e.message(f"my code is {SECRET}", user="u1", chat="g1", kind=ChatKind.GROUP, name="Alice")
    await e.gateway.handle(replace(said, attachments=(Attachment("document", "scan.pdf", "application/pdf", 3,
                                                                 str(group_file)),)))
    await e.outlet.wait_for(2)
    await e.say("hello all", user="bob", chat="g1", kind=ChatKind.GROUP, name="Bob")
    Pairing.for_home(e.home).approve_user("test", "u1", "Alice")
    link = await e.say("/link")
    link_code = re.search(r"code is (\w+)", link).group(1)

    explained = await e.say("/forget")
    code = re.search(r"/forget (\w+)", explained).group(1)
    assert "deletes everything I keep about you" in explained
    assert "not the code" in await e.say("/forget WRONG1")
    assert (e.home / "memories" / str(alice)).exists()  # a wrong code deleted nothing
    assert "Done" in await e.say(f"/forget {code.lower()}")

    assert await store.get_person(alice) is None
    assert await store.find_accounts(user_id="u1") == []
    assert not (e.home / "memories" / str(alice)).exists()
    assert not folder.exists() and not group_file.exists()
    assert not Pairing.for_home(e.home).is_approved("test", "u1")
    assert await store.redeem_link_code(link_code) is None
    group = await store.active_session("test:acct:group:g1", "testbot")
    texts = [m.message.content for m in await store.load_stored_messages(group.id)]
    assert REMOVED in texts and not any(SECRET in t for t in texts) and any("hello all" in t for t in texts)
    assert "not the code" in await e.say(f"/forget {code}")  # the code was single-use
    assert await store.find_accounts(user_id="u1") != []  # ...and answering it made a new, empty person

    # Both conversations go on, with nothing of the forgotten person in what the model is sent.
    fake_llm.requests.clear()
    fake_llm.responder = lambda request: Reply(text="fresh start")
    assert await e.say("hello again") == "fresh start"
    await e.say("anyone there?", user="bob", chat="g1", kind=ChatKind.GROUP, name="Bob")
    for request in fake_llm.requests:
        assert SECRET not in str(request.body)
    assert "hello all" in str(fake_llm.requests[-1].body)  # the group kept the others' words


async def test_forget_has_the_gateway_drop_a_shared_live_session_whole_and_it_reloads_without_the_person(
        engine, fake_llm):
    e = await engine(profile=make_profile(shared_sessions=True))
    fake_llm.responder = lambda request: Reply(text="hi group")
    await e.say(f"my code is {SECRET}", user="u1", chat="g1", kind=ChatKind.GROUP, name="Alice")
    await e.say("hello all", user="bob", chat="g1", kind=ChatKind.GROUP, name="Bob")
    group = e.gateway.session("test:acct:group:g1")
    assert group.history.loaded and SECRET in str(list(group.history))
    code = re.search(r"/forget (\w+)", await e.say("/forget")).group(1)
    assert "Done" in await e.say(f"/forget {code}")

    # History, frozen prompt and tool list went together; the next turn reads them from the store again.
    assert not group.history.loaded and group.system_prompt is None and group.tools is None
    fake_llm.requests.clear()
    assert await e.say("anyone there?", user="bob", chat="g1", kind=ChatKind.GROUP, name="Bob") == "hi group"
    assert SECRET not in str(fake_llm.requests[-1].body) and "hello all" in str(fake_llm.requests[-1].body)
    assert group.history.loaded and group.system_prompt is not None and group.tools is not None


async def test_forget_deletes_the_persons_workspace_under_the_workspaces_own_root(engine, fake_llm, tmp_path,
                                                                                   monkeypatch):
    from hermes_engine.workspace.folders import WorkspaceFolders

    root = tmp_path / "workspaces-elsewhere"
    monkeypatch.setenv("HERMES_WORKSPACE_ROOT", str(root))
    e = await engine(profile=make_profile())
    fake_llm.script(Reply(text="hi"))
    await e.say("hello")
    [account] = await e.store.find_accounts(platform="test", user_id="u1")
    mine = WorkspaceFolders.of(e.home, root).folder("testbot", f"person-{account.person_id}")
    group = WorkspaceFolders.of(e.home, root).folder("testbot", "chat-0123456789abcdef")
    for folder in (mine, group):
        folder.mkdir(parents=True)
        (folder / "notes.txt").write_text("plans")
    code = re.search(r"/forget (\w+)", await e.say("/forget")).group(1)
    assert "Done" in await e.say(f"/forget {code}")
    assert not mine.exists() and (group / "notes.txt").exists()


async def test_forget_deletes_the_persons_reminders_so_none_fires_after(engine, fake_llm):
    import asyncio

    e = await engine(profile=make_profile(toolsets=["core", "clock"]))
    fake_llm.script(Reply(tool_calls=[("cronjob", {"action": "create", "message": "call the bank",
                                                   "schedule": "in 3s"})]), Reply(text="set"))
    await e.say("remind me in 3 seconds to call the bank")
    [job] = await e.store.list_jobs("testbot")
    explained = await e.say("/forget")
    code = re.search(r"/forget (\w+)", explained).group(1)
    assert "Done" in await e.say(f"/forget {code}")
    assert await e.store.get_job(job.id) is None
    await asyncio.sleep(4)
    assert not any("call the bank" in text for text in e.outlet.texts)
