"""The terminal and file tools through the real engine and the fake LLM: a model lists, writes, patches and
runs a script in its sandboxed workspace; strangers and non-admins get nothing; limits end runaway commands
while other chats are answered."""

from __future__ import annotations

import asyncio
import os
import shutil

from engine_harness import make_profile
from fakes.fake_llm import Reply

from hermes_engine.ports.approval import Decision

ADMIN = "admin1"


def profile(**workspace):
    return make_profile(toolsets=["core", "terminal", "files"], access={"admins": [ADMIN]},
                        workspace={"approve": [], **workspace})


async def test_a_model_lists_writes_patches_and_runs_a_script_in_its_workspace(engine, fake_llm):
    e = await engine(profile=profile())
    fake_llm.script(
        Reply(tool_calls=[("terminal", {"command": "ls -a; id -u"})]),
        Reply(tool_calls=[("write_file", {"path": "tools/hello.sh", "content": "echo hello $1\n"})]),
        Reply(tool_calls=[("patch", {"path": "tools/hello.sh", "old": "hello", "new": "goodbye"})]),
        Reply(tool_calls=[("terminal", {"command": "sh tools/hello.sh world; ls tools"})]),
        Reply(text="done"))
    assert await e.say("make me a script", user=ADMIN) == "done"
    seen = [r.turn_tool_results for r in fake_llm.requests[1:]]
    listing, uid = seen[0][0].split("\n")[-3:-1]
    assert listing == "." or ".." in seen[0][0]
    assert uid != "0" and uid.strip().isdigit()
    assert seen[1][-1].startswith("Wrote 14 bytes to tools/hello.sh")
    assert seen[2][-1] == "Patched tools/hello.sh."
    assert seen[3][-1] == "goodbye world\nhello.sh\n[exit code 0]"
    ws = next((e.home / "workspaces").iterdir())
    assert "person" not in ws.name and "testbot" not in ws.name  # named opaquely (workspace/folders.py)
    assert (ws / "tools" / "hello.sh").read_text() == "echo goodbye $1\n"


async def test_file_tool_arguments_of_the_wrong_json_type_reach_the_tools_as_their_declared_types(engine, fake_llm):
    e = await engine(profile=profile())
    fake_llm.script(
        Reply(tool_calls=[("write_file", {"path": "n.txt", "content": 12345})]),
        Reply(tool_calls=[("write_file", {"path": "lines.txt", "content": "one\ntwo\nthree\n"})]),
        Reply(tool_calls=[("read_file", {"path": "lines.txt", "offset": "2", "limit": "1"})]),
        Reply(text="done"))
    assert await e.say("write and read", user=ADMIN) == "done"
    results = [r.turn_tool_results[-1] for r in fake_llm.requests[1:]]
    assert results[0] == "Wrote 5 bytes to n.txt."
    assert results[2] == "2| two\n[1 more lines: read on with offset=3]"
    ws = next((e.home / "workspaces").iterdir())
    assert (ws / "n.txt").read_text() == "12345"


async def test_a_person_who_is_not_an_admin_cannot_run_commands(engine, fake_llm):
    e = await engine(profile=profile())
    fake_llm.script(Reply(tool_calls=[("terminal", {"command": "echo pwned > x"})]), Reply(text="ok"))
    await e.say("run it", user="someone")
    assert "only an admin" in fake_llm.requests[-1].turn_tool_results[0]
    assert not any((e.home / "workspaces").glob("*/x"))


async def test_an_endless_loop_and_a_fork_bomb_end_by_limits_while_other_chats_are_answered(engine, fake_llm):
    e = await engine(profile=profile(timeout_seconds=3, processes=32))

    def respond(request):
        text = request.last_user_text
        if request.turn_tool_results:
            return Reply(text="finished " + text)
        if text == "loop":
            return Reply(tool_calls=[("terminal", {"command": "while :; do :; done"})])
        if text == "bomb":
            return Reply(tool_calls=[("terminal", {"command": "b(){ b|b& }; b"})])
        return Reply(text="pong")

    fake_llm.responder = respond
    await e.gateway.handle(e.message("loop", user=ADMIN, chat="c1"))
    await e.gateway.handle(e.message("bomb", user=ADMIN, chat="c2"))
    await asyncio.sleep(0.5)
    await e.gateway.handle(e.message("ping", user="other", chat="c3"))
    while "pong" not in e.outlet.texts:
        await e.outlet.wait_for(len(e.outlet.delivered) + 1, 30)
    assert "finished loop" not in e.outlet.texts  # answered while the loop still ran (its limit is 3 s)
    await e.idle(30)
    assert {"finished loop", "finished bomb", "pong"} <= set(e.outlet.texts)
    tool_texts = [r for req in fake_llm.requests for r in req.turn_tool_results]
    assert any("[killed: the command ran past its time limit]" in t for t in tool_texts)


