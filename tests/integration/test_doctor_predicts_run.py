"""`doctor` predicts `run`: both go through the one list of checks, so on each mistake an operator makes
`run` stops with the sentence `doctor` prints as its problem (exit 2, nothing created on disk: no home, no
database), and where `run` serves with less, `doctor` warns of it in the words `run` logs. The commands run in
this process (`cli_kit.invoke_beside`, the fakes serving meanwhile); the one `run` that serves is a process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_kit import ROOT, free_port, invoke_beside
from fakes.fake_telegram import FakeTelegram
from gateway_kit import wait_ready

MODEL_ONLY = "model: anthropic:claude-test\n"
TELEGRAM = MODEL_ONLY + "platforms:\n  telegram: {}\n"
SLACK = MODEL_ONLY + "platforms:\n  slack: {}\n"
# A long poll of a second, not 30: the fake records a getUpdates when it is answered.
TELEGRAM_AND_SLACK = MODEL_ONLY + "platforms:\n  telegram: {poll_timeout: 1}\n  slack: {}\n"
ROOT_USER = os.geteuid() == 0


def bot(tmp_path: Path, name: str, profile: str) -> str:
    folder = tmp_path / "bots" / name
    folder.mkdir(parents=True)
    (folder / "profile.yaml").write_text(profile)
    return str(folder)


def tree(folder: Path) -> list[tuple[str, bool]]:
    return sorted((str(path), path.is_dir()) for path in folder.rglob("*"))


@contextlib.contextmanager
def port_taken() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def environment(fake_llm, telegram: FakeTelegram, home: Path) -> dict[str, str]:
    """A gateway that starts: the model's key, a free port, a home to be made, a token the fake accepts."""
    return {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake_llm.anthropic_base_url,
            "HERMES_HOME": str(home), "HERMES_HTTP_PORT": str(free_port()), "TELEGRAM_BOT_TOKEN": telegram.token,
            "TELEGRAM_API_BASE_URL": telegram.base_url}


CASES = ["wrong telegram token", "no token at all", "empty profile", "home is a file", "home not writable",
         "busy port", "bad database URL", "database folder is a file"]


@pytest.mark.parametrize("case", [
    pytest.param(case, marks=pytest.mark.skipif(ROOT_USER and case == "home not writable",
                                                reason="root writes anywhere; see the --service-user test"))
    for case in CASES])
