"""Network for a sandbox whose profile allows it (`workspace.network: true`).

The sandbox keeps its own network namespace; a user-mode network stack (slirp4netns, the one rootless
containers use) is attached to it from outside and routes its traffic through this host's sockets. Started
with `--disable-host-loopback`, it refuses the address that would lead to this host's 127.0.0.1, where the
gateway, its database and MCP servers listen; inside, 127.0.0.1 is the sandbox's own. Addresses the host
serves on other interfaces are reachable as from any machine on its network.

The order matters and is enforced with bubblewrap's own descriptors: bwrap reports the sandbox's pid once
its namespaces exist (`--info-fd`) and brings its loopback up, slirp4netns attaches and says when the
interface is up (`--ready-fd`), and only then may the command start (`--block-fd`). The stack ends when the
command does (`--exit-fd`).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

RESOLV_CONF = b"nameserver 10.0.2.3\n"  # slirp4netns's own DNS forwarder
ATTACH_SECONDS = 10.0


class NetworkUnavailable(RuntimeError):
    """The sandbox's network could not be set up; the message says why."""


def unavailable_reason() -> str | None:
    if shutil.which("slirp4netns") is None:
        return "slirp4netns is not installed; install the Debian package 'slirp4netns'."
    return None


@dataclass
class Plumbing:
    """The descriptors between bwrap, slirp4netns and this process for one command."""

    info_read: int
    info_write: int
    block_read: int
    block_write: int
    resolv_read: int
    slirp: subprocess.Popen[bytes] | None = None
    exit_write: int | None = None
    own: list[int] = field(default_factory=list)

    def bwrap_args(self) -> list[str]:
        return ["--info-fd", str(self.info_write), "--block-fd", str(self.block_read),
                "--perms", "0444", "--ro-bind-data", str(self.resolv_read), "/etc/resolv.conf"]

    def child_fds(self) -> tuple[int, ...]:
        return self.info_write, self.block_read, self.resolv_read


@contextlib.contextmanager
def plumbing() -> Iterator[Plumbing]:
    info_read, info_write = os.pipe()
    block_read, block_write = os.pipe()
    resolv_read, resolv_write = os.pipe()
    os.write(resolv_write, RESOLV_CONF)
    os.close(resolv_write)
    pipes = Plumbing(info_read, info_write, block_read, block_write, resolv_read)
    pipes.own = [info_read, info_write, block_read, block_write, resolv_read]
    try:
        yield pipes
    finally:
        detach(pipes)
        for fd in pipes.own:
            with contextlib.suppress(OSError):
                os.close(fd)


def started(pipes: Plumbing) -> None:
    """bwrap is running: close the ends it holds now, so its exit is seen as end of file."""
    for fd in pipes.child_fds():
        os.close(fd)
        pipes.own.remove(fd)


def attach(pipes: Plumbing, *, userns: bool) -> None:
    """Attach the network to the sandbox and let its command start; `userns`: the sandbox has a user
    namespace of its own (a gateway not running as root), which slirp4netns must join to act in it."""
    pid = _child_pid(pipes.info_read)
    _wait_for_loopback(pid)
    ready_read, ready_write = os.pipe()
    exit_read, exit_write = os.pipe()
    argv = ["slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback",
            "--ready-fd", str(ready_write), "--exit-fd", str(exit_read)]
    if userns:
        argv.append(f"--userns-path=/proc/{pid}/ns/user")
    try:
        pipes.slirp = subprocess.Popen([*argv, str(pid), "tap0"], pass_fds=(ready_write, exit_read),
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, close_fds=True)
    except OSError as exc:
        raise NetworkUnavailable(f"slirp4netns could not be started: {exc}") from None
    finally:
        os.close(ready_write)
        os.close(exit_read)
    pipes.exit_write = exit_write
    try:
        if _read_within(ready_read, 1, ATTACH_SECONDS) != b"1":
            raise NetworkUnavailable(f"slirp4netns did not attach: {_stderr(pipes.slirp)}")
    finally:
        os.close(ready_read)
    with contextlib.suppress(BrokenPipeError):  # the sandbox ended already: its output says why
        os.write(pipes.block_write, b"1")


def detach(pipes: Plumbing) -> None:
    if pipes.exit_write is not None:
        os.close(pipes.exit_write)
        pipes.exit_write = None
    if pipes.slirp is not None:
        try:
            pipes.slirp.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pipes.slirp.kill()
            pipes.slirp.wait()
        if pipes.slirp.stderr is not None:
            pipes.slirp.stderr.close()
        pipes.slirp = None


def _child_pid(fd: int) -> int:
    """The sandbox's pid from bwrap's info (a JSON object it writes once its namespaces exist)."""
    data = b""
    deadline = time.monotonic() + ATTACH_SECONDS
    while True:
        chunk = _read_within(fd, 4096, deadline - time.monotonic())
        if not chunk:
            raise NetworkUnavailable("the sandbox ended before its network could be attached")
        data += chunk
        with contextlib.suppress(ValueError):
            return int(json.loads(data)["child-pid"])


def _wait_for_loopback(pid: int) -> None:
    """bwrap brings the sandbox's loopback up after it reported the pid; slirp4netns configuring its interface
    at the same moment makes bwrap's netlink call fail, so it starts once 127.0.0.1 is there."""
    deadline = time.monotonic() + ATTACH_SECONDS
    while time.monotonic() < deadline:
        try:
            if "127.0.0.1" in Path(f"/proc/{pid}/net/fib_trie").read_text(encoding="ascii", errors="replace"):
                return
        except OSError:  # gone: the attach below says so
            return
        time.sleep(0.005)
    raise NetworkUnavailable(f"the sandbox's loopback was not up within {ATTACH_SECONDS:g} s")


def _read_within(fd: int, size: int, seconds: float) -> bytes:
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        if seconds <= 0 or not selector.select(seconds):
            raise NetworkUnavailable(f"the sandbox's network was not up within {ATTACH_SECONDS:g} s")
    return os.read(fd, size)


def _stderr(proc: subprocess.Popen[bytes] | None) -> str:
    if proc is None or proc.stderr is None:
        return "no output"
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=1)
    if proc.poll() is None:
        return "no answer"
    return proc.stderr.read().decode("utf-8", "replace").strip()[-300:] or f"exit code {proc.returncode}"
