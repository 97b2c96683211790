"""The bot token tried against the Web API (`auth.test`) before the gateway starts, through the same client
(proxy, `SLACK_API_URL`) the adapter uses, so a token Slack refuses is one sentence at `run` and `doctor`."""

from __future__ import annotations

import asyncio

import aiohttp

from adapters.platform import CredentialCheck
from adapters.slack.web_api import REFUSED_TOKEN, SlackCallError, SlackWebApi

TIMEOUT_SECONDS = 10.0


async def check_token(token: str, token_env: str, api_url: str | None) -> CredentialCheck:
    api = SlackWebApi(token, api_url)
    await api.open()
    try:
        me = await asyncio.wait_for(api.identify(), TIMEOUT_SECONDS)
    except SlackCallError as exc:
        if exc.error in REFUSED_TOKEN:
            return CredentialCheck(refused=f"slack: the Web API at {api.api_url} refused {token_env} ({exc.error}): "
                                           f"copy the Bot User OAuth Token (xoxb-…) again from OAuth & Permissions.")
        return CredentialCheck(unreached=_unreached(api.api_url, token_env, exc.error or str(exc.status)))
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return CredentialCheck(unreached=_unreached(api.api_url, token_env, type(exc).__name__))
    finally:
        await api.close()
    return CredentialCheck(who=f"@{me.name} in team {me.team_id}")


def _unreached(api_url: str, token_env: str, reason: str) -> str:
    return (f"slack: the Web API at {api_url} did not answer auth.test ({reason}), so {token_env} is untested; "
            f"the adapter keeps trying once started.")
