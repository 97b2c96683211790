"""A stdio MCP server is someone else's code beside the gateway: under the default sandbox it cannot read the
gateway's environment, its home or its database; with `sandbox: false` it reads what the gateway's user may,
except the environment of the non-dumpable gateway process. The real gateway (in process, and as an operator
runs it), the `mcp` SDK on both sides (tests/fakes/mcp_server.py's `peek`), bubblewrap and the fake LLM."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from engine_harness import fake_llm_environment, make_profile
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram

ROOT = Path(__file__).resolve().parents[2]
FAKE_SERVER = str(ROOT / "tests" / "fakes" / "mcp_server.py")
NOBODY = 65534


def fake(**extra: object) -> dict[str, object]:
    return {"command": sys.executable, "args": [FAKE_SERVER, "stdio"], "timeout": 20, **extra}


def peeked(request) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """What `peek` could read, from the tool result the model was sent."""
    [result] = [m["content"] for m in request.messages if m["role"] == "tool"]
    found = re.search(r"\{.*\}", result, re.S)
    assert found, result
    return dict(json.loads(found.group(0)))


async def peek_through(e, fake_llm, home: Path) -> dict[str, str]:  # type: ignore[no-untyped-def]
    fake_llm.script(Reply(tool_calls=[("fake__peek", {"gateway_pid": os.getpid(), "home": str(home)})]),
                    Reply(text="looked"))
    assert await e.say("look around", timeout=30) == "looked"
    return peeked(fake_llm.requests[1])


async def test_a_sandboxed_server_reads_neither_the_gateways_environment_nor_its_home_nor_its_database(
        engine, fake_llm, tmp_path):
    e = await engine(profile=make_profile(mcp_servers={"fake": fake()}))
    assert (tmp_path / "hermes.db").exists()
    seen = await peek_through(e, fake_llm, tmp_path)
    assert all(value.startswith("refused: ") for value in seen.values()), seen
    assert "FileNotFoundError" in seen["database"] and "FileNotFoundError" in seen["home listing"]


async def test_with_sandbox_false_the_server_reads_the_gateways_home_and_database(engine, fake_llm, tmp_path):
    e = await engine(profile=make_profile(mcp_servers={"fake": fake(sandbox=False)}))
    seen = await peek_through(e, fake_llm, tmp_path)
    assert "hermes.db" in seen["home listing"] and int(seen["database"]) > 0, seen


async def test_a_sandboxed_server_keeps_its_own_folder_beside_the_workspaces_named_opaquely(engine, fake_llm,
                                                                                            tmp_path):
    from hermes_engine.workspace.folders import WorkspaceFolders

    e = await engine(profile=make_profile(mcp_servers={"fake": fake(env={"FAKE_MCP_PIDFILE": "/data/pid"})}))
    fake_llm.script(Reply(tool_calls=[("fake__env_var", {"name": "HOME"})]), Reply(text="done"))
    assert await e.say("where do you live", timeout=30) == "done"
    assert "/data" in [m["content"] for m in fake_llm.requests[1].messages if m["role"] == "tool"][0]
    servers = WorkspaceFolders.of(tmp_path).servers("testbot")
    assert servers.parent == tmp_path / "workspaces" and "testbot" not in servers.name
    assert (servers / "fake" / "pid").read_text(encoding="utf-8").strip().isdigit()


async def test_a_granted_path_is_readable_and_one_that_does_not_exist_keeps_the_server_from_starting(
        engine, fake_llm, tmp_path, caplog):
    shared = ROOT / "tests" / "data"
    e = await engine(profile=make_profile(mcp_servers={
        "fake": fake(read_paths=[str(shared)]), "gone": fake(read_paths=[str(tmp_path / "nowhere")])}))
    fake_llm.script(Reply(tool_calls=[("fake__peek", {"gateway_pid": os.getpid(), "home": str(shared)})]),
                    Reply(text="looked"))
    assert await e.say("look at the data", timeout=30) == "looked"
    assert "skill_corpus" in peeked(fake_llm.requests[1])["home listing"]
    assert f"MCP server gone failed: SandboxRefused: {tmp_path / 'nowhere'}, which read_paths or write_paths " \
           "grant, does not exist." in caplog.text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_bot(folder: Path, servers: dict[str, object]) -> Path:
    folder.mkdir(parents=True)
    (folder / "profile.yaml").write_text(yaml.safe_dump({
        "name": "peeker", "model": "openai:gpt-test", "toolsets": ["core"], "streaming": False,
        "platforms": {"telegram": {"mode": "polling"}}, "mcp_servers": servers}), encoding="utf-8")
    return folder


def reachable_by_others(program: str) -> bool:
    """Whether a user other than root may run `program` (every folder above it open to all)."""
    path = Path(os.path.realpath(program))
    return all(p.stat().st_mode & 0o001 for p in path.parents) and bool(path.stat().st_mode & 0o001)


def as_another_user(home: Path) -> list[str]:
    """A root test runs the gateway as an unprivileged uid (root may read any process's environment)."""
    if os.geteuid() != 0:
        return []
    if not reachable_by_others(sys.executable):
        pytest.skip(f"as root, the gateway must run as another user, who cannot run {sys.executable}")
    for folder, _, names in os.walk(home):
        for name in [".", *names]:
            os.chown(os.path.join(folder, name), NOBODY, NOBODY)
    home.chmod(0o700)
    return [shutil.which("setpriv") or "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]


async def test_the_gateway_process_is_not_dumpable_so_even_an_unsandboxed_server_cannot_read_its_environment(
        fake_llm, request):
    """The unsandboxed server runs as the gateway's own user: it reads the database, not the environment."""
    home = Path(tempfile.mkdtemp(prefix="hermes-home-"))  # not under tmp_path, which only root may enter
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    bot = write_bot(home / "bot", {"fake": fake(sandbox=False)})
    holder: dict[str, int] = {}

    def respond(request):  # type: ignore[no-untyped-def]
        if any(m["role"] == "tool" for m in request.messages):
            return Reply(text="looked")
        return Reply(tool_calls=[("fake__peek", {"gateway_pid": holder["pid"], "home": str(home)})])

    fake_llm.responder = respond
    user = as_another_user(home)
    async with FakeTelegram() as telegram:
        env = {**os.environ, **fake_llm_environment(fake_llm), "HERMES_HOME": str(home),
               "HERMES_MODEL": "openai:gpt-test", "HERMES_FALLBACK_MODELS": "", "HERMES_HTTP_PORT": str(free_port()),
               "TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_BASE_URL": telegram.base_url,
               "TELEGRAM_ALLOWED_USERS": "4242"}
        proc = await asyncio.create_subprocess_exec(
            *user, sys.executable, "-m", "hermes_gateway.cli.main", "run", "--bot", str(bot), cwd=ROOT, env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        holder["pid"] = proc.pid
        try:
            telegram.user_says(4242, 4242, "look around")
            await telegram.wait_for_text(4242, "looked", timeout=60)
        finally:
            proc.terminate()
            await proc.wait()
    seen = peeked(next(r for r in fake_llm.requests if any(m["role"] == "tool" for m in r.messages)))
    assert seen["parent environ"].startswith("refused: PermissionError"), seen
    assert seen["gateway environ"].startswith("refused: PermissionError"), seen
    assert int(seen["database"]) > 0


def test_every_command_of_the_cli_runs_non_dumpable(tmp_path):
    """The real entry point, asked at exit (PR_GET_DUMPABLE) by the process itself."""
    probe = ("import atexit, ctypes, sys\n"
             "atexit.register(lambda: print('dumpable', ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)))\n"
             "sys.argv = ['hermes-gateway', 'mcp', 'list', '--bot', sys.argv[1]]\n"
             "from hermes_gateway.cli.main import main\n"
             "main()\n")
    bot = write_bot(tmp_path / "bot", {})
    done = subprocess.run([sys.executable, "-c", probe, str(bot)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "HERMES_HOME": str(tmp_path)}, timeout=120, check=False)
    assert "has no mcp_servers" in done.stdout, done.stderr
    assert done.stdout.splitlines()[-1] == "dumpable 0"


def test_without_bubblewrap_a_sandboxed_server_is_not_started_and_one_sentence_says_why(tmp_path):
    """As the terminal: nothing runs unsandboxed that the profile did not declare trusted."""
    bot = write_bot(tmp_path / "bot", {"fake": fake(), "trusted": fake(sandbox=False)})
    no_bwrap = tmp_path / "bin"  # a PATH without bwrap
    no_bwrap.mkdir()
    done = subprocess.run([sys.executable, "-m", "hermes_gateway.cli.main", "mcp", "list", "--bot", str(bot)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
                          env={**os.environ, "HERMES_HOME": str(tmp_path), "PATH": str(no_bwrap)})
    assert done.returncode == 1, done.stderr
    assert "trusted__echo" in done.stdout and "fake__echo" not in done.stdout
    assert ("not running: MCP server fake is not running (SandboxRefused: bubblewrap (bwrap) is not installed; "
            "install the Debian package 'bubblewrap'. A sandboxed MCP server never runs unsandboxed (sandbox: "
            "false is for servers trusted with the gateway's files).)") in done.stdout
