"""Slack through the real slack-bolt app and slack-sdk client, against the fake Slack on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from fakes.fake_llm import Reply
from fakes.fake_slack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, FakeSlack

from engine_harness import make_profile


@pytest.fixture
async def fake_slack():
    async with FakeSlack() as fake:
        yield fake


class SlackBot:
    def __init__(self, engine, adapter, fake, runner):
        self.engine, self.adapter, self.fake, self.runner = engine, adapter, fake, runner

    @property
    def gateway(self):
        return self.engine.gateway

    async def settle(self, timeout: float = 15.0) -> None:
        """Until no Slack event is being processed, no turn runs and no goal judge is pending."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        quiet = 0
        while quiet < 3:
            busy = bool(self.adapter._tasks) or bool(self.gateway._background) or any(
                (s.worker and not s.worker.done()) or not s.queue.empty() for s in self.gateway.sessions.values())
            quiet = 0 if busy else quiet + 1
            if loop.time() > deadline:
                raise TimeoutError("the Slack bot did not settle")
            await asyncio.sleep(0.02)


@pytest.fixture
async def slack_bot(engine, fake_slack, monkeypatch):
    from adapters import slack as slack_adapter

    made: list[SlackBot] = []

    async def make(*, profile=None, features=None, options=None, socket_mode=False) -> SlackBot:
        monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
        monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)
        monkeypatch.setenv("SLACK_API_URL", fake_slack.api_url)
        # slack-sdk would send everything through this dead proxy if the adapter did not honour NO_PROXY.
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
        if socket_mode:
            monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
        e = await engine(profile=profile, features=features, platform="slack")
        http = web.Application()
        adapter = slack_adapter.build(e.gateway, e.settings, {"edit_interval_seconds": 0.02, **(options or {})},
                                      http)
        e.gateway.attach(adapter)
        runner = web.AppRunner(http, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        if not socket_mode:
            fake_slack.events_url = f"http://127.0.0.1:{port}/slack/events"
        await adapter.start()
        bot = SlackBot(e, adapter, fake_slack, runner)
        made.append(bot)
        return bot

    yield make
    for bot in made:
        await bot.adapter.stop()
        await bot.runner.cleanup()


async def test_smoke_mention(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    fake_llm.script(Reply(text="Hello **Alice**, here is the answer."))
    msg = await fake_slack.say("UALICE", "CGENERAL", f"<@{fake_slack.bot_user}> hi there")
    await bot.settle()
    for m in fake_slack.messages["CGENERAL"]:
        print(m)
    print([ (c.method, c.error) for c in fake_slack.calls])
    print(fake_llm.requests[0].last_user_text)
    assert 0
