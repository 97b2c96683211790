"""Workspace folders say nothing of whose they are: opaque names under a root of their own, the old
`<home>/workspaces/<bot>/person-<id>` folders moved there on first use with their files, and one warning at
start when a sandboxed command would read a host path in /proc/self/mountinfo."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
from pathlib import Path

import pytest

from hermes_engine.config import WorkspaceSettings
from hermes_engine.workspace import mounts
from hermes_engine.workspace.feature import WorkspaceFeature
from hermes_engine.workspace.folders import KEY_FILE, WorkspaceFolders


def test_a_workspace_folder_names_neither_the_person_nor_the_bot_and_keeps_its_name_after_a_restart(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = WorkspaceFolders.of(home).folder("helper-bot", "person-4711")
    assert folder.parent == home / "workspaces"
    assert "4711" not in folder.name and "person" not in folder.name and "helper" not in folder.name
    assert WorkspaceFolders.of(home).folder("helper-bot", "person-4711") == folder  # the key is kept
    assert oct((home / KEY_FILE).stat().st_mode & 0o777) == "0o600"
    assert WorkspaceFolders.of(tmp_path / "other-home").folder("helper-bot", "person-4711").name != folder.name
    assert WorkspaceFolders.of(home).folder("other-bot", "person-4711") != folder


def test_a_workspace_of_the_old_layout_is_moved_to_its_opaque_name_on_first_use_with_its_files(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    old = home / "workspaces" / "helper" / "person-5"
    (old / "notes").mkdir(parents=True)
    (old / "notes" / "plan.txt").write_text("Ann's plan")
    feature = WorkspaceFeature(home, "helper", WorkspaceSettings(), admins=[])
    ws = feature.workspace_for(chat_kind="dm", person_id=5, session_key="telegram:dm:5")
    assert (ws.root / "notes" / "plan.txt").read_text() == "Ann's plan"
    assert ws.root.name != "person-5" and not old.exists()
    assert not (home / "workspaces" / "helper").exists()  # the emptied bot folder goes too


def test_an_old_workspace_is_copied_to_a_root_on_another_file_system_and_then_removed(tmp_path: Path,
                                                                                       tmpfs_root: Path) -> None:
    home = tmp_path / "home"
    old = home / "workspaces" / "helper" / "person-5"
    old.mkdir(parents=True)
    (old / "kept.txt").write_text("kept")
    os.symlink("/etc/passwd", old / "link")  # copied as the link it is, never followed
    folder = WorkspaceFolders.of(home, tmpfs_root).folder("helper", "person-5")
    assert folder.parent == tmpfs_root and (folder / "kept.txt").read_text() == "kept"
    assert os.readlink(folder / "link") == "/etc/passwd"
    assert not old.exists() and [p.name for p in tmpfs_root.iterdir()] == [folder.name]  # no half copy left


def test_a_root_of_its_own_file_system_shows_commands_nothing_and_a_folder_under_the_home_says_why(
        tmp_path: Path, tmpfs_root: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert mounts.exposure(tmpfs_root, home) is None
    under_home = home / "workspaces"
    under_home.mkdir()
    said = mounts.exposure(under_home, home)
    assert said is not None and said.startswith(f"{under_home} is not a mount point")
    assert "home/workspaces/<name>, in /proc/self/mountinfo" in said and "HERMES_WORKSPACE_ROOT" in said


DOCKER = """\
20 1 0:40 / / rw - overlay overlay rw
30 20 8:1 /var/lib/docker/volumes/hermes-data/_data /data rw - ext4 /dev/sda1 rw
31 20 8:1 /var/lib/docker/volumes/hermes-workspaces/_data /workspaces rw - ext4 /dev/sda1 rw
32 20 8:1 /var/lib/docker/volumes/hermes-data/_data/inner /data/inner rw - ext4 /dev/sda1 rw
33 20 8:1 /srv/with\\040space /spaced rw - ext4 /dev/sda1 rw
"""


def test_two_volumes_of_one_device_show_apart_but_a_mount_of_a_folder_inside_the_home_is_reported() -> None:
    assert mounts.exposure(Path("/workspaces"), Path("/data"), DOCKER) is None
    inside = mounts.exposure(Path("/data/inner"), Path("/data"), DOCKER)
    assert inside is not None and "inside HERMES_HOME's file system path" in inside
    assert "/var/lib/docker/volumes/hermes-data/_data/inner/<name>" in inside
    assert mounts.seen_inside(Path("/spaced/x"), mounts.parse(DOCKER)) == Path("/srv/with space/x")


def test_at_start_one_warning_says_what_a_sandboxed_command_can_learn_and_how_to_fix_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    home = tmp_path / "home"
    mounts.say_what_commands_see.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="hermes_engine.workspace.mounts"):
            mounts.say_what_commands_see(home / "workspaces", home)
            mounts.say_what_commands_see(home / "workspaces", home)  # a second bot on the same root
    finally:
        mounts.say_what_commands_see.cache_clear()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("workspaces: ") and "/proc/self/mountinfo" in said[0]
    assert "mount a file system of its own (a volume or tmpfs) at HERMES_WORKSPACE_ROOT" in said[0]


async def test_a_sandboxed_mcp_servers_folder_shows_in_mountinfo_as_an_opaque_name_and_its_old_folder_moves_there(
        tmp_path: Path, tmpfs_root: Path) -> None:
    import contextlib

    from engine_harness import make_profile

    from hermes_engine.config import Settings
    from hermes_engine.workspace import sandbox
    from hermes_gateway.wiring import mcp_features

    if sandbox.unavailable_reason():
        pytest.skip(str(sandbox.unavailable_reason()))
    home = tmp_path / "home"
    (home / "mcp" / "helper-bot" / "notes").mkdir(parents=True)  # the old place: <home>/mcp/<bot>/<server>
    (home / "mcp" / "helper-bot" / "notes" / "token").write_text("kept")
    profile = make_profile(name="helper-bot", mcp_servers={
        "notes": {"command": "sh", "args": ["-c", "cat token; cat /proc/self/mountinfo"]}})
    [feature] = mcp_features(Settings(home=home, workspace_root=tmpfs_root), profile)
    confine = feature.servers.runners["notes"].confine  # type: ignore[attr-defined]
    assert confine.home.parent == tmpfs_root and not (home / "mcp" / "helper-bot").exists()
    with contextlib.ExitStack() as stack:
        params = await confine.parameters("notes", profile.mcp_servers["notes"], stack)
        done = await asyncio.to_thread(subprocess.run, [params.command, *params.args], capture_output=True,
                                       text=True, timeout=30, check=False)
    assert done.returncode == 0 and done.stdout.startswith("kept"), done.stderr
    assert str(home) not in done.stdout and "helper" not in done.stdout
    line = next(f for f in (row.split(" ") for row in done.stdout.splitlines()) if len(f) > 4 and f[4] == "/data")
    assert line[3] == f"/{confine.home.name}/notes"


def test_a_damaged_naming_key_is_refused_in_one_sentence_and_no_folder_is_made(tmp_path: Path) -> None:
    from hermes_engine.workspace.space import WorkspaceError

    home = tmp_path / "home"
    home.mkdir()
    (home / KEY_FILE).write_bytes(b"")  # a disk that filled up, a file emptied by hand
    feature = WorkspaceFeature(home, "helper", WorkspaceSettings(), admins=[])
    with pytest.raises(WorkspaceError, match=r"holds 0 bytes, not the 32 .* restore it from a backup"):
        feature.workspace_for(chat_kind="dm", person_id=5, session_key="telegram:dm:5")
    assert not (home / "workspaces").exists()
