"""The Bot API's transport on aiohttp: python-telegram-bot's own `Bot` over `AiohttpRequest` against real
loopback servers, so its errors, timeouts and uploads are the library's as with its httpx transport."""

from __future__ import annotations

import asyncio
import socket

import pytest
from aiohttp import web
from fakes.fake_telegram import FakeTelegram
from telegram import Bot, InputFile
from telegram.error import NetworkError, TimedOut

from adapters.telegram.request import AiohttpRequest


async def test_calls_and_uploads_reach_the_bot_api_as_the_library_sends_them() -> None:
    async with FakeTelegram() as telegram:
        bot = Bot(telegram.token, base_url=telegram.base_url, request=AiohttpRequest(4))
        await bot.initialize()
        try:
            await bot.send_message(chat_id=7, text="hello")
            await bot.send_document(chat_id=7, document=InputFile(b"a,b\n1,2\n", filename="table.csv", attach=False),
                                    caption="the table")
        finally:
            await bot.shutdown()
    sent = telegram.chat(7).bot_messages
    assert [m.text for m in sent] == ["hello", "the table"]
    assert sent[1].file is not None and (sent[1].file.name, sent[1].file.data) == ("table.csv", b"a,b\n1,2\n")


async def test_an_answer_slower_than_the_read_timeout_is_the_librarys_timed_out() -> None:
    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(2)
        return web.json_response({"ok": True, "result": True})

    app = web.Application()
    app.router.add_route("*", "/bot{token}/{method}", slow)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    request = AiohttpRequest(1, read_timeout=0.2)
    await request.initialize()
    try:
        with pytest.raises(TimedOut):
            await request.post(f"http://127.0.0.1:{port}/bot1:x/getMe")
    finally:
        await request.shutdown()
        await runner.cleanup()


async def test_a_server_that_is_not_there_is_a_network_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nobody listens there
    request = AiohttpRequest(1)
    await request.initialize()
    try:
        with pytest.raises(NetworkError) as raised:
            await request.post(f"http://127.0.0.1:{port}/bot1:x/getMe")
    finally:
        await request.shutdown()
    assert not isinstance(raised.value, TimedOut)


async def test_calls_go_through_the_proxy_the_environment_names_unless_no_proxy_names_the_host(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    async def proxy(request: web.Request) -> web.Response:  # a forward proxy gets the absolute URL
        seen.append(str(request.url))
        return web.json_response({"ok": True, "result": {"id": 1, "is_bot": True, "first_name": "B",
                                                         "username": "b_bot"}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    for name in ("http_proxy", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    request = AiohttpRequest(1)
    await request.initialize()
    try:
        await request.post("http://api.telegram.invalid/bot1:x/getMe")
        await request.post("http://api.telegram.invalid/bot1:x/getMe")  # the same host: the route found once
        with pytest.raises(NetworkError):  # 127.0.0.1 is in NO_PROXY: asked directly, where nobody listens
            await request.post("http://127.0.0.1:9/bot1:x/getMe")
    finally:
        await request.shutdown()
        await runner.cleanup()
    assert seen == ["http://api.telegram.invalid/bot1:x/getMe"] * 2