class Asker:
    """Shows nothing; the test answers what was asked."""

    def __init__(self) -> None:
        self.asked: asyncio.Queue = asyncio.Queue()
        self.settled_as: list[tuple[Decision, str]] = []

    def take_presses(self, answers) -> None:
        return None  # the test answers through what `ask` was given

    async def ask(self, request, answers) -> None:
        self.asked.put_nowait((request, answers))

    async def settled(self, request, decision, note) -> None:
        self.settled_as.append((decision, note))


def with_asker(e_profile, asker, tmp_path):
    from hermes_engine.workspace.feature import WorkspaceFeature

    return [WorkspaceFeature(tmp_path, e_profile.name, e_profile.workspace, admins=e_profile.access.admins,
                             asker=asker, toolsets=e_profile.toolsets)]


async def test_a_dangerous_command_waits_for_an_admins_approval_and_a_new_message_denies_it(engine, fake_llm,
                                                                                           tmp_path):
    p = profile(approve=["dangerous"])
    asker = Asker()
    e = await engine(profile=p, features=with_asker(p, asker, tmp_path))

    def respond(request):
        if request.turn_tool_results:
            return Reply(text="result: " + request.turn_tool_results[0])
        if request.last_user_text == "clean":
            return Reply(tool_calls=[("terminal", {"command": "mkdir -p build && rm -rf build && echo cleaned"})])
        return Reply(text="ok")

    fake_llm.responder = respond
    first = asyncio.ensure_future(e.say("clean", user=ADMIN))
    request, answers = await asyncio.wait_for(asker.asked.get(), 10)
    assert request.risk == "dangerous" and "rm -rf build" in request.command
    assert answers.answer(request.id, "stranger", Decision.ONCE) is False
    assert answers.answer(request.id, ADMIN, Decision.ONCE) is True
    assert (await first) == "result: cleaned\n[exit code 0]"

    second = asyncio.ensure_future(e.say("clean", user=ADMIN))
    request, answers = await asyncio.wait_for(asker.asked.get(), 10)
    await e.gateway.handle(e.message("never mind", user=ADMIN))
    denied = await second
    assert "Denied: the command was not run" in denied and "a new message arrived" in denied
    assert answers.answer(request.id, ADMIN, Decision.ONCE) is False


async def test_stop_while_an_approval_waits_denies_it_stops_the_turn_and_the_next_message_is_answered(
        engine, fake_llm, tmp_path):
    p = profile(approve=["dangerous"])
    asker = Asker()
    e = await engine(profile=p, features=with_asker(p, asker, tmp_path))
    released = asyncio.Event()  # a model call after the denial is held, so only /stop can end the turn

    async def respond(request):
        if request.turn_tool_results:
            await asyncio.wait_for(released.wait(), 60)
            return Reply(text="result: " + request.turn_tool_results[0])
        if request.last_user_text == "clean":
            return Reply(tool_calls=[("terminal", {"command": "mkdir -p b && rm -rf b && echo ran > ran.txt"})])
        return Reply(text="hello again")

    fake_llm.responder = respond
    await e.gateway.handle(e.message("clean", user=ADMIN))
    await asyncio.wait_for(asker.asked.get(), 10)
    await e.gateway.handle(e.message("/stop", user=ADMIN))
    while "Stopped." not in e.outlet.texts:
        await e.outlet.wait_for(len(e.outlet.delivered) + 1, 30)
    released.set()
    await e.idle(30)
    assert asker.settled_as == [(Decision.DENY, "/stop was sent before anyone answered")]
    assert not any(t.startswith("result:") for t in e.outlet.texts)
    assert not list((e.home / "workspaces").glob("*/ran.txt"))

    assert await e.say("hello", user=ADMIN) == "hello again"


