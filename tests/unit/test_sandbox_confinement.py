"""The workspace's walls: file tools never leave it (`..`, symlinks, /proc/self/root), commands in the
sandbox cannot write outside it, not even through an open file descriptor, and run as a non-root uid;
shell metacharacters stay inside the one argument the shell gets; output is cut to head and tail."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from net_kit import serving

from hermes_engine.workspace import files, sandbox
from hermes_engine.workspace.space import Workspace, WorkspaceError

LIMITS = sandbox.Limits(seconds=20)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws", 1024 * 1024).ensure()


def test_dot_dot_and_absolute_paths_are_refused(ws: Workspace, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s3cret")
    for path in ("../secret.txt", "a/../../secret.txt", str(tmp_path / "secret.txt"), "/etc/passwd"):
        with pytest.raises(WorkspaceError):
            ws.read_bytes(path)
        with pytest.raises(WorkspaceError):
            ws.write_bytes(path, b"x")


def test_symlinks_are_never_followed(ws: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("private")
    os.symlink(outside, ws.root / "dirlink")
    os.symlink(outside / "f.txt", ws.root / "filelink")
    os.symlink("/proc/self/root/etc", ws.root / "proclink")
    for path in ("dirlink/f.txt", "filelink", "proclink/passwd"):
        with pytest.raises(WorkspaceError):
            files.read_lines(ws, path)
        with pytest.raises(WorkspaceError):
            files.write_text(ws, path, "overwritten")
    assert (outside / "f.txt").read_text() == "private"
    assert "symlink, not followed" in files.list_entries(ws)


def test_a_fifo_left_by_a_command_is_refused_without_blocking(ws: Workspace) -> None:
    os.mkfifo(ws.root / "pipe")
    with pytest.raises(WorkspaceError, match="not a regular file"):
        files.read_lines(ws, "pipe")
    with pytest.raises(WorkspaceError, match="not a regular file"):
        files.write_text(ws, "pipe", "x")


def test_a_command_cannot_write_past_the_quota_but_the_commands_after_it_run(tmp_path: Path) -> None:
    full = Workspace(tmp_path / "full", 100).ensure()
    (full.root / "big").write_bytes(b"x" * 200)
    result = sandbox.run(full.root, "echo more > f; ls; rm big; ls; echo end",
                         sandbox.Limits(seconds=20, file_bytes=full.room()))
    text = result.text()
    assert "echo: I/O error" in text and text.endswith("end\n[exit code 0]")
    assert full.size() == 0


def test_writes_beyond_the_quota_are_refused(tmp_path: Path) -> None:
    small = Workspace(tmp_path / "small", 100).ensure()
    files.write_text(small, "a.txt", "x" * 60)
    with pytest.raises(WorkspaceError, match="quota"):
        files.write_text(small, "b.txt", "y" * 60)
    assert not (small.root / "b.txt").exists()
    files.write_text(small, "a.txt", "z" * 90)  # replacing counts the old size out


def test_a_command_cannot_write_outside_by_path_proc_or_file_descriptor(ws: Workspace, tmp_path: Path) -> None:
    target = tmp_path / "victim.txt"
    target.write_text("intact")
    held = os.open(target, os.O_RDWR)  # the gateway holds it open: the sandbox must not inherit it
    try:
        command = (f"echo x > {target}; echo x > /proc/self/root{target}; echo x > /proc/1/root{target}; "
                   f"echo x >&{held}; echo x > /proc/self/fd/{held}; echo x > /usr/evil; ls /proc/1/root/tmp")
        result = sandbox.run(ws.root, command, LIMITS)
    finally:
        os.close(held)
    assert target.read_text() == "intact"
    assert not Path("/usr/evil").exists()
    assert result.exit_code != 0


def test_commands_run_as_a_non_root_uid_without_capabilities(ws: Workspace) -> None:
    result = sandbox.run(ws.root, "id -u; grep CapEff /proc/self/status", LIMITS)
    uid, caps = result.head.decode().splitlines()[:2]
    assert uid != "0"
    assert caps.split()[1] == "0000000000000000"


def test_shell_metacharacters_stay_inside_the_command(ws: Workspace, tmp_path: Path) -> None:
    marker = tmp_path / "injected"
    command = f"echo 'a; touch {marker}' \"$(echo b)\" `echo c` && printf '%s\\n' \"--bind / /x\""
    result = sandbox.run(ws.root, command, LIMITS)
    assert result.head.decode().splitlines() == [f"a; touch {marker} b c", "--bind / /x"]
    assert not marker.exists()
    argv = sandbox.bwrap_argv(3, command, uid=4242)
    assert argv[-1] == command and not any(command in part for part in argv[:-1])


def test_ten_megabytes_of_output_keep_head_and_tail(ws: Workspace) -> None:
    result = sandbox.run(ws.root, "echo START; head -c 10000000 /dev/zero | tr '\\0' y; echo; echo END", LIMITS)
    text = result.text()
    assert text.startswith("START\n") and text.endswith("END\n[exit code 0]")
    assert len(result.head) == len(result.tail) == sandbox.KEEP_BYTES
    assert f"… {10_000_011 - 2 * sandbox.KEEP_BYTES:,} bytes omitted …" in text
    assert len(text) < 3 * sandbox.KEEP_BYTES


def test_no_network_inside_not_even_the_hosts_loopback(ws: Workspace) -> None:
    probe = "python3 -c \"import socket; print(len(socket.if_nameindex()))\""
    result = sandbox.run(ws.root, probe, LIMITS)
    assert result.head.decode().strip() == "1"  # only the sandbox's own loopback


def _global_address() -> str | None:
    """An address of this host on a real interface (the sandbox's network reaches it as a LAN peer would)."""
    try:
        shown = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True,
                               text=True, check=False).stdout
    except OSError:
        return None
    found = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/", shown)
    return found.group(1) if found else None


@pytest.mark.skipif(_global_address() is None, reason="this host has no address outside its loopback")
def test_a_network_allowed_by_the_profile_reaches_the_world_but_never_the_hosts_loopback(ws: Workspace) -> None:
    address = _global_address()
    assert address is not None
    # 127.0.0.1 on the host is where the gateway, its database and MCP servers listen.
    with serving(address) as outside_port, serving("127.0.0.1") as loopback_port:
        probe = ("import socket\n"
                 f"for host, port in (({address!r}, {outside_port}), ('10.0.2.2', {loopback_port}), "
                 f"('127.0.0.1', {loopback_port})):\n"
                 "    try:\n"
                 "        print(host, socket.create_connection((host, port), 3).recv(100).decode().strip())\n"
                 "    except OSError as exc:\n"
                 "        print(host, 'unreachable', type(exc).__name__)\n"
                 "print(open('/etc/resolv.conf').read().strip())\n")
        result = sandbox.run(ws.root, f"python3 -c {shlex.quote(probe)}", LIMITS, network=True)
    lines = result.text().splitlines()
    assert lines[0] == f"{address} hello from {address}"
    assert lines[1].startswith("10.0.2.2 unreachable") and lines[2].startswith("127.0.0.1 unreachable")
    assert lines[3] == "nameserver 10.0.2.3" and lines[-1] == "[exit code 0]"
