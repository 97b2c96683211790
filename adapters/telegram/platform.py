"""Telegram as a platform the gateway can load: what it needs from the environment and how one bot's
adapter is assembled from it.

Secrets and endpoints come from the environment, never the profile, so a profile can be committed:

- ``TELEGRAM_BOT_TOKEN`` (required; without it the runner skips Telegram for this bot);
- ``TELEGRAM_API_BASE_URL`` (default ``https://api.telegram.org/bot``; the file URL is derived beside it,
  ``…/file/bot``, or given as ``TELEGRAM_API_FILE_URL``), for a self-hosted Bot API server or a test fake;
- ``TELEGRAM_ALLOWED_USERS`` (comma-separated user ids the engine admits besides its own list);
- webhook mode: ``TELEGRAM_WEBHOOK_SECRET`` (required) and ``TELEGRAM_WEBHOOK_URL`` (optional: when set,
  the webhook is registered at start; otherwise it must already point at ``/telegram/<bot>``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.platform import CredentialCheck, EnvVar, Platform, PlatformOptions
from adapters.telegram.adapter import TelegramAdapter
from adapters.telegram.botapi import DEFAULT_API_BASE_URL, api_file_url
from adapters.telegram.options import TelegramOptions
from hermes_engine.errors import ConfigError

if TYPE_CHECKING:
    from aiohttp import web

    from hermes_engine.config import Settings
    from hermes_engine.ports.engine import EnginePort

_TOKEN = re.compile(r"^\d+:[A-Za-z0-9_-]+$")
_SECRET = re.compile(r"^[A-Za-z0-9_-]{1,256}$")  # what Telegram accepts as a secret_token

NO_TOKEN = "TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather and export its token."
BAD_TOKEN = "TELEGRAM_BOT_TOKEN does not look like a bot token (digits, a colon, then letters)."
NO_SECRET = ("TELEGRAM_WEBHOOK_SECRET is not set: webhook mode needs a secret (1-256 of A-Z, a-z, 0-9, _ and -) "
             "to tell Telegram's requests from anyone else's.")
BAD_SECRET = "TELEGRAM_WEBHOOK_SECRET may hold only 1-256 of A-Z, a-z, 0-9, _ and -."


def parse_user_ids(value: str | None) -> frozenset[str]:
    return frozenset(part.strip().lstrip("@") for part in (value or "").split(",") if part.strip())


def _get(env: Mapping[str, str], name: str) -> str:
    return (env.get(name) or "").strip()


def _base_url(env: Mapping[str, str]) -> str:
    return (_get(env, "TELEGRAM_API_BASE_URL") or DEFAULT_API_BASE_URL).rstrip("/")


class TelegramPlatform(Platform):
    name = "telegram"
    options_model = TelegramOptions

    def environment(self, options: PlatformOptions, env: Mapping[str, str]) -> list[EnvVar]:
        variables = [
            EnvVar("TELEGRAM_BOT_TOKEN", "the bot's token from @BotFather", token=True),
            EnvVar("TELEGRAM_ALLOWED_USERS", "comma-separated Telegram user ids to serve besides access.allowed_users",
                   required=False),
            EnvVar("TELEGRAM_API_BASE_URL", f"a Bot API server other than {DEFAULT_API_BASE_URL}", required=False),
            EnvVar("TELEGRAM_API_FILE_URL", "its file download URL, when not beside the API URL", required=False),
        ]
        if isinstance(options, TelegramOptions) and options.mode == "webhook":
            variables += [
                EnvVar("TELEGRAM_WEBHOOK_SECRET", "1-256 of A-Z, a-z, 0-9, _ and -, checked on every webhook call"),
                EnvVar("TELEGRAM_WEBHOOK_URL", "the public URL to register the webhook at start", required=False),
            ]
        return variables

    def problems(self, options: PlatformOptions, env: Mapping[str, str]) -> list[str]:
        found = super().problems(options, env)
        token = _get(env, "TELEGRAM_BOT_TOKEN")
        if token and not _TOKEN.match(token):
            found.append(f"{self.name}: {BAD_TOKEN}")
        webhook = isinstance(options, TelegramOptions) and options.mode == "webhook"
        secret = _get(env, "TELEGRAM_WEBHOOK_SECRET")
        if webhook and secret and not _SECRET.match(secret):
            found.append(f"{self.name}: {BAD_SECRET}")
        return found

    async def verify(self, options: PlatformOptions, env: Mapping[str, str]) -> CredentialCheck:
        from adapters.telegram.credentials import check_token

        return await check_token(_get(env, "TELEGRAM_BOT_TOKEN"), _base_url(env))

    def build(self, engine: EnginePort, settings: Settings, options: PlatformOptions | Mapping[str, Any] | None,
              http: web.Application | None, env: Mapping[str, str]) -> TelegramAdapter:
        """Also takes the raw ``platforms.telegram`` mapping for `options` (validated here then)."""
        opts = self._options(options)
        token = _get(env, "TELEGRAM_BOT_TOKEN")
        if not token:
            raise ConfigError(NO_TOKEN)
        if not _TOKEN.match(token):
            raise ConfigError(BAD_TOKEN)
        base_url = _base_url(env)
        file_url = (_get(env, "TELEGRAM_API_FILE_URL") or api_file_url(base_url)).rstrip("/")
        secret = _get(env, "TELEGRAM_WEBHOOK_SECRET") or None
        webhook_url = opts.webhook_url or _get(env, "TELEGRAM_WEBHOOK_URL") or None
        if opts.mode == "webhook":
            if not secret:
                raise ConfigError(NO_SECRET)
            if not _SECRET.match(secret):
                raise ConfigError(BAD_SECRET)
            if http is None:
                raise ConfigError("Telegram webhook mode needs the gateway's HTTP server (run with "
                                  "`hermes-gateway run`).")
        adapter = TelegramAdapter(engine, token=token, base_url=base_url, file_url=file_url, options=opts,
                                  home=Path(settings.home), webhook_secret=secret, webhook_url=webhook_url,
                                  allowed_users=parse_user_ids(env.get("TELEGRAM_ALLOWED_USERS")))
        if opts.mode == "webhook" and http is not None:
            http.router.add_post(adapter.webhook_path, adapter.handle_webhook)
        return adapter

    def _options(self, options: PlatformOptions | Mapping[str, Any] | None) -> TelegramOptions:
        if isinstance(options, TelegramOptions):
            return options
        parsed = self.parse_options(options.model_dump() if isinstance(options, PlatformOptions) else options)
        assert isinstance(parsed, TelegramOptions)
        return parsed
