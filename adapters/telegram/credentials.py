"""The bot token tried against the Bot API (`getMe`) before the gateway starts, through the library the
adapter uses, so a token Telegram refuses is one sentence at `run` and `doctor` instead of a retry loop."""

from __future__ import annotations

from adapters.platform import CredentialCheck
from adapters.telegram.botapi import redact_token_in_logs

TIMEOUT_SECONDS = 10.0


async def check_token(token: str, base_url: str) -> CredentialCheck:
    from adapters.telegram.library import load

    load()
    from telegram import Bot
    from telegram.error import InvalidToken, TelegramError

    from adapters.telegram.request import AiohttpRequest

    redact_token_in_logs(token)  # the library's request lines carry it in the URL
    request = AiohttpRequest(1, connect_timeout=TIMEOUT_SECONDS, read_timeout=TIMEOUT_SECONDS,
                             pool_timeout=TIMEOUT_SECONDS)
    # Its own getUpdates transport too, or the library builds an httpx one (and loads httpcore) for nothing.
    bot = Bot(token, base_url=base_url, request=request, get_updates_request=AiohttpRequest(1))
    try:
        async with bot:  # initialize() is getMe
            return CredentialCheck(who=f"@{bot.username}")
    except InvalidToken:
        return CredentialCheck(refused=f"telegram: the Bot API at {base_url} refused TELEGRAM_BOT_TOKEN "
                                       f"(Unauthorized): copy the token again from @BotFather (/token).")
    except TelegramError as exc:
        return CredentialCheck(unreached=f"telegram: the Bot API at {base_url} did not answer getMe "
                                         f"({exc.message or type(exc).__name__}), so TELEGRAM_BOT_TOKEN is "
                                         f"untested; the adapter keeps trying once started.")
