"""The process's log setup: traffic lines only at debug, JSON lines on request, secrets redacted in both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TELEGRAM_TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"


def log_with(level: str, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Set up logging as the CLI does, at `level`, then run `code`; the log is the result's stderr."""
    program = f"import logging; from hermes_gateway.cli.main import _setup_logging; _setup_logging({level!r}); {code}"
    environ = {name: value for name, value in os.environ.items() if not name.startswith("HERMES_LOG")}
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, timeout=60,
                            env={**environ, **env})
    assert result.returncode == 0, result.stderr
    return result


def test_http_client_and_access_lines_are_debug_lines_shown_only_at_debug() -> None:
    code = ("logging.getLogger('httpx').info('HTTP Request: POST /getUpdates'); "
            "logging.getLogger('aiohttp.access').info('GET /health 200'); "
            "logging.getLogger('alembic.runtime.migration').info('Running upgrade 0001'); "
            "logging.getLogger('hermes_gateway.serve').info('HTTP server on')")
    quiet = log_with("INFO", code).stderr
    assert "getUpdates" not in quiet and "/health" not in quiet and "upgrade" not in quiet
    assert "INFO hermes_gateway.serve: HTTP server on" in quiet
    debug = log_with("DEBUG", code).stderr
    assert "DEBUG httpx: HTTP Request: POST /getUpdates" in debug
    assert "DEBUG aiohttp.access: GET /health 200" in debug
    assert "DEBUG alembic.runtime.migration: Running upgrade 0001" in debug


def test_json_lines_carry_the_fields_of_a_line_with_secrets_redacted() -> None:
    code = ("logging.getLogger('hermes').info('token %s', 'bot" + TELEGRAM_TOKEN + "', "
            "extra={'platform': 'telegram', 'tokens_in': 3, 'note': 'key " + TELEGRAM_TOKEN + "'}); "
            "logging.getLogger('hermes').warning('odd key self-hosted-model-key')")
    result = log_with("INFO", code, HERMES_LOG_FORMAT="json", LOCAL_LLM_API_KEY="self-hosted-model-key")
    first, second = (json.loads(line) for line in result.stderr.splitlines())
    assert first["level"] == "INFO" and first["logger"] == "hermes" and first["time"].endswith("+00:00")
    assert first["message"] == "token bot[REDACTED]"
    assert (first["platform"], first["tokens_in"], first["note"]) == ("telegram", 3, "key [REDACTED]")
    assert second["message"] == "odd key [REDACTED]"
    assert TELEGRAM_TOKEN not in result.stderr and "self-hosted-model-key" not in result.stderr


def test_an_unknown_log_format_stops_the_gateway_with_one_sentence(tmp_path) -> None:
    environ = {name: value for name, value in os.environ.items() if not name.startswith("HERMES_")}
    result = subprocess.run([sys.executable, "-m", "hermes_gateway.cli.main", "run"], capture_output=True, text=True,
                            cwd=ROOT, timeout=60, env={**environ, "HERMES_HOME": str(tmp_path),
                                                        "HERMES_LOG_FORMAT": "xml"})
    assert result.returncode == 2
    assert result.stderr.strip() == "hermes-gateway: HERMES_LOG_FORMAT must be 'text' or 'json', not 'xml'."
    assert list(tmp_path.iterdir()) == []
