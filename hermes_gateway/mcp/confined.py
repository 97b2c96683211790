"""A stdio MCP server's command line under the terminal's sandbox (`hermes_engine/workspace/sandbox.py`).

The SDK's stdio client starts whatever command it is given and passes it no descriptors, so it starts the
launcher (`launch.py`), which makes the server's cgroup and network and runs `bwrap … -- <command>` as its
own child. An MCP server is code of someone else's running beside the gateway: without this it could read
the gateway's database (every conversation of every person) and, as the same user, the keys in the
gateway's environment.

What the server may see: the system folders, its program's own installation (a Python server needs its
interpreter and the virtual environment's site-packages), files named in its arguments, the profile's
`read_paths` (read-only) and `write_paths`, and a folder of its own beside the workspaces, named as opaquely
(`hermes_gateway.wiring.server_sandbox`), mounted at `/data` as its home. A root gateway runs it as a uid leased
from the terminal's range for the server's lifetime. What it may reach: its own loopback only, or with `network:
true` the world through slirp4netns, never this host's 127.0.0.1. What it may hold: `memory_mb` and `processes`
for its whole process tree where a cgroup can be made (else per process, and per uid: a warning at the first
start says so). Where bwrap (or, for a network, slirp4netns) cannot run, a sandboxed server is not started: the
terminal's rule, nothing runs unsandboxed that was not declared trusted."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from mcp.client.stdio import StdioServerParameters

from hermes_engine.config import WorkspaceSettings
from hermes_engine.config.mcp import McpServerSettings
from hermes_engine.workspace import cgroups, sandbox, sandbox_network
from hermes_engine.workspace.uids import UidPool
from hermes_gateway.mcp.launch import LaunchSpec

_SYSTEM = ("/usr/", "/bin/", "/sbin/", "/lib", "/etc/")  # mounted for every sandbox already
MB = 1024 * 1024
log = logging.getLogger(__name__)


class SandboxRefused(RuntimeError):
    """A sandboxed server cannot start; the message says why in one sentence."""


@dataclass(frozen=True)
class ServerSandbox:
    """Where one bot's sandboxed servers keep their files, and the uids a root gateway runs them as."""

    home: Path  # the bot's servers' folders, one per server
    uids: UidPool

    async def parameters(self, name: str, settings: McpServerSettings,
                         stack: contextlib.ExitStack) -> StdioServerParameters:
        """The SDK's parameters for `bwrap … -- <command>`; the uid lease is held until `stack` closes. Built
        in a thread: it probes bwrap, looks at files and hands the server's folder to its uid."""
        return await asyncio.to_thread(self._parameters, name, settings, stack)

    def _parameters(self, name: str, settings: McpServerSettings, stack: contextlib.ExitStack) -> StdioServerParameters:
        assert settings.command is not None
        reason = sandbox.unavailable_reason()
        if reason is not None:
            raise SandboxRefused(f"{reason} A sandboxed MCP server never runs unsandboxed (sandbox: false is for "
                                 "servers trusted with the gateway's files).")
        reason = sandbox_network.unavailable_reason() if settings.network else None
        if reason is not None:
            raise SandboxRefused(f"{reason} A sandboxed MCP server given network: true never shares the host's "
                                 "network.")
        _say_which_limits_hold()
        program = shutil.which(settings.command)
        if program is None:
            raise SandboxRefused(f"{settings.command!r} is not a program on PATH.")
        missing = next((p for p in (*settings.read_paths, *settings.write_paths) if not os.path.exists(p)), None)
        if missing is not None:
            raise SandboxRefused(f"{missing}, which read_paths or write_paths grant, does not exist.")
        folder = self.home / name
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        # A root gateway runs it as a uid of its own, leased for the server's lifetime.
        uid = stack.enter_context(self.uids.lease(folder)) if sandbox.drops_privileges() else None
        files = [a for a in settings.args if os.path.isabs(a) and os.path.isfile(a)]
        readable = dict.fromkeys([*program_paths(Path(program)), *files, *settings.read_paths])
        defaults = WorkspaceSettings()  # the profile put its own workspace's limits where the server set none
        spec = LaunchSpec(command=[program, *settings.args], folder=str(folder), uid=uid, read=list(readable),
                          write=settings.write_paths, cwd=settings.cwd or sandbox.SERVER_DATA,
                          memory_bytes=(settings.memory_mb or defaults.memory_mb) * MB,
                          processes=settings.processes or defaults.processes, network=settings.network,
                          parent=os.getpid(), cgroup=_cgroup_removed_after(stack))
        argv = spec.argv()
        return StdioServerParameters(command=argv[0], args=argv[1:], env=settings.resolved_env())


def _cgroup_removed_after(stack: contextlib.ExitStack) -> str | None:
    """The name of the server's cgroup, which its launcher makes; left behind if the SDK has to kill the
    launcher outright (SIGKILL runs none of its clean-up), so removed, with anything still in it, when `stack`
    closes: after the client ended the launcher, and before the server's uid lease goes back to the pool."""
    found = cgroups.hierarchies()
    if found is None:
        return None
    name = cgroups.new_name()
    stack.callback(cgroups.remove_left, found, name)
    return name


@functools.cache
def _say_which_limits_hold() -> None:
    """Once a process, at the first sandboxed server's start: whether its limits hold for its whole tree."""
    if cgroups.hierarchies() is not None:
        log.info("MCP server sandbox: memory and process limits hold for each server's whole process tree (a "
                 "cgroup per server).")
    else:
        log.warning("MCP server sandbox: no cgroup can be made here (%s): a server's memory limit holds per "
                    "process, and its process limit counts the processes of its uid.", cgroups.unavailable_reason())


def program_paths(program: Path) -> list[str]:
    """What a program needs to read beyond the system folders: the virtual environment it lives in, the
    one its `#!` line names, and the installation of an interpreter outside them (a pyenv or uv Python)."""
    found: list[str] = []
    for path in (program, *_interpreter(program)):
        venv = path.parent.parent
        if (venv / "pyvenv.cfg").is_file():
            found.append(str(venv))
        real = Path(os.path.realpath(path))
        if real.exists() and not str(real).startswith(_SYSTEM):
            found.append(str(real.parent.parent) if real.parent.name == "bin" else str(real))
    return list(dict.fromkeys(found))


def _interpreter(program: Path) -> list[Path]:
    """The interpreter a script's `#!` line names (the first word: `/usr/bin/env` stays a system program)."""
    with contextlib.suppress(OSError), program.open("rb") as f:
        head = f.readline(512)
        if head.startswith(b"#!") and head[2:].split():
            return [Path(os.fsdecode(head[2:].split()[0]))]
    return []

