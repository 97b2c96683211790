"""A sandboxed stdio MCP server is bounded like a terminal command: its whole process tree holds no more than
`processes` processes and (where a cgroup can be made) `memory_mb` of memory, each of its processes no more
than `memory_mb` of address space; it reaches no network, or with `network: true` the world but never this
host's 127.0.0.1; and when the gateway stops it, or is killed, no launcher, bwrap, slirp4netns or server
process and no cgroup of it is left. The real gateway (in process, and as an operator runs it), the `mcp`
SDK on both sides (tests/fakes/mcp_server.py's `python` tool runs code in a child of the server), bubblewrap,
slirp4netns and the fake LLM."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from engine_harness import fake_llm_environment, make_profile
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram
from net_kit import serving
from sandbox_kit import SIX_HOLDERS, held_at_once
from test_mcp_sandbox import fake as plain_fake
from test_mcp_sandbox import free_port, write_bot

from hermes_engine.workspace import cgroups
from hermes_gateway.mcp.launch import MODULE

ROOT = Path(__file__).resolve().parents[2]


def fake(env: dict[str, str] | None = None, **extra: object) -> dict[str, object]:
    """The test server with its `python` tool."""
    return plain_fake(env={"FAKE_MCP_PYTHON": "1", **(env or {})}, **extra)
needs_cgroups = pytest.mark.skipif(cgroups.hierarchies() is None,
                                   reason=f"no cgroup can be made here: {cgroups.unavailable_reason()}")


def host_address() -> str | None:
    """An address of this host on a real interface (a sandbox's network reaches it as a LAN peer would)."""
    with contextlib.suppress(OSError):
        shown = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True,
                               text=True, check=False).stdout
        found = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/", shown)
        return found.group(1) if found else None
    return None


needs_address = pytest.mark.skipif(host_address() is None, reason="this host has no address outside its loopback")


async def run_python(e, fake_llm, code: str) -> str:  # type: ignore[no-untyped-def]
    """What the server's `python` tool answered: the code ran in a child of the sandboxed server."""
    fake_llm.script(Reply(tool_calls=[("fake__python", {"code": code})]), Reply(text="ran"))
    assert await e.say("run it", timeout=90) == "ran"
    [result] = [m["content"] for m in fake_llm.requests[-1].messages if m["role"] == "tool"]
    return str(result)


def connect_probe(*targets: tuple[str, int]) -> str:
    return ("import socket\n"
            f"for host, port in {list(targets)!r}:\n"
            "    try:\n"
            "        print(host, socket.create_connection((host, port), 3).recv(100).decode().strip())\n"
            "    except OSError as exc:\n"
            "        print(host, 'unreachable', type(exc).__name__)\n")


FORK_UNTIL_REFUSED = """
import os, signal, time
kids = []
try:
    while len(kids) < 200:
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids.append(pid)
except OSError as exc:
    print("refused", type(exc).__name__)
print("forked", len(kids))
for pid in kids:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
"""


async def test_a_server_with_processes_n_cannot_fork_beyond_n_across_its_tree(engine, fake_llm):
    e = await engine(profile=make_profile(mcp_servers={"fake": fake(processes=24)}))
    text = await run_python(e, fake_llm, FORK_UNTIL_REFUSED)
    forked = [int(line.split()[1]) for line in text.splitlines() if line.startswith("forked ")]
    assert forked and 0 < forked[0] < 24 and "refused BlockingIOError" in text, text


@needs_cgroups
async def test_memory_mb_bounds_the_servers_whole_tree_where_a_cgroup_can_be_made(engine, fake_llm):
    e = await engine(profile=make_profile(mcp_servers={"fake": fake(memory_mb=384)}))
    # the holders, not the server, are the ones the memory limit kills (a process may raise its own score)
    text = await run_python(e, fake_llm, "open('/proc/self/oom_score_adj', 'w').write('1000')\n" + SIX_HOLDERS)
    assert 0 <= held_at_once(text) <= 1, text  # six children of 200 MB: the server's 384 MB hold one at most


async def test_one_process_of_a_server_cannot_take_more_than_memory_mb_even_without_a_cgroup(engine, fake_llm):
    e = await engine(profile=make_profile(mcp_servers={"fake": fake(memory_mb=384)}))
    text = await run_python(e, fake_llm, "x = b'x' * (512 << 20)\nprint('held 512 MB')")
    assert "MemoryError" in text and "held 512 MB" not in text, text


