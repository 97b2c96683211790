"""Secrets in text: the one list of secret shapes, and redaction built on it.

Used wherever text leaves the process or persists: trajectory export (`hermes_engine.history.export`), the
security scan of what the agent writes to itself (`hermes_engine.policy.security`, whose "secret" rule finds
exactly the spans `redact` replaces), provider error messages, error text shown to a person (a failed turn,
a failed command), and every log record (`install_log_redaction`, called by the CLI's logging set-up with
the values of the secret-named environment variables).

What counts as a secret:
    - vendor keys with a recognisable shape: Anthropic (`sk-ant-…`), OpenAI (`sk-…`, `sk-proj-…`), Stripe,
      Slack (`xox[abposre]-…`, `xapp-…`, webhook URLs), GitHub, GitLab, AWS access key ids, Google API keys,
      Telegram bot tokens, Discord bot tokens (also `mfa.…` and webhook URLs), JWTs;
    - private key blocks (PEM, OpenSSH, PGP), through their END line when there is one;
    - credentials by position: `Authorization:` header values, `Bearer …` tokens, passwords in URLs
      (`scheme://user:password@host`), and `name=value` / `name: value` where the name says secret
      (api_key, password, client_secret, *_TOKEN, …) and the value is not a reference such as `$VAR`,
      `<placeholder>`, `os.environ[...]` or a call;
    - by look: hex runs of 32 or more characters, and runs of 40 or more base64-ish characters that look
      random (digits and both cases, few separators);
    - any of these percent-encoded (`123456789%3AAAH…` in a Telegram file URL): the shapes are matched on
      the URL-decoded text too, and the encoded span is what gets redacted.

Deliberately left alone: URLs without credentials, paths and slugs, UUIDs, 40-character hex strings (git
commit ids) and hex digests written as `sha256:…` (also sha1, sha512, md5).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["REDACTED", "SecretFilter", "SecretMatch", "find_secrets", "install_log_redaction", "redact",
           "redact_record", "secret_env_values"]

REDACTED = "[REDACTED]"

# Values that name a secret instead of holding one: $VAR, ${VAR}, <your-key>, {{ secret }}, %VAR%, ****.
_NOT_A_VALUE = r"(?![$<{%*\[(])"
# A credential value: 8+ characters with a letter and a digit or symbol, ending where a value ends (so a call
# such as get_key() or an index such as os.environ[...] is not one). Lookaheads are lazy and bounded so that
# long runs without blanks cost linear time.
_V = r"[^\s\"',;()\[\]{}<>]"
_VALUE = (rf"{_NOT_A_VALUE}(?={_V}{{0,200}}?[A-Za-z])(?={_V}{{0,200}}?[0-9!@#%^&*+=?~])"
          rf"{_V}{{8,500}}(?=[\s\"',;)\]}}>]|$)")
_SECRET_NAME = (
    r"(?i:\b(?:[a-z0-9]{1,20}[_.-]){0,4}"
    r"(?:api[_-]?key|secret[_-]?key|access[_-]?key|private[_-]?key|access[_-]?token|auth[_-]?token|"
    r"refresh[_-]?token|bot[_-]?token|api[_-]?token|client[_-]?secret|signing[_-]?secret|app[_-]?secret|"
    r"password|passwd|secret|token))"
)
# A header value ends where a value ends: `os.environ['KEY']` and `get_token()` are references, not values.
_HEADER_VALUE = r"[^\s\"',;\[(]{8,}(?=[\s\"',;)\]}>]|$)"


def _looks_random(token: str) -> bool:
    """Digits and both cases, few separators: a key, not a path, slug or word."""
    return (any(c.isdigit() for c in token) and any(c.islower() for c in token)
            and any(c.isupper() for c in token) and token.count("/") <= 2
            and token.count("-") + token.count("_") <= len(token) // 8)


# (what it is, pattern, a last look at the matched secret or None). "what it is" names scanner findings.
_Shape = tuple[str, str, Callable[[str], bool] | None]


def _shape(kind: str, pattern: str, accept: Callable[[str], bool] | None = None) -> _Shape:
    return (kind, pattern, accept)


# Order matters only on a tie (two shapes matching the same span): the earlier one names it.
# A pattern with a group named "secret" redacts that group only (the name or scheme before it stays).
_SHAPES: tuple[_Shape, ...] = (
    _shape("private key block",
           r"-----BEGIN[A-Z ]{0,30}PRIVATE KEY(?: BLOCK)?-----"
           r"(?:.{0,10000}?-----END[A-Z ]{0,30}PRIVATE KEY(?: BLOCK)?-----|(?:(?:\r?\n|\\n)+[A-Za-z0-9+/=]+)*)"),
    _shape("Anthropic API key", r"\bsk-ant-(?=[A-Za-z0-9_*-]{0,200}?[0-9*])[A-Za-z0-9_*-]{16,}"),
    _shape("OpenAI API key", r"\bsk-(?=[A-Za-z0-9_*-]{0,200}?[0-9*])[A-Za-z0-9_*-]{16,}"),
    _shape("Stripe key", r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"),
    _shape("Slack token", r"\bxox[abposre]-[A-Za-z0-9-]{10,}"),
    _shape("Slack app token", r"\bxapp-\d-[A-Za-z0-9-]{10,}"),
    _shape("Slack webhook", r"(?<=hooks\.slack\.com/)(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9/_-]{20,})"),
    _shape("GitHub token", r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    _shape("GitHub token", r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    _shape("GitLab token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    _shape("AWS access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    _shape("Google API key", r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
    # The bot id, a colon, then 34-35 characters (the Bot API's own examples have 34); also after "bot" in a URL.
    _shape("Telegram bot token", r"(?<![0-9])[0-9]{5,12}:[A-Za-z0-9_-]{30,50}(?![A-Za-z0-9_-])"),
    # base64 of the bot's id (M, N or O first), a timestamp, then an HMAC of 27 (older) or 38 characters.
    _shape("Discord bot token",
           r"(?<![A-Za-z0-9_-])[MNO][A-Za-z0-9_-]{22,30}\.[A-Za-z0-9_-]{5,7}\.[A-Za-z0-9_-]{27,50}(?![A-Za-z0-9_-])"),
    _shape("Discord token", r"\bmfa\.[A-Za-z0-9_-]{20,}"),
    _shape("Discord webhook", r"(?<=/api/webhooks/)[0-9]{5,25}/(?P<secret>[A-Za-z0-9_-]{30,})"),
    _shape("JSON web token", r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.?[A-Za-z0-9_-]*"),
    _shape("authorization header",
           rf"(?i:\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|bot|token)\s+)?)"
           rf"(?P<secret>{_NOT_A_VALUE}{_HEADER_VALUE})"),
    _shape("bearer token",
           r"(?i:\bbearer\s+)(?P<secret>(?=[A-Za-z0-9._~+/-]{0,500}?[0-9])[A-Za-z0-9._~+/-]{16,}=*)"),
    _shape("password in a URL", rf"(?<=://)[^\s/:@]{{1,100}}:(?P<secret>{_NOT_A_VALUE}[^\s/@]{{3,200}})@"),
    _shape("secret assignment", rf"{_SECRET_NAME}[\"']?\s*[:=]\s*[\"']?(?P<secret>{_VALUE})"),
    _shape("long hex string",
           r"(?<![0-9A-Za-z_])(?<!sha1:)(?<!sha256:)(?<!sha384:)(?<!sha512:)(?<!md5:)"
           r"(?:[0-9a-fA-F]{32,39}|[0-9a-fA-F]{41,})(?![0-9A-Za-z_])"),
    _shape("random-looking token", r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{40,}={0,2}", accept=_looks_random),
)
_compiled: list[tuple[str, re.Pattern[str], Callable[[str], bool] | None]] = []


def _patterns() -> list[tuple[str, re.Pattern[str], Callable[[str], bool] | None]]:
    """The shapes, compiled on first use (importing this module stays cheap)."""
    if not _compiled:
        _compiled.extend((kind, re.compile(pattern, re.S), accept) for kind, pattern, accept in _SHAPES)
    return _compiled


@dataclass(frozen=True)
class SecretMatch:
    """One secret in a text: `text[start:end]` is the secret itself (without a name or scheme before it)."""

    kind: str
    start: int
    end: int
    value: str

    def describe(self) -> str:
        """Says what was found without quoting any of it."""
        return f"{self.kind} (redacted, {len(self.value)} chars)"


_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")


def _decoded(text: str) -> tuple[str, list[int]] | None:
    """`text` with %XX escapes decoded (a URL carries a token's colon as %3A), and for every decoded character
    the index of its first character in `text`, plus one final entry: `len(text)`. None without escapes."""
    if "%" not in text or not _PERCENT.search(text):
        return None
    chars: list[str] = []
    origin: list[int] = []
    at = 0
    for match in _PERCENT.finditer(text):
        chars.append(text[at:match.start()])
        origin.extend(range(at, match.start()))
        chars.append(chr(int(match.group()[1:], 16)))
        origin.append(match.start())
        at = match.end()
    chars.append(text[at:])
    origin.extend(range(at, len(text) + 1))
    return "".join(chars), origin


def _spans(text: str, extra: set[str]) -> list[tuple[int, int, int, str]]:
    """(start, -length, order, kind) of every shape and known value in `text`, overlaps included."""
    found: list[tuple[int, int, int, str]] = []
    for order, (kind, pattern, accept) in enumerate(_patterns()):
        group = "secret" if "secret" in pattern.groupindex else 0
        for match in pattern.finditer(text):
            start, end = match.span(group)
            if end > start and (accept is None or accept(text[start:end])):
                found.append((start, start - end, order, kind))
    for value in extra:
        at = text.find(value)
        while at >= 0:
            found.append((at, -len(value), -1, "known secret"))
            at = text.find(value, at + len(value))
    return found


def find_secrets(text: str, *, extra: Iterable[str | None] = ()) -> list[SecretMatch]:
    """Every secret in `text`, in order and without overlaps (where two overlap, the earlier-starting,
    then the longer one wins). `extra` adds known secret values (a configured API key, a bot token),
    found wherever they occur; values shorter than 6 characters are ignored. Percent-encoded forms count
    too: a secret found in the URL-decoded text covers its encoded span in `text`."""
    if not text:
        return []
    known = {v for v in extra if v and len(v) >= 6}
    found = _spans(text, known)
    decoded = _decoded(text)
    if decoded is not None:
        plain, origin = decoded
        for start, negative_length, order, kind in _spans(plain, known):
            end = start - negative_length
            found.append((origin[start], origin[start] - origin[end], order, kind))
    found.sort()
    matches: list[SecretMatch] = []
    reached = 0
    for start, negative_length, _, kind in found:
        end = start - negative_length
        if start >= reached:
            matches.append(SecretMatch(kind, start, end, text[start:end]))
            reached = end
    return matches


def redact(text: str, *, extra: Iterable[str | None] = ()) -> str:
    """`text` with every secret (see `find_secrets`) replaced by [REDACTED]."""
    return mask(text, find_secrets(text, extra=extra))


def mask(text: str, matches: Iterable[SecretMatch], start: int = 0, end: int | None = None) -> str:
    """`text[start:end]` with the parts covered by `matches` (found in all of `text`) replaced by [REDACTED]."""
    end = len(text) if end is None else end
    parts: list[str] = []
    at = start
    for match in matches:
        if match.end <= at or match.start >= end:
            continue
        parts.append(text[at:max(at, match.start)])
        parts.append(REDACTED)
        at = match.end
    if at < end:
        parts.append(text[at:end])
    return "".join(parts)


def redact_record(record: logging.LogRecord, extra: Iterable[str | None] = ()) -> None:
    """Redact a log record in place: the message after its arguments are merged in, the traceback, the stack."""
    message = record.getMessage()
    clean = redact(message, extra=extra)
    if clean != message or record.args:
        record.msg, record.args = clean, None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact(record.exc_text, extra=extra)
    if record.stack_info:
        record.stack_info = redact(record.stack_info, extra=extra)


class SecretFilter(logging.Filter):
    """`redact_record` as a filter, for one handler. `extra` holds known secret values (bot tokens, API keys)
    to remove wherever they appear."""

    def __init__(self, extra: Iterable[str | None] = ()) -> None:
        super().__init__()
        self.extra = tuple(v for v in extra if v)

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record, self.extra)
        return True


class _RedactingFactory:
    """A log record factory that redacts each record as it is made (see `install_log_redaction`)."""

    def __init__(self, inner: Callable[..., logging.LogRecord], extra: tuple[str, ...]) -> None:
        self.inner = inner
        self.extra = extra

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self.inner(*args, **kwargs)
        with contextlib.suppress(Exception):  # a bad format string is the handler's to report, as always
            redact_record(record, self.extra)
        return record


def install_log_redaction(*, extra: Iterable[str | None] = ()) -> None:
    """Redact every log record of the process as it is made, before any logger filter or handler sees it.

    A filter on a handler covers only that handler; records made through the factory are clean wherever
    they go: stderr, a file, a handler a library adds later, httpx and python-telegram-bot URLs included.
    Records are made only for enabled levels, so disabled debug logging costs nothing. Calling it again
    adds `extra` values to the ones already known."""
    known = tuple(v for v in extra if v)
    current = logging.getLogRecordFactory()
    if isinstance(current, _RedactingFactory):
        current.extra = tuple(dict.fromkeys(current.extra + known))
        return
    logging.setLogRecordFactory(_RedactingFactory(current, known))


# The last part of an environment variable name that says its value is a secret: OPENAI_API_KEY,
# TELEGRAM_BOT_TOKEN, SLACK_SIGNING_SECRET, DB_PASSWORD (not TOKEN_URL or KEY_FILE).
_SECRET_ENV_NAME = re.compile(r"(?:^|_)(?:KEYS?|TOKENS?|SECRETS?|PASSWORDS?|PASSWD|PASS|CREDENTIALS?)$", re.I)


def secret_env_values(environ: Mapping[str, str]) -> list[str]:
    """Values of environment variables named like secrets, 8 characters or longer: known values to redact
    even when they have no recognisable shape (a self-hosted model's key, a test bot's token)."""
    return [value for name, value in environ.items() if _SECRET_ENV_NAME.search(name) and len(value) >= 8]
