"""`hermes-gateway chat` asks the operator at the terminal before a dangerous command runs."""

from __future__ import annotations

import asyncio
import getpass
import os
import sys
from pathlib import Path

from engine_harness import fake_llm_environment
from fakes.fake_llm import Reply

ROOT = Path(__file__).resolve().parents[2]


async def chat(fake_llm, tmp_path: Path, lines: str) -> str:
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "profile.yaml").write_text(f"model: openai:gpt-test\ntoolsets: [core, terminal]\n"
                                      f"access: {{admins: [{getpass.getuser()}]}}\n")

    def respond(request):
        if request.turn_tool_results:
            return Reply(text="result: " + request.turn_tool_results[0].replace("\n", " "))
        if request.last_user_text == "clean up":
            return Reply(tool_calls=[("terminal", {"command": "mkdir -p old && rm -rf old && echo removed"})])
        return Reply(text="ok")

    fake_llm.responder = respond
    env = {**os.environ, **fake_llm_environment(fake_llm), "HERMES_HOME": str(tmp_path / "home")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hermes_gateway.cli.main", "chat", "--bot", str(bot), cwd=ROOT, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(lines.encode()), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_the_operator_approves_a_dangerous_command_on_the_console(fake_llm, tmp_path):
    out = await chat(fake_llm, tmp_path, "clean up\ny\nthanks\n")
    assert "Run this command? (dangerous: deletes many files)" in out
    assert "result: removed [exit code 0]" in out
    assert out.rstrip().endswith("ok")


async def test_the_operator_denies_a_dangerous_command_on_the_console(fake_llm, tmp_path):
    out = await chat(fake_llm, tmp_path, "clean up\nn\n")
    assert "Denied: the command was not run" in out and "removed [exit code 0]" not in out
