"""The bubblewrap launcher: one command, one throw-away sandbox.

Each command runs in its own bwrap instance: the workspace is the only writable folder (mounted at
`/workspace`), the system folders are mounted read-only, /tmp and /proc are fresh, and every namespace is
new (no network: only a loopback of its own, unless the profile allows a network, which never leads to
this host's loopback: `sandbox_network.py`). When the gateway runs as root the sandbox is started as an
unprivileged uid, so even a kernel bug in the namespace code meets a process that owns nothing; each
workspace with a command running gets a uid of its own (`uids.py`), so where no cgroup can be made the
process limit (then counted per uid) of one command is not spent by another's. Limits
(processes, memory, CPU time, file size) are set between fork and exec, and a command over its time
is killed with everything it started (bwrap dies with its parent, and the namespace's first process
takes the rest with it). Where a cgroup can be made (`cgroups.py`), the memory and process limits hold for
the command's whole tree together, and the launcher joins that cgroup before it execs bwrap; elsewhere they
hold per process and per uid (`limits_holding` says which). /tmp is a fresh tmpfs no larger than what the
workspace has left of its quota, nor than half the memory limit: its pages are memory the command's cgroup
counts and cannot reclaim, so a full /tmp refuses a write ("No space left on device") before it could
leave the command's processes no memory to run in. The cgroup namespace is the sandbox's own
(/proc/self/cgroup shows "/"); /proc/self/mountinfo still shows the workspace's folder as a path within
its file system, since a bind mount names its source so, whatever bwrap does: hence the workspaces' own
root and opaque names (`folders.py`, `mounts.py`).

The command text is handed to `/bin/sh -c` as one argument: it is never parsed or quoted by the launcher.
Output is kept at its head and tail; what lies between is counted, not stored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import resource
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hermes_engine.workspace import cgroups, sandbox_network
from hermes_engine.workspace.uids import NoFreeUid, UidPool, pool_for

INSIDE = "/workspace"
SERVER_DATA = "/data"  # a sandboxed server's own folder
KEEP_BYTES = 8 * 1024  # output kept at the head and at the tail
_SYSTEM_RO = ("/usr", "/etc/alternatives", "/etc/ld.so.cache", "/etc/passwd", "/etc/group", "/etc/localtime",
              "/etc/ssl", "/etc/mime.types")
_ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
PROBE = ("bwrap", "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true")
SETPRIV = "/usr/bin/setpriv"


class SandboxUnavailable(RuntimeError):
    """bwrap cannot run here; the message says why. The terminal refuses to start rather than run bare."""


@dataclass(frozen=True)
class Limits:
    seconds: float = 60.0
    memory_bytes: int = 1024 * 1024 * 1024
    processes: int = 128
    cpu_seconds: int = 60
    file_bytes: int = 100 * 1024 * 1024


@dataclass(frozen=True)
class RunResult:
    head: bytes
    tail: bytes
    omitted: int  # bytes between head and tail that were not kept
    exit_code: int | None  # None: killed at the time limit
    timed_out: bool = False
    notes: tuple[str, ...] = ()  # limits the command reached, in words

    def text(self) -> str:
        """What the model reads: head, a line saying how much was left out, tail, then the exit code."""
        body = self.head.decode("utf-8", "replace")
        if self.omitted:
            body += f"\n… {self.omitted:,} bytes omitted …\n"
        body += self.tail.decode("utf-8", "replace")
        if body and not body.endswith("\n"):
            body += "\n"
        body += "".join(note + "\n" for note in self.notes)
        if self.timed_out:
            return body + "[killed: the command ran past its time limit]"
        return body + f"[exit code {self.exit_code}]"


class _Capture:
    """Head and tail of a stream of bytes, in bounded memory."""

    def __init__(self, keep: int = KEEP_BYTES) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[:-self.keep]

    def result(self, exit_code: int | None, timed_out: bool) -> RunResult:
        omitted = self.total - len(self.head) - len(self.tail)
        return RunResult(bytes(self.head), bytes(self.tail), omitted, exit_code, timed_out)


def drops_privileges() -> bool:
    return os.geteuid() == 0


@functools.cache
def unavailable_reason() -> str | None:
    """Why bwrap cannot run on this machine (None: it can). Probed once per process."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed; install the Debian package 'bubblewrap'."
    if drops_privileges() and not os.access(SETPRIV, os.X_OK):
        return f"{SETPRIV} (util-linux) is missing; as root the sandbox needs it to drop to an unprivileged uid."
    try:
        done = subprocess.run(PROBE, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap could not be started: {exc}"
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
        return f"bwrap cannot create its namespaces here ({reason}); user namespaces may be disabled."
    return None


def limits_holding() -> str:
    """Which limits bound a command here, in one sentence for the log at start."""
    if cgroups.hierarchies() is not None:
        return "memory and process limits hold for each command's whole process tree (a cgroup per command)."
    per_uid = ("the uid leased to the command's workspace" if drops_privileges()
               else "this gateway's uid, shared by all its sandboxes and the gateway itself")
    return (f"no cgroup can be made here ({cgroups.unavailable_reason()}): the memory limit holds per process, "
            f"not for a command's processes together, and the process limit counts the processes of {per_uid}.")


def bwrap_argv(workspace_fd: int, command: str, uid: int | None = None, extra: Sequence[str] = (),
               tmp_bytes: int | None = None) -> list[str]:
    """The full argument vector; `command` is one element, for `/bin/sh -c`. The workspace is passed as an
    open folder, so a folder swapped for a symlink after it was checked is not followed.

    As root, bwrap runs with real privileges to build the mounts, and `setpriv` then becomes `uid` (leased
    for this workspace) for good (no capabilities, no new privileges) before the shell starts: the kernel counts its
    processes against that uid's limit (a root-mapped uid in a user namespace would escape the count).
    Otherwise bwrap maps the caller's own uid in a new user namespace and drops every capability."""
    argv, drop = _confinement(uid)
    shell = [*drop, *_shell(command)]
    tmp_size = ["--size", str(max(tmp_bytes, 4096))] if tmp_bytes is not None else []
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", *tmp_size, "--tmpfs", "/tmp",
             "--bind-fd", str(workspace_fd), INSIDE, "--chdir", INSIDE, "--setenv", "HOME", INSIDE, *extra,
             "--", *shell]
    return argv