@needs_address
async def test_a_server_without_a_network_reaches_nothing_outside_its_own_loopback(engine, fake_llm):
    address = host_address()
    assert address is not None
    e = await engine(profile=make_profile(mcp_servers={"fake": fake()}))
    with serving(address) as port:
        text = await run_python(e, fake_llm, "import socket\nprint('interfaces', len(socket.if_nameindex()))\n"
                                + connect_probe((address, port)))
    assert "interfaces 1" in text and f"{address} unreachable" in text, text


@needs_address
async def test_a_server_with_network_true_reaches_the_world_but_never_the_hosts_loopback(engine, fake_llm):
    address = host_address()
    assert address is not None
    e = await engine(profile=make_profile(mcp_servers={"fake": fake(network=True)}))
    with serving(address) as outside, serving("127.0.0.1") as loopback:  # where the gateway and its db listen
        text = await run_python(e, fake_llm, connect_probe((address, outside), ("10.0.2.2", loopback),
                                                           ("127.0.0.1", loopback)))
    assert f"{address} hello from {address}" in text, text
    assert "10.0.2.2 unreachable" in text and "127.0.0.1 unreachable" in text, text


# -- what is left when the server stops ------------------------------------------------------------------
def _parents() -> dict[int, list[int]]:
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
                children[int(fields[1])].append(int(entry.name))
    return children


def descendants(root: int) -> set[int]:
    children, found, todo = _parents(), set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """A zombie is gone as far as the server is concerned (it holds nothing; its reaper has not run yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def server_tree(gateway: int) -> tuple[dict[int, str], list[Path]]:
    """The launchers the gateway started, everything under them (by command line), and their cgroups."""
    launchers = [pid for pid in descendants(gateway) if MODULE in cmdline(pid)]
    tree = {pid: cmdline(pid) for launcher in launchers for pid in {launcher, *descendants(launcher)}}
    found = cgroups.hierarchies()
    folders = [folder for parent in (found.parents() if found else ()) for folder in parent.glob("hermes-sandbox-*")
               if set((folder / "cgroup.procs").read_text().split()) & {str(pid) for pid in tree}]
    return tree, folders


def wait_for_tree(gateway: int, *parts: str, seconds: float = 60) -> tuple[dict[int, str], list[Path]]:
    """Once a process of the server's tree runs each of `parts` (e.g. bwrap, slirp4netns, the server)."""
    deadline = time.monotonic() + seconds
    while True:
        tree, folders = server_tree(gateway)
        if all(any(part in line for line in tree.values()) for part in parts):
            return tree, folders
        assert time.monotonic() < deadline, f"the server's tree never ran {parts}: {tree}"
        time.sleep(0.1)


def left_behind(tree: dict[int, str], folders: list[Path], seconds: float = 5) -> list[str]:
    deadline = time.monotonic() + seconds
    while True:
        left = [f"{pid}: {line}" for pid, line in tree.items() if alive(pid)]
        left += [str(folder) for folder in folders if folder.exists()]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


PARTS = ("hermes_gateway.mcp.launch", "bwrap", "slirp4netns", "mcp_server.py")
LINGERING = fake(network=True, env={"FAKE_MCP_LINGER": "1"})  # it must be stopped: closing its stdin is not enough


@needs_address
async def test_after_the_gateway_stops_no_process_of_a_server_and_no_cgroup_of_it_is_left(engine, fake_llm):
    e = await engine(profile=make_profile(mcp_servers={"fake": LINGERING}))
    tree, folders = await asyncio.to_thread(wait_for_tree, os.getpid(), *PARTS)
    found = cgroups.hierarchies()
    assert len(folders) == (len(found.parents()) if found else 0)  # a cgroup of its own, in every hierarchy
    await e.stop()
    assert await asyncio.to_thread(left_behind, tree, folders) == []


