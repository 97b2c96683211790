"""The compose set-up as `deploy/README.md` has an operator fill it in, with only a Telegram token: the
gateway is started with the command and the environment `deploy/compose.yaml` gives its containers (the
`.env` read as compose reads it), on a real PostgreSQL. It serves Telegram and answers; Slack and Discord
stay off with one warning each. What differs from a container is only what a container would change: the
volumes are folders here, the `postgres` host is the test server, and the remote APIs are the fakes."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import pytest
import yaml
from cli_kit import ROOT, deploy_validator, free_port
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram, FakeUser
from gateway_kit import wait_ready
from postgres import fresh_schema
from state_backends import postgres_url

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]

DEPLOY = ROOT / "deploy"
PERSON = FakeUser(4242, "Olga", "olga")


def operator_env_file(token: str) -> str:
    """`cp deploy/.env.example deploy/.env`, then the model key, the Telegram token and its one allowed
    person uncommented and filled in; every other line left as shipped."""
    filled = {"ANTHROPIC_API_KEY": "sk-ant-test", "TELEGRAM_BOT_TOKEN": token,
              "TELEGRAM_ALLOWED_USERS": str(PERSON.id)}
    lines = []
    for line in (DEPLOY / ".env.example").read_text().splitlines():
        match = re.match(r"#\s*([A-Z_]+)=", line)
        lines.append(f"{match[1]}={filled[match[1]]}" if match and match[1] in filled else line)
    return "\n".join(lines) + "\n"


def gateway_service() -> dict:
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    return services["gateway-1"]


async def test_the_compose_gateway_with_only_a_telegram_token_starts_and_answers(fake_llm, tmp_path: Path) -> None:
    service = gateway_service()
    assert service["restart"] == "unless-stopped" and service["env_file"] == ".env"
    async with FakeTelegram() as telegram, fresh_schema() as schema:
        dotenv = {name: value for _, name, value in deploy_validator().parse_env_file(operator_env_file(telegram.token))}
        assert set(dotenv) == {"ANTHROPIC_API_KEY", "TELEGRAM_BOT_TOKEN", "TELEGRAM_ALLOWED_USERS"}
        given = {**dotenv, **{k: str(v) for k, v in service["environment"].items()}}  # compose: environment wins
        volumes = {"/data": tmp_path / "data", "/workspaces": tmp_path / "workspaces"}
        for folder in volumes.values():
            folder.mkdir()
        env = {**given,
               "HERMES_HOME": str(volumes[given["HERMES_HOME"]]),
               "HERMES_WORKSPACE_ROOT": str(volumes[given["HERMES_WORKSPACE_ROOT"]]),
               "HERMES_DATABASE_URL": postgres_url(schema),
               "HERMES_HTTP_PORT": str(free_port()),
               "ANTHROPIC_BASE_URL": fake_llm.anthropic_base_url, "TELEGRAM_API_BASE_URL": telegram.base_url}
        assert given["HERMES_DATABASE_URL"].startswith("postgresql+asyncpg://")  # the compose file's own choice
        inherited = {k: v for k, v in os.environ.items()
                     if k in ("PATH", "HOME", "LANG", "NO_PROXY", "no_proxy") or k.startswith("PYTHON")}
        fake_llm.script(Reply(text="Hello from the compose set-up."))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hermes_gateway.cli.main", *service["command"], cwd=ROOT,
            env={**inherited, **env}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            await wait_ready(f"http://127.0.0.1:{env['HERMES_HTTP_PORT']}/ready", proc)
            telegram.user_says(PERSON.id, PERSON, "hello")
            await telegram.wait_for_text(PERSON.id, "Hello from the compose set-up.", 60)
        finally:
            proc.terminate()
            _, err = await asyncio.wait_for(proc.communicate(), 60)
    log = err.decode()
    assert proc.returncode == 0, log
    for platform, variable in (("slack", "SLACK_BOT_TOKEN"), ("discord", "DISCORD_BOT_TOKEN")):
        assert len([line for line in log.splitlines() if f"{platform} is off" in line and variable in line]) == 1, log
    assert "Traceback" not in log
