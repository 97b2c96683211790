"""The bot token tried against the REST API (`GET users/@me`) before the gateway starts, at the base URL the
adapter would use, so a token Discord refuses is one sentence at `run` and `doctor` instead of an adapter
that logs in, fails and stays off."""

from __future__ import annotations

import aiohttp

from adapters.discord.options import TOKEN_ENV, DiscordConnection
from adapters.platform import CredentialCheck

DEFAULT_API_BASE = "https://discord.com/api/v10"
TIMEOUT_SECONDS = 10.0


async def check_token(connection: DiscordConnection) -> CredentialCheck:
    base = connection.api_base_url or DEFAULT_API_BASE
    headers = {"Authorization": f"Bot {connection.token}"}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)) as http, \
                http.get(f"{base}/users/@me", headers=headers) as response:
            if response.status == 401:
                return CredentialCheck(refused=f"discord: the REST API at {base} refused {TOKEN_ENV} (401 "
                                               f"Unauthorized): copy the bot token again from the developer portal "
                                               f"(Applications → your app → Bot → Reset Token).")
            if response.status != 200:
                return CredentialCheck(unreached=_unreached(base, f"HTTP {response.status}"))
            me = await response.json()
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
        return CredentialCheck(unreached=_unreached(base, type(exc).__name__))
    return CredentialCheck(who=f"@{me.get('username', '?')}")


def _unreached(base: str, reason: str) -> str:
    return (f"discord: the REST API at {base} did not answer GET users/@me ({reason}), so {TOKEN_ENV} is "
            f"untested; the adapter keeps trying once started.")