# -- the gateway as an operator runs it ------------------------------------------------------------------
@contextlib.asynccontextmanager
async def gateway_process(fake_llm, telegram: FakeTelegram, servers: dict[str, object],  # type: ignore[no-untyped-def]
                          home: Path, prefix: Sequence[str] = ()) -> AsyncIterator[asyncio.subprocess.Process]:
    """`hermes-gateway run` with these servers, polling the fake Telegram; its log in `home`/gateway.log."""
    bot = write_bot(home / "bot", servers)
    env = {**os.environ, **fake_llm_environment(fake_llm), "HERMES_HOME": str(home),
           "HERMES_MODEL": "openai:gpt-test", "HERMES_FALLBACK_MODELS": "", "HERMES_HTTP_PORT": str(free_port()),
           "TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_BASE_URL": telegram.base_url,
           "TELEGRAM_ALLOWED_USERS": "4242"}
    log = os.open(home / "gateway.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        proc = await asyncio.create_subprocess_exec(
            *prefix, sys.executable, "-m", "hermes_gateway.cli.main", "run", "--bot", str(bot), cwd=ROOT, env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=log)
    finally:
        os.close(log)
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


@pytest.fixture
def home(request: pytest.FixtureRequest) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="hermes-home-"))
    request.addfinalizer(lambda: subprocess.run(["rm", "-rf", str(folder)], check=False))
    return folder


@pytest.mark.slow
@needs_address
async def test_after_a_kill_9_of_the_gateway_no_process_of_a_server_and_no_cgroup_of_it_is_left(fake_llm, home):
    async with FakeTelegram() as telegram, \
            gateway_process(fake_llm, telegram, {"fake": LINGERING}, home) as proc:
        try:
            tree, folders = await asyncio.to_thread(wait_for_tree, proc.pid, *PARTS)
        finally:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
    assert await asyncio.to_thread(left_behind, tree, folders) == []


def without_cgroups() -> list[str]:
    """The gateway in a mount namespace of its own where the cgroup file systems are covered (root only)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("hiding the cgroup file systems from the gateway needs root and unshare")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs none /sys/fs/cgroup && exec "$@"', "sh"]


async def test_where_no_cgroup_can_be_made_the_start_warns_and_the_process_limit_holds_per_uid(fake_llm, home):
    prefix = without_cgroups()

    def respond(request):  # type: ignore[no-untyped-def]
        if any(m["role"] == "tool" for m in request.messages):
            return Reply(text="ran")
        return Reply(tool_calls=[("fake__python", {"code": FORK_UNTIL_REFUSED})])

    fake_llm.responder = respond
    async with FakeTelegram() as telegram, \
            gateway_process(fake_llm, telegram, {"fake": fake(processes=24)}, home, prefix):
        telegram.user_says(4242, 4242, "fork")
        await telegram.wait_for_text(4242, "ran", timeout=60)
    [result] = [m["content"] for r in fake_llm.requests for m in r.messages if m["role"] == "tool"]
    forked = [int(line.split()[1]) for line in result.splitlines() if line.startswith("forked ")]
    assert forked and 0 < forked[0] < 24 and "refused BlockingIOError" in result, result
    log = (home / "gateway.log").read_text(encoding="utf-8")
    assert log.count("MCP server sandbox: no cgroup can be made here (the cgroup ") == 1, log
    assert "a server's memory limit holds per process, and its process limit counts the processes of its uid" in log


def test_without_slirp4netns_a_server_given_a_network_is_not_started_and_one_sentence_says_why(tmp_path):
    """As the terminal: a sandbox never falls back to the host's network."""
    bot = write_bot(tmp_path / "bot", {"fake": fake(network=True), "offline": fake()})
    no_slirp = tmp_path / "bin"  # a PATH with bwrap and without slirp4netns
    no_slirp.mkdir()
    for program in ("bwrap", "true"):  # `true`: what the probe of bwrap runs
        (no_slirp / program).symlink_to(shutil.which(program) or f"/usr/bin/{program}")
    done = subprocess.run([sys.executable, "-m", "hermes_gateway.cli.main", "mcp", "list", "--bot", str(bot)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
                          env={**os.environ, "HERMES_HOME": str(tmp_path), "PATH": str(no_slirp)})
    assert done.returncode == 1, done.stderr
    assert "offline__echo" in done.stdout and "fake__echo" not in done.stdout
    assert ("not running: MCP server fake is not running (SandboxRefused: slirp4netns is not installed; install "
            "the Debian package 'slirp4netns'. A sandboxed MCP server given network: true never shares the host's "
            "network.)") in done.stdout
