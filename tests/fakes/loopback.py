"""The lifecycle every fake remote shares: an aiohttp app served on 127.0.0.1 at a free port."""

from __future__ import annotations

import socket
import ssl
from typing import Any

from aiohttp import web


class LoopbackServer:
    """Subclasses build their routes in `build_app` and release their own resources in `before_stop`."""

    port: int = 0
    ssl_context: ssl.SSLContext | None = None  # set: served over HTTPS
    _runner: web.AppRunner | None = None

    def build_app(self) -> web.Application:
        raise NotImplementedError

    async def after_start(self) -> None:
        return None

    async def before_stop(self) -> None:
        return None

    async def start(self) -> Any:
        self._runner = web.AppRunner(self.build_app(), access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock, ssl_context=self.ssl_context).start()
        await self.after_start()
        return self

    async def stop(self) -> None:
        await self.before_stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Any:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"
