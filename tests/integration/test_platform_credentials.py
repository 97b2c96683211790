"""Each platform tries its token against its own API before anything starts (Telegram `getMe`, Slack
`auth.test`, Discord `GET users/@me`), at the base URL its settings name: a token the API refuses is one
sentence naming the variable, one it accepts names the account, and an API that cannot be reached leaves the
token untested rather than stopping the start."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from fakes.fake_discord import FakeDiscord
from fakes.fake_slack import BOT_TOKEN, SIGNING_SECRET, FakeSlack
from fakes.fake_telegram import FakeTelegram

from adapters.platform import load


@asynccontextmanager
async def telegram_api(token: Callable[[Any], str]) -> AsyncIterator[dict[str, str]]:
    async with FakeTelegram() as fake:
        yield {"TELEGRAM_BOT_TOKEN": token(fake), "TELEGRAM_API_BASE_URL": fake.base_url}


@asynccontextmanager
async def slack_api(token: Callable[[Any], str]) -> AsyncIterator[dict[str, str]]:
    async with FakeSlack() as fake:
        yield {"SLACK_BOT_TOKEN": token(fake), "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": fake.api_url}


@asynccontextmanager
async def discord_api(token: Callable[[Any], str]) -> AsyncIterator[dict[str, str]]:
    async with FakeDiscord() as fake:
        yield {"DISCORD_BOT_TOKEN": token(fake), "DISCORD_API_BASE_URL": fake.url}


PLATFORMS = [
    pytest.param("telegram", telegram_api, lambda fake: fake.token, "123:wrong-token", "@", id="telegram"),
    pytest.param("slack", slack_api, lambda fake: BOT_TOKEN, "xoxb-wrong", "@hermes", id="slack"),
    pytest.param("discord", discord_api, lambda fake: fake.token, "wrong-token", "@hermes", id="discord"),
]
VARIABLE = {"telegram": "TELEGRAM_BOT_TOKEN", "slack": "SLACK_BOT_TOKEN", "discord": "DISCORD_BOT_TOKEN"}


@pytest.mark.parametrize(("name", "api", "right", "wrong", "who"), PLATFORMS)
async def test_a_token_the_platform_accepts_names_the_account(name, api, right, wrong, who):
    platform = load(name)
    async with api(right) as env:
        said = await platform.verify(platform.parse_options({}), env)
    assert said.refused is None and said.unreached is None
    assert said.who.startswith(who)


@pytest.mark.parametrize(("name", "api", "right", "wrong", "who"), PLATFORMS)
async def test_a_token_the_platform_refuses_is_one_sentence_naming_its_variable(name, api, right, wrong, who):
    platform = load(name)
    async with api(lambda fake: wrong) as env:
        said = await platform.verify(platform.parse_options({}), env)
    assert said.refused is not None and said.unreached is None
    assert said.refused.startswith(f"{name}: ") and f"refused {VARIABLE[name]}" in said.refused
    assert wrong not in said.refused and said.refused.count(". ") == 0


@pytest.mark.parametrize(("name", "api", "right", "wrong", "who"), PLATFORMS)
async def test_an_api_that_cannot_be_reached_leaves_the_token_untested(name, api, right, wrong, who):
    platform = load(name)
    async with api(right) as env:
        pass  # the fake has stopped: its address now refuses connections
    said = await platform.verify(platform.parse_options({}), env)
    assert said.refused is None
    assert said.unreached is not None and "untested" in said.unreached and VARIABLE[name] in said.unreached
