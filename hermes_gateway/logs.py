"""How the process logs: quiet by default, one line per turn, text or JSON lines, secrets always redacted.

An operator reads the log for what happened to people's messages, not for the traffic that carries them:
HTTP client requests (a Telegram poll every few seconds, every model call), probes of /health and /ready
and migration steps are debug lines. `HERMES_LOG_FORMAT=json` writes one JSON object per line for a log
collector, with the fields a line carries (`extra=`, e.g. a turn's person, platform, latency and tokens).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from hermes_engine.errors import ConfigError
from hermes_engine.secrets import install_log_redaction, redact, secret_env_values

# Loggers that write a line per request or step at INFO: shown (as debug lines) only at HERMES_LOG_LEVEL=DEBUG.
# httpx carries python-telegram-bot's polls and the model SDKs' calls; aiohttp.access the health probes.
TRAFFIC_LOGGERS = ("httpx", "httpx2", "httpcore", "aiohttp.access", "alembic")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# What every LogRecord has; anything else on a record came from `extra=` and belongs in its JSON line.
_RECORD_FIELDS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class _TrafficAsDebug(logging.Filter):
    """Traffic lines are debug lines, whatever level their library gives them."""

    def filter(self, record: logging.LogRecord) -> bool:
        traffic = any(record.name == name or record.name.startswith(name + ".") for name in TRAFFIC_LOGGERS)
        if traffic and record.levelno == logging.INFO:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the record's `extra=` fields, and the
    traceback, if any. The message and traceback arrive redacted (`install_log_redaction`); string fields
    are redacted here, since `extra=` is set after the record is made."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = tuple(secrets)

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        for name, value in record.__dict__.items():
            if name not in _RECORD_FIELDS and not name.startswith("_"):
                entry[name] = redact(value, extra=self.secrets) if isinstance(value, str) else value
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(self.formatException(record.exc_info), extra=self.secrets)
        if record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, default=str, ensure_ascii=False)


def setup_logging(level: str, *, stream: TextIO, environ: Mapping[str, str]) -> None:
    """Log lines to `stream` in the format HERMES_LOG_FORMAT names, with secrets redacted from
    every record of every logger and handler: the known shapes (tokens, keys, passwords, also
    percent-encoded in URLs) and the values of the secret-named environment variables, whatever their
    shape."""
    fmt = environ.get("HERMES_LOG_FORMAT", "text").strip().lower() or "text"
    if fmt not in FORMATS:
        raise ConfigError(f"HERMES_LOG_FORMAT must be 'text' or 'json', not {fmt!r}.")
    secrets = secret_env_values(environ)
    install_log_redaction(extra=secrets)
    threshold = getattr(logging, level.upper(), logging.INFO)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(secrets) if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(_TrafficAsDebug())
    logging.basicConfig(level=threshold, handlers=[handler])
    for name in TRAFFIC_LOGGERS:  # above DEBUG their lines are not even made
        logging.getLogger(name).setLevel(logging.DEBUG if threshold <= logging.DEBUG
                                         else max(threshold, logging.WARNING))