def _confinement(uid: int | None) -> tuple[list[str], list[str]]:
    """bwrap's namespaces and the read-only system folders, and what goes before the command (`setpriv`
    for a root gateway): the part every sandbox shares."""
    if drops_privileges():
        if uid is None or uid == 0:
            raise ValueError("a root gateway must name the unprivileged uid the sandbox runs as")
        argv = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
        drop = [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs"]
    else:
        argv = ["bwrap", "--unshare-all", "--unshare-user", "--cap-drop", "ALL"]
        drop = []
    argv += ["--die-with-parent", "--new-session", "--perms", "0755", "--dir", "/etc"]  # readable by the uid
    for path in _SYSTEM_RO:
        if os.path.exists(path):
            argv += ["--ro-bind", path, path]
    for path in _ROOT_LINKS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    return argv, drop


def server_argv(command: Sequence[str], folder: Path, uid: int | None = None, *, read: Sequence[str] = (),
                write: Sequence[str] = (), cwd: str = SERVER_DATA, extra: Sequence[str] = ()) -> list[str]:
    """The argument vector of a long-lived server (an MCP server over stdio) in a sandbox of its own: the
    terminal's confinement, with `folder` (the server's own, writable) at `/data` as its home (and working
    folder unless `cwd` names another), and the host paths the profile grants, read-only or writable, at
    their own place; `extra` as for `bwrap_argv` (the network's descriptors, `sandbox_network`).
    Nothing else of the host's files is there (not the gateway's home), no network but its own loopback
    unless one is attached; every mount is named by path."""
    argv, drop = _confinement(uid)
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
    for how, paths in (("--ro-bind", read), ("--bind", write)):
        for path in paths:
            argv += [*_open_parents(path), how, path, path]
    argv += ["--bind", str(folder), SERVER_DATA, "--chdir", cwd, "--setenv", "HOME", SERVER_DATA,
             *extra, "--", *drop, *command]
    return argv


def _open_parents(path: str) -> list[str]:
    """The folders above a mount made traversable (bwrap would make them 0700, closed to a dropped uid);
    the system folders are there already."""
    argv: list[str] = []
    for parent in reversed(Path(path).parents[:-1]):
        if not any(parent == Path(top) or Path(top) in parent.parents for top in (*_SYSTEM_RO, *_ROOT_LINKS)):
            argv += ["--perms", "0755", "--dir", str(parent)]
    return argv


def _shell(command: str) -> list[str]:
    """`/bin/sh -c command`, with the file-size signal ignored first: a write past the quota then fails with
    "File too large" instead of killing the shell, so the commands after it (an `rm`) still run. The
    command stays the last argument, read by the inner shell as `$1`."""
    return ["/bin/sh", "-c", 'trap "" XFSZ; exec /bin/sh -c "$1"', "sh", command]


def _set_limits(limits: Limits, cgroup_procs: Sequence[int] = ()) -> Callable[[], None]:
    """In a cgroup the process limit is the command's own (`pids.max`); RLIMIT_NPROC, which counts every
    process of the uid, is set only without one, as it would let commands sharing a uid starve each other."""
    per_uid = () if cgroup_procs else ((resource.RLIMIT_NPROC, limits.processes),)
    rlimits = (*per_uid, (resource.RLIMIT_AS, limits.memory_bytes), (resource.RLIMIT_CPU, limits.cpu_seconds),
               (resource.RLIMIT_FSIZE, limits.file_bytes), (resource.RLIMIT_CORE, 0))

    def apply() -> None:  # between fork and exec: plain system calls only
        for fd in cgroup_procs:  # "0": the writing process; what it starts is born inside
            os.write(fd, b"0")
        for which, value in rlimits:
            resource.setrlimit(which, (value, value))
    return apply


ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": INSIDE, "LANG": "C.UTF-8", "TERM": "dumb"}


def run(workspace: Path, command: str, limits: Limits, on_output: Callable[[bytes], None] | None = None,
        keep: int = KEEP_BYTES, stop: threading.Event | None = None, uids: UidPool | None = None,
        network: bool = False) -> RunResult:
    """Run `command` in a fresh sandbox over `workspace`; blocks until it ends, its time is up or `stop`
    is set (the turn was cancelled). `on_output` sees each chunk as it arrives (for showing progress).
    A root gateway runs it as a uid leased from `uids` (the default range when None). `network`: the
    sandbox gets a network of its own, never this host's loopback (`sandbox_network`)."""
    reason = unavailable_reason() or (sandbox_network.unavailable_reason() if network else None)
    if reason is not None:
        raise SandboxUnavailable(reason)
    if not drops_privileges():
        return _run(workspace, command, limits, on_output, keep, stop, None, network)
    try:
        with (uids or pool_for()).lease(workspace) as uid:
            return _run(workspace, command, limits, on_output, keep, stop, uid, network)
    except NoFreeUid as exc:
        raise SandboxUnavailable(str(exc)) from None


def _run(workspace: Path, command: str, limits: Limits, on_output: Callable[[bytes], None] | None, keep: int,
         stop: threading.Event | None, uid: int | None, network: bool) -> RunResult:
    with contextlib.ExitStack() as stack:
        group = command_group(stack, limits)
        pipes = stack.enter_context(sandbox_network.plumbing()) if network else None
        folder = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            proc = subprocess.Popen(bwrap_argv(folder, command, uid, pipes.bwrap_args() if pipes else (),
                                               tmp_bytes=min(limits.file_bytes, limits.memory_bytes // 2)),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    env=ENV, start_new_session=True, close_fds=True,
                                    pass_fds=(folder, *(pipes.child_fds() if pipes else ())),
                                    preexec_fn=_set_limits(limits, group.procs if group else ()))
        finally:
            os.close(folder)
        if pipes is not None:
            sandbox_network.started(pipes)
            try:
                sandbox_network.attach(pipes, userns=not drops_privileges())
            except sandbox_network.NetworkUnavailable as exc:
                _kill(proc)
                proc.wait()
                raise SandboxUnavailable(str(exc)) from None
        result = _collect(proc, limits, on_output, keep, stop)
        return dataclasses.replace(result, notes=_reached(group, limits)) if group is not None else result


def command_group(stack: contextlib.ExitStack, limits: Limits, name: str | None = None) -> cgroups.CommandGroup | None:
    """A command's cgroup, bounded by `limits` and removed when `stack` closes; None where none can be made
    (the rlimits alone hold, and the gateway said so once at start). The one way a command's cgroup is made:
    the terminal's and an MCP server launcher's (`hermes_gateway/mcp/launch.py`), which passes the `name`
    the gateway chose (`cgroups.new_name`), so the gateway removes it should the launcher be killed outright.
    Raises SandboxUnavailable when the cgroup cannot be made, saying why."""
    found = cgroups.hierarchies()
    if found is None:
        return None
    try:
        group = stack.enter_context(cgroups.command_group(found, name))
        group.limit(limits.memory_bytes, limits.processes)
        return group
    except (OSError, ValueError) as exc:
        raise SandboxUnavailable(f"the command's cgroup could not be made ({exc}).") from None


def _reached(group: cgroups.CommandGroup, limits: Limits) -> tuple[str, ...]:
    killed, refused = group.events()
    notes = []
    if killed:
        notes.append(f"[the command reached its memory limit of {limits.memory_bytes // (1024 * 1024)} MB: "
                     f"{killed} process{'es' if killed > 1 else ''} killed]")
    if refused:
        notes.append(f"[the command reached its limit of {limits.processes} processes: {refused} "
                     f"fork{'s' if refused > 1 else ''} refused]")
    return tuple(notes)


def _collect(proc: subprocess.Popen[bytes], limits: Limits, on_output: Callable[[bytes], None] | None, keep: int,
             stop: threading.Event | None) -> RunResult:
    capture = _Capture(keep)
    deadline = time.monotonic() + limits.seconds
    timed_out = False
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (stop is not None and stop.is_set()):
                timed_out = True
                break
            if not selector.select(min(left, 0.2)):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            capture.add(chunk)
            if on_output is not None:
                on_output(chunk)
    if timed_out:
        _kill(proc)
    proc.stdout.close()
    try:
        code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill(proc)
        code = proc.wait()
    return capture.result(None if timed_out else code, timed_out)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