async def test_run_stops_with_the_sentence_doctor_gives_and_creates_nothing(fake_llm, tmp_path, case):
    async with FakeTelegram() as telegram:
        home = tmp_path / "home"
        env = environment(fake_llm, telegram, home)
        bots = [bot(tmp_path, "assistant", TELEGRAM)]
        with contextlib.ExitStack() as held:
            if case == "wrong telegram token":
                env["TELEGRAM_BOT_TOKEN"], says = "123:wrong-token", "refused TELEGRAM_BOT_TOKEN"
            elif case == "no token at all":
                del env["TELEGRAM_BOT_TOKEN"]
                says = "No platform can start: TELEGRAM_BOT_TOKEN is not set"
            elif case == "empty profile":
                bots = [bot(tmp_path, "empty", MODEL_ONLY)]
                says = "No platform can start: bot profile 'empty' names no platform"
            elif case == "home is a file":
                home.write_text("not a folder")
                says = f"HERMES_HOME={home} is a file, not a folder"
            elif case == "home not writable":
                home.mkdir(mode=0o500)
                says = f"HERMES_HOME={home} is not usable"
            elif case == "busy port":
                env["HERMES_HTTP_PORT"] = str(port := held.enter_context(port_taken()))
                says = f"HERMES_HTTP_PORT {port} on 127.0.0.1 is already in use"
            elif case == "bad database URL":
                env["HERMES_DATABASE_URL"], says = "nonsense", "HERMES_DATABASE_URL is not a database URL"
            else:
                (tmp_path / "db").write_text("not a folder")
                env["HERMES_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'db' / 'hermes.db'}"
                says = f"The folder {tmp_path / 'db'} of the SQLite database in HERMES_DATABASE_URL is a file"
            before = tree(tmp_path)
            args = [arg for path in bots for arg in ("--bot", path)]
            run_code, _, run_err = await invoke_beside("run", *args, env=env, timeout=30)
            doctor_code, doctor_out, _ = await invoke_beside("doctor", *args, env=env)
    assert run_code == 2, run_err
    assert "Traceback" not in run_err and len(run_err.strip().splitlines()) == 1, run_err
    sentence = run_err.strip().removeprefix("hermes-gateway: ")
    assert says in sentence
    assert doctor_code == 1
    assert [line[6:] for line in doctor_out.splitlines() if line.startswith("FIX")] == [sentence]
    assert tree(tmp_path) == before


async def test_with_one_platform_without_its_token_run_serves_the_others_and_doctor_warns_in_the_same_words(
        fake_llm, tmp_path):
    async with FakeTelegram() as telegram:
        env = environment(fake_llm, telegram, tmp_path / "home")
        bots = ["--bot", bot(tmp_path, "assistant", TELEGRAM_AND_SLACK), "--bot", bot(tmp_path, "team", SLACK)]
        doctor_code, doctor_out, _ = await invoke_beside("doctor", *bots, env=env)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hermes_gateway.cli.main", "run", *bots, cwd=ROOT, env={**os.environ, **env},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            ready = await wait_ready(f"http://127.0.0.1:{env['HERMES_HTTP_PORT']}/ready", proc)
            await telegram.wait_for(lambda: any(call.method == "getUpdates" for call in telegram.requests), 30)
        finally:
            proc.terminate()
            _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert doctor_code == 0, doctor_out
    assert "ok    bot profile 'assistant' loaded" in doctor_out and "ok    bot profile 'team' loaded" in doctor_out
    warned = [line[6:] for line in doctor_out.splitlines() if line.startswith("WARN")]
    assert warned == ["bot profile 'assistant': slack is off: SLACK_BOT_TOKEN is not set (the bot token, xoxb-…, "
                      "from OAuth & Permissions).",
                      "bot profile 'team': slack is off: SLACK_BOT_TOKEN is not set (the bot token, xoxb-…, "
                      "from OAuth & Permissions)."]
    assert ready["status"] == "ready", ready
    logged = [line for line in err.decode().splitlines() if "slack is off" in line]
    assert [line[line.index("bot profile"):] for line in logged] == warned


@pytest.fixture
def service_home() -> Iterator[tuple[str, Path]]:
    """A user made for the test (as a package makes the service's), and a home in a folder it may reach,
    owned by root as a volume or bind mount is before it is given to the service."""
    name = f"hermes-{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    top = Path(tempfile.mkdtemp(prefix="hermes-home-"))
    top.chmod(0o755)
    (top / "home").mkdir(mode=0o755)
    try:
        yield name, top / "home"
    finally:
        subprocess.run(["userdel", name], check=False)
        shutil.rmtree(top)


@pytest.mark.skipif(not ROOT_USER, reason="only root can try the home as another user")
async def test_doctor_tries_the_home_as_the_service_user_it_names(service_home):
    name, home = service_home
    env = {"HERMES_HOME": str(home)}
    code, out, _ = await invoke_beside("doctor", "--service-user", name, env=env)
    assert code == 1
    assert (f"FIX   HERMES_HOME={home} is not usable: the user {name} cannot create files in {home} "
            f"(Permission denied); give that user the folder (e.g. chown -R {name} {home}) or point "
            f"HERMES_HOME elsewhere.") in out.splitlines()
    user = pwd.getpwnam(name)
    os.chown(home, user.pw_uid, user.pw_gid)
    code, out, _ = await invoke_beside("doctor", "--service-user", name, env=env)
    assert f"ok    HERMES_HOME {home}: usable by {name}" in out.splitlines()
    assert list(home.iterdir()) == []
    code, out, _ = await invoke_beside("doctor", "--service-user", "no-such-user-here", env=env)
    assert "FIX   --service-user no-such-user-here: there is no user of that name on this machine." in out


async def test_chat_refuses_a_home_that_is_a_file_in_the_sentence_doctor_gives(fake_llm, tmp_path):
    home = tmp_path / "home"
    home.write_text("not a folder")
    env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake_llm.anthropic_base_url,
           "HERMES_HOME": str(home)}
    args = ["--bot", bot(tmp_path, "assistant", TELEGRAM)]
    code, out, err = await invoke_beside("chat", *args, env=env, stdin="hello\n")
    assert code == 2 and out == "" and "Traceback" not in err
    sentence = err.strip().removeprefix("hermes-gateway: ")
    assert sentence.startswith(f"HERMES_HOME={home} is a file, not a folder")
    _, doctor_out, _ = await invoke_beside("doctor", *args, env=env)
    assert f"FIX   {sentence}" in doctor_out.splitlines()
    assert home.read_text() == "not a folder" and fake_llm.requests == []
