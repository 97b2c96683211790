"""`run` begins importing the primary model's SDK before anything else (`wiring.warm_models`), so that the
largest import of a start runs while the preflight and the building of the gateways go on. Only the
primary's SDK is imported, no fallback's; a spec that cannot be loaded is left to the preflight to report.
Checked in a fresh interpreter, where no SDK is imported yet."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, os, sys
from hermes_engine.config import load_profile, load_settings
from hermes_gateway.wiring import warm_models
profile = load_profile("bots/telegram-dm-assistant")
bad = profile.model_copy(update={"model": "nobody:such-model"})
thread = warm_models(load_settings(), [profile, bad])
started_as_daemon = thread.daemon
thread.join(60)
print(json.dumps({"daemon": started_as_daemon, "alive": thread.is_alive(),
                  "sdks": sorted(m for m in sys.modules if m in ("anthropic", "openai"))}))
"""


def test_the_warm_up_imports_the_primary_sdk_only_and_leaves_a_bad_spec_to_the_preflight(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "ANTHROPIC_", "OPENAI_"))}
    env.update({"HERMES_HOME": str(tmp_path), "ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"})
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=90,
                          env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"daemon": True, "alive": False, "sdks": ["anthropic"]}
