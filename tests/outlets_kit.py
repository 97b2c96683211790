"""A gateway served as `hermes_gateway.serve` serves it for features that send files (`send_file`, voice
replies): the engine harness's gateway, with the platform's real adapter attached and added to the
`FileOutlets` those features were given, started and stopped in `serve`'s order."""

from __future__ import annotations

import os
from typing import Any

from engine_harness import Engine

from adapters.base import PlatformAdapter
from adapters.platform import Platform
from hermes_engine.workspace.sending import FileOutlets
from hermes_gateway.wiring import build_gateway
from storage.store import SqlStore


class Served:
    def __init__(self, e: Engine, platform: Platform, options: dict[str, Any], outlets: FileOutlets) -> None:
        self.e, self.platform, self.options, self.outlets = e, platform, options, outlets
        self.adapter: PlatformAdapter | None = None

    async def start(self) -> PlatformAdapter:
        e = self.e
        e.store = SqlStore(e.settings.db_url)
        await e.store.init()
        e.gateway = build_gateway(e.settings, e.profile, e.store, features=e.features)
        self.adapter = self.platform.build(e.gateway, e.settings, self.platform.parse_options(self.options), None,
                                           os.environ)
        self.outlets.add(self.adapter)
        e.gateway.attach(self.adapter)
        await self.adapter.start()
        await e.gateway.start()
        return self.adapter

    async def stop(self) -> None:
        assert self.adapter is not None
        await self.adapter.stop_receiving()
        await self.e.stop()
        await self.adapter.stop()


class TelegramBot:
    """`Served` with the real Telegram adapter, started once it has polled the fake Bot API (`ready`); the test
    files' bots build the engine and hand it here."""

    def __init__(self, e: Engine, options: dict[str, Any], outlets: FileOutlets) -> None:
        from adapters.telegram import PLATFORM

        self.e, self.outlets = e, outlets
        self.served = Served(e, PLATFORM, options, outlets)
        self.adapter: Any = None

    async def start(self) -> TelegramBot:
        import asyncio

        from adapters.telegram.adapter import TelegramAdapter

        adapter = await self.served.start()
        assert isinstance(adapter, TelegramAdapter)
        self.adapter = adapter
        await asyncio.wait_for(adapter.ready.wait(), 5)
        return self

    async def stop(self) -> None:
        await self.served.stop()
