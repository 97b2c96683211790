"""Slack: a slack-bolt app on the gateway's HTTP server (or a Socket Mode connection), answering through
slack-sdk's Web API client, speaking to the engine only through its port.

Inbound
    `events` receives (signatures, acknowledgement at once, Events API retries); `inbound` decides which
    messages are meant for the bot and turns them into `InboundMessage`s; `threads` knows which threads
    the bot is part of; `commands` runs the `/goal` and `/hermes` slash commands.

Access
    The engine decides (`hermes_engine.policy.access`). The adapter reports who wrote where and whether
    they are a bot; the token's own workspace is a membership boundary, so an empty allowlist admits every
    member and pairing does not apply (people of another organisation in a shared channel are not members).
    No Slack role (workspace owner or admin) is reported: only `access.admins` names admins of the bot.
    Only the bot's own posts are dropped here, since answering them would loop.

Outbound
    The shared layer (`adapters.base`) paces, splits, renders and delivers once; `outbound` holds the
    Slack calls (post-then-edit, native streams in threads) and `web_api` the client, its proxy and the
    mapping of Slack's refusals (a 429's `Retry-After` pauses the channel).

Options (``platforms.slack``) are `SlackOptions`; the environment gives secrets and endpoints (`platform`).
"""

from __future__ import annotations

from adapters.slack.adapter import SlackAdapter
from adapters.slack.options import SlackOptions
from adapters.slack.platform import SlackPlatform
from adapters.slack.web_api import SlackCallError, proxy_for

PLATFORM = SlackPlatform()

__all__ = ["PLATFORM", "SlackAdapter", "SlackCallError", "SlackOptions", "SlackPlatform", "proxy_for"]
