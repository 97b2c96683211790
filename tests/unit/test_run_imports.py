"""What `hermes-gateway run` imports before it serves: no command group of the CLI, and no single sign-on
library (Authlib, joserfc, and through them `cryptography`, which would also make python-telegram-bot load
httpx's command line with rich). Each is imported when it is used, as the last check shows. Checked in a
fresh interpreter, since this test process may have imported everything already."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, sys
import hermes_gateway.cli.main
import hermes_gateway.serve
from adapters.telegram.library import load
load()
before = sorted(m for m in sys.modules if m.startswith(("hermes_gateway.cli.", "authlib", "joserfc",
                                                         "cryptography", "rich")))
from typer.main import get_command
from typer.testing import CliRunner
root = get_command(hermes_gateway.cli.main.app)
jobs = CliRunner().invoke(hermes_gateway.cli.main.app, ["jobs", "--help"])
print(json.dumps({"before": before, "jobs": "hermes_gateway.cli.jobs" in sys.modules, "help": jobs.output,
                  "groups": root.list_commands(None)}))
"""


def test_serving_imports_no_command_group_nor_sign_on_library_until_one_is_used() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["before"] == ["hermes_gateway.cli.lazy", "hermes_gateway.cli.main"]
    assert found["jobs"] and "Reminders and scheduled jobs" in found["help"] and "list" in found["help"]
    assert found["groups"][:4] == ["chat", "run", "doctor", "migrate-files"] and "kanban" in found["groups"]
