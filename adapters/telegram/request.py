"""python-telegram-bot's networking on aiohttp instead of httpx.

Every Bot API call of a busy bot (each update's getUpdates, each reply, each typing indicator) costs
CPU in the HTTP client, and httpx with its anyio layers costs several times what aiohttp does (C header
parser, one write per request) for the same call: under sustained load that client was the largest part
of the gateway's CPU per turn. The library's contract is one method, `do_request`, answering a status and
the body's bytes; timeouts become its `TimedOut` and transport failures its `NetworkError`, as with its
own `HTTPXRequest`. Proxies come from the environment (`HTTPS_PROXY`, `NO_PROXY`) like httpx's, read once
per host rather than by aiohttp's `trust_env` on every call (which looks them up, and reads `~/.netrc`, in a
worker thread each time: two thread hand-offs a call). The Bot API sets no cookies: none are kept.
"""

from __future__ import annotations

import contextlib
from typing import Any

import aiohttp
from aiohttp.helpers import basicauth_from_netrc, get_env_proxy_for_url, netrc_from_env
from telegram._utils.defaultvalue import DefaultValue
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData
from yarl import URL


class AiohttpRequest(BaseRequest):
    """One `aiohttp.ClientSession` with up to `connection_pool_size` connections; per-call timeouts as the
    library passes them (`DEFAULT_NONE`: the ones given here). `media_write_timeout` bounds a call that
    uploads a file, as in `HTTPXRequest`."""

    __slots__ = ("_connect", "_media_write", "_pool", "_pool_size", "_read", "_routes", "_session", "_write")

    def __init__(self, connection_pool_size: int = 1, *, read_timeout: float | None = 5.0,
                 write_timeout: float | None = 5.0, connect_timeout: float | None = 5.0,
                 pool_timeout: float | None = 1.0, media_write_timeout: float | None = 20.0) -> None:
        self._pool_size = connection_pool_size
        self._read, self._write, self._connect = read_timeout, write_timeout, connect_timeout
        self._pool, self._media_write = pool_timeout, media_write_timeout
        self._session: aiohttp.ClientSession | None = None
        self._routes: dict[tuple[str, str | None, int | None], dict[str, Any]] = {}

    @property
    def read_timeout(self) -> float | None:
        return self._read

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._pool_size, limit_per_host=self._pool_size)
            self._session = aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
                                                  headers={"User-Agent": self.USER_AGENT})
            self._routes.clear()  # the environment is read again after a restart

    async def shutdown(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def do_request(self, url: str, method: str, request_data: RequestData | None = None,
                         read_timeout: Any = BaseRequest.DEFAULT_NONE,
                         write_timeout: Any = BaseRequest.DEFAULT_NONE,
                         connect_timeout: Any = BaseRequest.DEFAULT_NONE,
                         pool_timeout: Any = BaseRequest.DEFAULT_NONE) -> tuple[int, bytes]:
        if self._session is None or self._session.closed:
            raise RuntimeError("This AiohttpRequest is not initialized!")
        files = request_data.multipart_data if request_data else None
        fields = request_data.json_parameters if request_data else None
        read = self._read if isinstance(read_timeout, DefaultValue) else read_timeout
        connect = self._connect if isinstance(connect_timeout, DefaultValue) else connect_timeout
        pool = self._pool if isinstance(pool_timeout, DefaultValue) else pool_timeout
        write = (self._media_write if files else self._write) if isinstance(write_timeout, DefaultValue) \
            else write_timeout
        # aiohttp has no separate write timeout: a call may take its write and read time in all.
        total = None if read is None or write is None else read + write + (connect or 0) + (pool or 0)
        waiting = None if pool is None or connect is None else pool + connect  # a pooled connection, or a new one
        timeout = aiohttp.ClientTimeout(total=total, connect=waiting, sock_connect=connect, sock_read=read)
        try:
            async with self._session.request(method, url, data=_body(fields, files), timeout=timeout,
                                             **self._route(url)) as response:
                return response.status, await response.read()
        except TimeoutError as exc:
            raise TimedOut from exc
        except aiohttp.ClientError as exc:
            raise NetworkError(f"aiohttp.{exc.__class__.__name__}: {exc}") from exc

    def _route(self, url: str) -> dict[str, Any]:
        """The proxy (and its credentials) the environment names for `url`'s host, and the host's own
        credentials in `~/.netrc`: what `trust_env` would find, found once per host."""
        target = URL(url)
        key = (target.scheme, target.host, target.port)
        route = self._routes.get(key)
        if route is None:
            route = {}
            with contextlib.suppress(LookupError):  # no proxy for this scheme, or NO_PROXY names the host
                route["proxy"], route["proxy_auth"] = get_env_proxy_for_url(target)
            if target.host is not None and target.user is None:
                with contextlib.suppress(LookupError):  # no ~/.netrc, or no entry for the host
                    route["auth"] = basicauth_from_netrc(netrc_from_env(), target.host)
            self._routes[key] = route
        return route


def _body(fields: dict[str, str] | None, files: dict[str, Any] | None) -> Any:
    """The call's parameters as a form: url-encoded, or multipart when it uploads files (each part a
    `(file name, content, MIME type)` as the library hands it over)."""
    if not files:
        return fields or None
    form = aiohttp.FormData()
    for name, value in (fields or {}).items():
        form.add_field(name, value)
    for name, part in files.items():
        filename, content, mime = part if len(part) == 3 else (*part, None)
        form.add_field(name, content, filename=filename, content_type=mime)
    return form