async def test_workspace_command_shows_the_size_and_only_admins_reset_it(engine, fake_llm):
    e = await engine(profile=profile(quota_mb=1))
    fake_llm.script(Reply(tool_calls=[("write_file", {"path": "a.txt", "content": "x" * 300_000})]),
                    Reply(text="written"))
    await e.say("write", user=ADMIN)
    assert await e.say("/workspace", user=ADMIN) == "Workspace: 0.29 MB used of 1 MB."
    assert await e.say("/workspace reset", user="someone", chat="c9") == "Only an admin of this bot can reset a workspace."
    assert await e.say("/workspace reset", user=ADMIN) == "The workspace is empty now."
    assert await e.say("/workspace", user=ADMIN) == "Workspace: 0.00 MB used of 1 MB."


async def test_the_terminal_refuses_to_start_without_bwrap_or_without_slirp4netns_for_a_network(tmp_path,
                                                                                                  monkeypatch):
    import pytest

    from hermes_engine.config import WorkspaceSettings
    from hermes_engine.errors import ConfigError
    from hermes_engine.workspace import sandbox
    from hermes_engine.workspace.feature import WorkspaceFeature

    only_bwrap = tmp_path / "bin"
    only_bwrap.mkdir()
    for tool in ("bwrap", "true"):  # bubblewrap and what its probe runs, not slirp4netns
        os.symlink(shutil.which(tool), only_bwrap / tool)
    monkeypatch.setenv("PATH", str(only_bwrap))
    sandbox.unavailable_reason.cache_clear()
    try:
        with pytest.raises(ConfigError, match="slirp4netns"):
            await WorkspaceFeature(tmp_path, "b", WorkspaceSettings(network=True), admins=[],
                                   toolsets=["terminal"]).start(None)  # type: ignore[arg-type]
        monkeypatch.setenv("PATH", str(tmp_path))
        sandbox.unavailable_reason.cache_clear()
        with pytest.raises(ConfigError, match="bubblewrap"):
            await WorkspaceFeature(tmp_path, "b", WorkspaceSettings(), admins=[],
                                   toolsets=["terminal"]).start(None)  # type: ignore[arg-type]
    finally:
        sandbox.unavailable_reason.cache_clear()


async def test_a_commands_output_streams_into_the_reply_while_it_runs_and_the_answer_replaces_it(engine, fake_llm):
    e = await engine(profile=profile())
    fake_llm.script(Reply(tool_calls=[("terminal", {"command": "echo first; sleep 0.3; echo second"})]),
                    Reply(text="all done"))
    assert await e.say("run it", user=ADMIN) == "all done"
    shown = "".join(e.outlet.delivered[-1].deltas)
    assert "`$ echo first; sleep 0.3; echo second`\n```\nfirst\n" in shown
    assert shown.index("first") < shown.index("second") < shown.index("all done")


async def test_allowed_people_may_use_the_workspace_in_their_own_dm_but_not_in_a_group(engine, fake_llm):
    from hermes_engine.ports.inbound import ChatKind

    e = await engine(profile=profile(users="allowed_in_dm"))
    fake_llm.script(Reply(tool_calls=[("terminal", {"command": "echo mine > note; cat note"})]), Reply(text="a"),
                    Reply(tool_calls=[("list_files", {})]), Reply(text="b"))
    await e.say("in my dm", user="friend", chat="dm-friend")
    assert fake_llm.requests[1].turn_tool_results[0] == "mine\n[exit code 0]"
    await e.say("in the group", user="friend", chat="g1", kind=ChatKind.GROUP)
    assert "only an admin" in fake_llm.requests[3].turn_tool_results[0] and "direct message" in fake_llm.requests[3].turn_tool_results[0]


async def test_a_long_output_shows_its_head_as_it_comes_then_its_tail_and_the_exit_code(engine, fake_llm):
    e = await engine(profile=profile())
    command = "seq 1 20000; echo last line; exit 3"
    fake_llm.script(Reply(tool_calls=[("terminal", {"command": command})]), Reply(text="it failed"))
    assert await e.say("run it", user=ADMIN) == "it failed"
    shown = "".join(e.outlet.delivered[-1].deltas)
    frame = shown[:shown.index("it failed")]
    assert frame.count("```") == 2  # one block, closed
    assert "\n1\n2\n3\n" in frame and "bytes …\n" in frame
    assert frame.rstrip().endswith("19999\n20000\nlast line\n```\n[exit code 3]")
    assert len(frame) < 5000  # head and tail, not the 100 kB between


