"""File tools against a command that rearranges the workspace while they run: a folder swapped for a
symlink between a tool's check and its open leads nowhere, and a model's regular expression that
backtracks for ever ends the search at its deadline instead of holding the gateway."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from pathlib import Path, PurePosixPath

import pytest

from hermes_engine.workspace import files
from hermes_engine.workspace.space import Workspace, WorkspaceError


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws", 1024 * 1024).ensure()


def test_a_folder_that_is_a_symlink_by_the_time_it_is_opened_is_refused(ws: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("private")
    os.symlink(outside, ws.root / "d")  # as if swapped in after the path was checked
    with pytest.raises(WorkspaceError, match="symlink"), ws.folder(PurePosixPath("d")):
        pass
    with pytest.raises(WorkspaceError, match="symlink"), ws.folder(PurePosixPath("d/deeper"), create=True):
        pass
    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_a_command_swapping_a_folder_for_a_symlink_never_lets_a_file_tool_out(ws: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("private")
    stop = threading.Event()

    folder, parked = ws.root / "d", ws.root / "d-parked"
    folder.mkdir()  # before the tools start: a write_file would make it too

    def swap() -> None:  # what a sandboxed command owning the workspace can do, as fast as it can
        while not stop.is_set():
            with contextlib.suppress(OSError):  # a write_file may have made `d` again in between
                os.rename(folder, parked)
                os.symlink(outside, folder)
                os.unlink(folder)
                os.rename(parked, folder)
            with contextlib.suppress(OSError):  # the swap goes on whatever a tool did meanwhile
                if parked.exists() and not folder.exists():
                    os.rename(parked, folder)
                elif parked.exists():
                    shutil.rmtree(parked)

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            for tool in (lambda: files.write_text(ws, "d/pwned.txt", "x"),
                         lambda: files.read_lines(ws, "d/secret.txt"),
                         lambda: files.list_entries(ws, "d"),
                         lambda: files.search(ws, "private")):
                try:
                    text = tool()
                except (WorkspaceError, OSError):
                    continue
                assert "private" not in text and "secret.txt" not in text
    finally:
        stop.set()
        swapper.join()
    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_a_regular_expression_that_backtracks_for_ever_stops_at_the_deadline(ws: Workspace) -> None:
    (ws.root / "notes.txt").write_text("a" * 40 + "b\nfine line\n")
    result = files.search(ws, "(a|aa)+$")
    assert "[stopped after" in result and "takes too long" in result


def test_search_finds_lines_and_names_in_nested_folders(ws: Workspace) -> None:
    (ws.root / "src" / "pkg").mkdir(parents=True)
    (ws.root / "src" / "pkg" / "tea.py").write_text("green = 1\nblack = 2\n")
    (ws.root / "blob.bin").write_bytes(b"\x00green")
    assert files.search(ws, "green|tea") == "src/pkg/tea.py (name)\nsrc/pkg/tea.py:1: green = 1"
