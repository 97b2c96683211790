"""A gateway imports only what its profile uses, so it starts fast and stays small.

The shipped Telegram bot answers with an Anthropic model and names an OpenAI model as its fallback. Built
and answering a message, it has imported the Telegram and Anthropic SDKs and nothing else: no other
platform's SDK, and no fallback SDK while the primary answers. Checked in a fresh interpreter, since this
test process has imported everything already.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from engine_harness import fake_llm_environment
from fakes.fake_llm import FakeLLM, Reply

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import asyncio, json, sys
from pathlib import Path

from adapters.platform import load as load_platform
from engine_harness import Engine
from hermes_engine.config import AccessRules, load_profile

async def main():
    profile = load_profile("bots/telegram-dm-assistant")
    profile = profile.model_copy(update={"access": AccessRules(allowed_users=["u1"])})
    engine = await Engine(Path(sys.argv[1]), profile).start()
    try:
        for name, options in profile.platforms.items():
            platform = load_platform(name)
            platform.build(engine.gateway, engine.settings, platform.parse_options(options), None,
                           {"TELEGRAM_BOT_TOKEN": "123456:abc"})
        answer = await engine.say("hello", timeout=60)
    finally:
        await engine.stop()
    print(json.dumps({"answer": answer, "modules": sorted(m for m in sys.modules if "." not in m)}))

asyncio.run(main())
"""


async def test_a_telegram_bot_answering_with_its_primary_model_imports_no_other_platform_or_model_sdk(
        fake_llm: FakeLLM, tmp_path: Path) -> None:
    fake_llm.default_reply = Reply(text="hi from the primary")
    env = {**os.environ, **fake_llm_environment(fake_llm), "HERMES_HOME": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    env.pop("HERMES_MODEL", None)
    env.pop("HERMES_FALLBACK_MODELS", None)

    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", SCRIPT, str(tmp_path / "home"), cwd=ROOT,
                                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    result = json.loads(out.decode().splitlines()[-1])

    assert result["answer"] == "hi from the primary"
    assert {r.path for r in fake_llm.requests} == {"/v1/messages"}  # the primary answered every call
    modules = set(result["modules"])
    assert {"telegram", "anthropic"} <= modules
    assert not modules & {"openai", "discord", "slack_bolt", "slack_sdk"}