async def test_a_profile_that_allows_a_network_gives_its_commands_one_and_one_that_does_not_gives_none(
        engine, fake_llm, tmp_path):
    probe = "python3 -c 'import socket; print(sorted(n for _, n in socket.if_nameindex()))'"
    for network, interfaces in ((True, "['lo', 'tap0']"), (False, "['lo']")):
        e = await engine(profile=profile(network=network), home=tmp_path / str(network))
        fake_llm.script(Reply(tool_calls=[("terminal", {"command": probe})]), Reply(text="seen"))
        before = len(fake_llm.requests)
        assert await e.say("which interfaces?", user=ADMIN) == "seen"
        assert fake_llm.requests[before + 1].turn_tool_results[0] == f"{interfaces}\n[exit code 0]"


async def test_where_no_cgroup_can_be_made_commands_run_under_rlimits_after_one_warning_at_start(
        engine, fake_llm, tmp_path, monkeypatch, caplog):
    import logging

    from hermes_engine.workspace import cgroups, feature

    nothing_mounted = tmp_path / "mountinfo"
    nothing_mounted.write_text("")
    monkeypatch.setattr(cgroups, "MOUNTINFO", nothing_mounted)
    cgroups._found.cache_clear()
    feature._say_which_limits_hold.cache_clear()
    try:
        with caplog.at_level(logging.INFO, logger="hermes_engine.workspace.feature"):
            e = await engine(profile=profile())
            fake_llm.script(Reply(tool_calls=[("terminal", {"command": "echo still runs"})]), Reply(text="done"))
            assert await e.say("run it", user=ADMIN) == "done"
    finally:
        cgroups._found.cache_clear()
        feature._say_which_limits_hold.cache_clear()
    said = [r for r in caplog.records if r.getMessage().startswith("terminal sandbox:")]
    assert [r.levelno for r in said] == [logging.WARNING]
    assert "no cgroup can be made here" in said[0].getMessage()
    assert "the memory limit holds per process" in said[0].getMessage()
    assert fake_llm.requests[-1].turn_tool_results[-1] == "still runs\n[exit code 0]"


async def test_six_processes_of_200_mb_under_a_256_mb_profile_cannot_hold_more_than_256_mb_together(engine,
                                                                                                    fake_llm):
    import pytest
    from sandbox_kit import SIX_HOLDERS, held_at_once

    from hermes_engine.workspace import cgroups

    if cgroups.hierarchies() is None:
        pytest.skip(f"no cgroup can be made here: {cgroups.unavailable_reason()}")
    e = await engine(profile=profile(memory_mb=256, timeout_seconds=60))
    fake_llm.script(Reply(tool_calls=[("write_file", {"path": "six.py", "content": SIX_HOLDERS})]),
                    Reply(tool_calls=[("terminal", {"command": "python3 six.py; echo after"})]),
                    Reply(text="done"))
    assert await e.say("hold memory", user=ADMIN) == "done"
    ran = fake_llm.requests[-1].turn_tool_results[-1]
    assert 0 <= held_at_once(ran) <= 1, ran
    assert "[the command reached its memory limit of 256 MB" in ran and "after" in ran


async def test_workspaces_under_the_home_are_warned_about_once_at_start_naming_the_path_commands_read(
        engine, tmp_path, caplog):
    import logging

    with caplog.at_level(logging.WARNING, logger="hermes_engine.workspace.mounts"):
        await engine(profile=profile())
    said = [r.getMessage() for r in caplog.records if r.name == "hermes_engine.workspace.mounts"]
    assert len(said) == 1 and said[0].startswith(f"workspaces: {tmp_path / 'workspaces'} is not a mount point")


async def test_with_the_workspaces_on_a_file_system_of_their_own_nothing_is_warned_and_commands_write_there(
        engine, fake_llm, tmp_path, tmpfs_root, monkeypatch, caplog):
    import logging

    monkeypatch.setenv("HERMES_WORKSPACE_ROOT", str(tmpfs_root))
    with caplog.at_level(logging.WARNING, logger="hermes_engine.workspace.mounts"):
        e = await engine(profile=profile())
    assert [r for r in caplog.records if r.name == "hermes_engine.workspace.mounts"] == []
    fake_llm.script(Reply(tool_calls=[("terminal", {"command": "echo here > made; grep ' /workspace ' "
                                                                "/proc/self/mountinfo | cut -d' ' -f4"})]),
                    Reply(text="done"))
    assert await e.say("make it", user=ADMIN) == "done"
    [made] = tmpfs_root.glob("*/made")
    assert fake_llm.requests[-1].turn_tool_results[-1] == f"/{made.parent.name}\n[exit code 0]"
    assert not (tmp_path / "workspaces").exists()
