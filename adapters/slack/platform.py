"""Slack as a platform the gateway can load: what it needs from the environment and how one bot's adapter
is assembled from it.

Secrets and endpoints come from the environment, never the profile, so a profile can be committed. The
variable names are options (`bot_token_env`, …) so two bots in one process can use two Slack apps:

- ``SLACK_BOT_TOKEN`` (required): the bot token, ``xoxb-…``;
- ``SLACK_SIGNING_SECRET``: required for the Events API, not needed in Socket Mode;
- ``SLACK_APP_TOKEN`` (optional): an app-level token, ``xapp-…``, which selects Socket Mode;
- ``SLACK_API_URL`` (optional): another Web API base URL (a test fake, a proxy).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from adapters.platform import CredentialCheck, EnvVar, Platform, PlatformOptions
from adapters.slack.adapter import SlackAdapter
from adapters.slack.options import SlackOptions
from adapters.slack.web_api import DEFAULT_API_URL
from hermes_engine.errors import ConfigError

if TYPE_CHECKING:
    from aiohttp import web

    from hermes_engine.config import Settings
    from hermes_engine.ports.engine import EnginePort

API_URL_ENV = "SLACK_API_URL"


def _get(env: Mapping[str, str], name: str) -> str:
    return (env.get(name) or "").strip()


class SlackPlatform(Platform):
    name = "slack"
    options_model = SlackOptions

    def _options(self, options: PlatformOptions | Mapping[str, Any] | None) -> SlackOptions:
        if isinstance(options, SlackOptions):
            return options
        if isinstance(options, PlatformOptions):
            raise TypeError(f"Slack needs SlackOptions, not {type(options).__name__}")
        return cast(SlackOptions, self.parse_options(options))  # parse_options builds `options_model`

    def environment(self, options: PlatformOptions, env: Mapping[str, str]) -> list[EnvVar]:
        opts = self._options(options)
        socket_mode = bool(_get(env, opts.app_token_env))
        variables = [EnvVar(opts.bot_token_env, "the bot token, xoxb-…, from OAuth & Permissions", token=True)]
        if not socket_mode:
            variables.append(EnvVar(opts.signing_secret_env, "Basic Information → Signing Secret, for the "
                                                             f"Events API (or set {opts.app_token_env})"))
        variables += [
            EnvVar(opts.app_token_env, "an app-level token, xapp-…, to use Socket Mode instead of the Events API",
                   required=False),
            EnvVar(API_URL_ENV, f"a Web API base URL other than {DEFAULT_API_URL}", required=False),
        ]
        return variables

    async def verify(self, options: PlatformOptions, env: Mapping[str, str]) -> CredentialCheck:
        from adapters.slack.credentials import check_token

        opts = self._options(options)
        return await check_token(_get(env, opts.bot_token_env), opts.bot_token_env, _get(env, API_URL_ENV) or None)

    def build(self, engine: EnginePort, settings: Settings, options: PlatformOptions | Mapping[str, Any] | None,
              http: web.Application | None, env: Mapping[str, str]) -> SlackAdapter:
        """Also takes the profile's raw block for `options` (it is validated here then)."""
        opts = self._options(options)
        token = _get(env, opts.bot_token_env)
        if not token:
            raise ConfigError(f"{opts.bot_token_env} is not set (the bot token, xoxb-…, from OAuth & Permissions).")
        app_token = _get(env, opts.app_token_env) or None
        secret = _get(env, opts.signing_secret_env) or None
        if app_token is None and secret is None:
            raise ConfigError(f"{opts.signing_secret_env} is not set (Basic Information → Signing Secret); "
                              f"it is needed unless {opts.app_token_env} selects Socket Mode.")
        if app_token is None and http is None:
            raise ConfigError("The Slack Events API needs the gateway's HTTP server (HERMES_HTTP_HOST/PORT).")
        adapter = SlackAdapter(engine, bot_token=token, signing_secret=secret, app_token=app_token,
                               api_url=_get(env, API_URL_ENV) or None, options=opts,
                               home=Path(settings.home) if settings is not None else None)
        if app_token is None and http is not None:
            http.router.add_post(opts.events_path, adapter.handle_http)
        return adapter
