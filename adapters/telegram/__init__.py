"""Telegram: the Bot API through python-telegram-bot, speaking to the engine only through its port.

Inbound
    Long polling by default; webhook mode (``platforms.telegram.mode: webhook``) adds ``POST
    /telegram/<bot>`` to the gateway's HTTP server and checks ``X-Telegram-Bot-Api-Secret-Token`` against
    ``TELEGRAM_WEBHOOK_SECRET``. An update is confirmed to Telegram only once the engine's inbox has
    recorded it (`adapter`). Replicas on one database elect one poller per bot (lease
    ``telegram-poller:<bot id>``, `adapters.election`, ``poller_lease_seconds``); the others stand by
    and take over when it stops renewing. Webhook mode needs no election: any replica takes any update,
    and the engine's inbox drops one Telegram resends. Private chats are DMs, groups answer only when
    addressed (`inbound`); files are downloaded for the model (`media`).

Access
    The engine decides (`hermes_engine.policy.access`); the adapter reports who wrote where, adds
    ``TELEGRAM_ALLOWED_USERS`` as the platform's own allowlist, and delivers the engine's reply to a
    stranger (their pairing code). A stranger never causes a model call.

Outbound
    The shared layer (`adapters.base`): a per-chat lane paced at ``edit_interval_seconds`` (1 s; groups
    ``group_interval_seconds``, 3 s = 20 a minute), 30 calls a second overall, 429 ``retry_after``
    honoured exactly, streaming as one message edited in place, finals rendered to text + entities
    (`adapters.render.render_telegram`, no parse mode) and re-sent as plain text if Telegram rejects the
    formatting, parts split at 4,096 UTF-16 units. The Bot API calls themselves are in `outbound` (its `Transport`).

Options (``platforms.telegram``) are `TelegramOptions`; the environment gives secrets and endpoints
(`platform`). Nothing here imports python-telegram-bot until an adapter is built, so loading the platform
for `doctor` stays cheap.
"""

from __future__ import annotations

from adapters.telegram.adapter import TelegramAdapter
from adapters.telegram.botapi import TelegramCallError, api_file_url, redact_token_in_logs
from adapters.telegram.options import TelegramOptions
from adapters.telegram.platform import TelegramPlatform, parse_user_ids

PLATFORM = TelegramPlatform()

__all__ = ["PLATFORM", "TelegramAdapter", "TelegramCallError", "TelegramOptions", "TelegramPlatform",
           "api_file_url", "parse_user_ids", "redact_token_in_logs"]
