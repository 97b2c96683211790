"""The program the MCP SDK starts in a sandboxed stdio server's place: `python -m hermes_gateway.mcp.launch <spec>`.

The SDK's stdio client starts one command with the MCP pipes as its stdin and stdout and hands it no other
descriptor, yet a server's limits and network need a parent that holds some: bwrap joins the server's cgroup
through an open `cgroup.procs` between fork and exec, and a network needs bwrap's `--info-fd` and
`--block-fd` and slirp4netns beside it (`sandbox_network.py`). This launcher is that parent. It makes the
server's cgroup (`cgroups.py`; where none can be made, the rlimits alone hold, as for the terminal, and the
gateway said so once at start), starts bwrap with the MCP pipes as its stdin and stdout, attaches the
network if the server has one, waits, then takes the network and the cgroup down and exits with the
server's status.

It dies with the gateway: its parent-death signal is SIGTERM, the signal the SDK also sends when a server
does not end once its stdin is closed. On it the launcher kills bwrap, whose sandbox dies with it (its first
process dies with bwrap, `--die-with-parent`, and takes its pid namespace along), and removes slirp4netns and
the cgroup before it exits. Killed outright (SIGKILL, which the SDK sends to the whole process group two
seconds after SIGTERM), bwrap and slirp4netns die with it, and only its cgroup is left: the gateway names it
in the spec and removes it once the SDK's client has ended (`hermes_gateway/mcp/confined.py`).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from hermes_engine.workspace import sandbox, sandbox_network

MODULE = "hermes_gateway.mcp.launch"
PR_SET_PDEATHSIG = 1
FAILED = 70  # the launcher could not start the server (EX_SOFTWARE); the line before it on stderr says why


@dataclass(frozen=True)
class LaunchSpec:
    """What the gateway decided for one server, handed over on the command line as JSON (no secret is in it:
    the server's environment travels as the launcher's own). A dataclass, not a pydantic model: the launcher
    lives as long as its server, and pydantic would double its memory (15 to 30 MB)."""

    command: list[str]
    folder: str  # the server's own, at /data
    uid: int | None  # a root gateway's lease, held by the gateway while the server runs
    read: list[str]
    write: list[str]
    cwd: str
    memory_bytes: int
    processes: int
    network: bool
    parent: int  # the gateway's pid: if the launcher's parent is another, the gateway is gone already
    cgroup: str | None  # the server's cgroup's name (`cgroups.new_name`), the gateway's, to remove what a kill left

    def argv(self) -> list[str]:
        """Isolated (`-I`): the server's environment, which the launcher shares, cannot steer its imports."""
        return [sys.executable, "-I", "-m", MODULE, json.dumps(dataclasses.asdict(self))]

    @classmethod
    def from_json(cls, text: str) -> LaunchSpec:
        """Raises ValueError naming the first field that is missing, unknown or of the wrong type."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("the spec is not a JSON object")
        names = [field.name for field in dataclasses.fields(cls)]
        odd = next((name for name in [*names, *data] if name not in data or name not in names), None)
        if odd is not None:
            raise ValueError(f"{odd} is {'missing' if odd not in data else 'not a field of the spec'}")
        for name, kind in _KINDS.items():
            value = data[name]
            if not isinstance(value, kind) or (isinstance(value, list) and not all(isinstance(v, str) for v in value)):
                raise ValueError(f"{name} is invalid ({type(value).__name__} {value!r})")
        return cls(**data)

    def bwrap_argv(self, extra: Sequence[str] = ()) -> list[str]:
        return sandbox.server_argv(self.command, Path(self.folder), self.uid, read=self.read, write=self.write,
                                   cwd=self.cwd, extra=extra)


_KINDS: dict[str, type | tuple[type, ...]] = {
    "command": list, "folder": str, "uid": (int, type(None)), "read": list, "write": list, "cwd": str,
    "memory_bytes": int, "processes": int, "network": bool, "parent": int, "cgroup": (str, type(None))}


class _Stop:
    """The signals that end the server: the first kills bwrap (or, before it runs, keeps it from starting)."""

    def __init__(self) -> None:
        self.asked = False
        self.proc: subprocess.Popen[bytes] | None = None
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.asked = True
        self.kill()

    def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)


def _die_with(parent: int) -> None:
    """SIGTERM when the gateway dies, however it dies; and none of this if it died before the ask."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        raise SystemExit(FAILED)


def _limits(spec: LaunchSpec, cgroup_procs: Sequence[int]) -> Callable[[], None]:
    """Between fork and exec of bwrap: into the cgroup, then the rlimits. Memory per process always; the
    process count per uid only without a cgroup (`pids.max` is the server's own). No CPU-time or file-size
    limit: the server lives as long as the gateway and its folder has no quota."""
    per_uid = () if cgroup_procs else ((resource.RLIMIT_NPROC, spec.processes),)
    rlimits = (*per_uid, (resource.RLIMIT_AS, spec.memory_bytes), (resource.RLIMIT_CORE, 0))

    def apply() -> None:  # plain system calls only
        for fd in cgroup_procs:
            os.write(fd, b"0")
        for which, value in rlimits:
            resource.setrlimit(which, (value, value))
    return apply


def _quiet_pipes() -> None:
    """The server holds the MCP pipes alone: when it ends, the gateway reads the end of its output at once."""
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)


def _status(code: int) -> int:
    return 128 - code if code < 0 else code


def run(spec: LaunchSpec) -> int:
    """Start the server, wait for it, take everything down; the server's exit status."""
    stop = _Stop()
    _die_with(spec.parent)
    with contextlib.ExitStack() as stack:
        try:  # the terminal's own: one way to make, bound and remove a cgroup
            group = sandbox.command_group(stack, sandbox.Limits(memory_bytes=spec.memory_bytes,
                                                                processes=spec.processes), spec.cgroup)
        except sandbox.SandboxUnavailable as exc:
            print(f"MCP server launcher: {exc}", file=sys.stderr)
            return FAILED
        pipes = stack.enter_context(sandbox_network.plumbing()) if spec.network else None
        if stop.asked:
            return _status(-signal.SIGTERM)
        stop.proc = subprocess.Popen(spec.bwrap_argv(pipes.bwrap_args() if pipes else ()), close_fds=True,
                                     pass_fds=pipes.child_fds() if pipes else (),
                                     preexec_fn=_limits(spec, group.procs if group else ()))
        if stop.asked:  # a signal between the check above and here found no bwrap to kill
            stop.kill()
        _quiet_pipes()
        if pipes is not None:
            sandbox_network.started(pipes)
            try:
                sandbox_network.attach(pipes, userns=not sandbox.drops_privileges())
            except sandbox_network.NetworkUnavailable as exc:
                stop.kill()
                stop.proc.wait()
                if not stop.asked:
                    print(f"MCP server launcher: {exc}.", file=sys.stderr)
                return FAILED
        return _status(stop.proc.wait())


def main(argv: Sequence[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) != 1:
        raise SystemExit(f"usage: python -m {MODULE} <spec as JSON>")
    try:
        spec = LaunchSpec.from_json(args[0])
    except ValueError as exc:  # json's own errors are ValueErrors too
        raise SystemExit(f"MCP server launcher: {exc}; nothing was started.") from None
    raise SystemExit(run(spec))


if __name__ == "__main__":
    main()
