"""Fetching one URL for the agent: vetted addresses, pinned connections, bounded in time and size.

Every hop (the URL, then each redirect) is checked the same way: http or https only, the host resolved
here and vetted by the `AddressPolicy`, and the connection made to exactly the vetted addresses (the
network backend below knows no other way to reach a host), so a DNS answer that changes between the check
and the connection (rebinding) cannot send the request elsewhere. TLS still verifies the certificate against
the host name (and trusts the system's certificate authorities, plus a `ca_bundle` when one is given).
Redirects are followed by hand, at most `max_redirects`. The whole fetch, redirects and
body included, has one time limit; the body is read up to `max_bytes` and the rest left unread.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpcore2

from hermes_engine.web.addresses import AddressPolicy, HostResolver, IPAddress, Refused, SystemResolver

REDIRECTS = (301, 302, 303, 307, 308)
USER_AGENT = "hermes-gateway/web_fetch"
ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,text/*;q=0.8"


@dataclass(frozen=True)
class FetchLimits:
    time_limit: float = 20.0  # seconds for the whole fetch, redirects and body included
    max_bytes: int = 2_000_000  # bytes of body read; the rest is never downloaded
    max_redirects: int = 5


@dataclass(frozen=True)
class Fetched:
    url: str  # after redirects
    status: int
    content_type: str  # media type, lower case, without parameters ("" when the server named none)
    charset: str | None
    body: bytes
    truncated: bool  # the body went on past `max_bytes`


class _PinnedBackend(httpcore2.AsyncNetworkBackend):
    """Connects a host name only to the addresses vetted for it in this fetch."""

    def __init__(self, pins: dict[str, list[IPAddress]]) -> None:
        self._inner = httpcore2.AnyIOBackend()
        self._pins = pins

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        addresses = self._pins.get(_pin_key(host))
        if not addresses:
            raise Refused(f"Error: refused: {host} was not vetted for this fetch.")
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(str(address), port, timeout, local_address, socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout, OSError) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        raise Refused("Error: refused: web_fetch does not open local sockets.")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _pin_key(host: str) -> str:
    return host.strip("[]").lower().rstrip(".")


def check_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL web_fetch may try; `Refused` with the reason otherwise."""
    if not isinstance(url, str) or not url.strip():
        raise Refused("Error: give a full URL such as https://example.com/page.")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise Refused(f"Error: {url!r} is not a valid URL ({exc}).") from None
    if parts.scheme not in ("http", "https"):
        raise Refused(f"Error: {url!r} is not an http or https URL; web_fetch reads only those.")
    if not parts.hostname:
        raise Refused(f"Error: {url!r} has no host; give a full URL such as https://example.com/page.")
    if parts.username or parts.password:
        raise Refused("Error: URLs with a user name or password are not fetched.")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def ascii_url(url: str) -> str:
    """`url` with an internationalised host name in its ASCII (IDNA) form, as it goes on the wire."""
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    if host.isascii():
        return url.strip()
    try:
        encoded = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise Refused(f"Error: {host!r} is not a valid host name in this URL.") from None
    return parts._replace(netloc=encoded + (f":{parts.port}" if parts.port else "")).geturl()


class Fetcher:
    """One configured way to fetch; `fetch` may run for many turns at once."""

    def __init__(self, policy: AddressPolicy | None = None, limits: FetchLimits | None = None,
                 resolver: HostResolver | None = None, ssl_context: ssl.SSLContext | None = None) -> None:
        self.policy = policy or AddressPolicy()
        self.limits = limits or FetchLimits()
        self.resolver = resolver or SystemResolver()
        self.ssl_context = ssl_context  # None: the system's authorities

    async def fetch(self, url: str) -> Fetched:
        """The response to `url` after redirects; `Refused` for what may not be fetched, `TimeoutError`
        past the time limit, `httpcore2` errors for network failures."""
        async with asyncio.timeout(self.limits.time_limit):
            pins: dict[str, list[IPAddress]] = {}
            async with httpcore2.AsyncConnectionPool(network_backend=_PinnedBackend(pins), retries=0,
                                                     max_connections=4, ssl_context=self.ssl_context) as pool:
                for _ in range(self.limits.max_redirects + 1):
                    scheme, host, port = check_url(url)
                    url = ascii_url(url)
                    host = urlsplit(url).hostname or host
                    pins[_pin_key(host)] = await self.policy.vet(_pin_key(host), port, self.resolver)
                    fetched, location = await self._one(pool, url)
                    if location is None:
                        return fetched
                    url = urljoin(url, location)
                raise Refused(f"Error: more than {self.limits.max_redirects} redirects; stopped at {url}.")

    async def _one(self, pool: httpcore2.AsyncConnectionPool, url: str) -> tuple[Fetched, str | None]:
        headers = [(b"User-Agent", USER_AGENT.encode()), (b"Accept", ACCEPT.encode()),
                   (b"Accept-Encoding", b"identity")]
        async with pool.stream("GET", url, headers=headers) as response:
            head = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in response.headers}
            location = head.get("location") if response.status in REDIRECTS else None
            media, charset = _content_type(head.get("content-type", ""))
            if location is not None:
                return Fetched(url, response.status, media, charset, b"", False), location
            body, truncated = await self._read(response)
            encoding = head.get("content-encoding", "identity").strip().lower()
            if encoding in ("gzip", "x-gzip", "deflate"):
                body, truncated = self._inflate(body, truncated)
            elif encoding not in ("", "identity"):
                raise Refused(f"Error: refused: {url} came {encoding}-encoded, which web_fetch does not read.")
            return Fetched(url, response.status, media, charset, body, truncated), None

    def _inflate(self, body: bytes, truncated: bool) -> tuple[bytes, bool]:
        """A compressed body (sent although identity was asked for), unpacked to at most `max_bytes`: a
        small body cannot unpack into gigabytes."""
        inflater = zlib.decompressobj(wbits=47)  # gzip or zlib header, told apart by the data
        try:
            data = inflater.decompress(body, self.limits.max_bytes)
        except zlib.error:
            raise Refused("Error: the page's compressed body is corrupt.") from None
        return data, truncated or bool(inflater.unconsumed_tail)

    async def _read(self, response: httpcore2.Response) -> tuple[bytes, bool]:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_stream():
            chunks.append(chunk)
            size += len(chunk)
            if size > self.limits.max_bytes:
                return b"".join(chunks)[: self.limits.max_bytes], True
        return b"".join(chunks), False


def trusting(ca_bundle: Path) -> ssl.SSLContext:
    """The system's certificate authorities and those in `ca_bundle` (PEM); `ValueError` naming the file
    when it cannot be read."""
    context = httpcore2.default_ssl_context()
    try:
        context.load_verify_locations(cafile=str(ca_bundle))
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"web.ca_bundle {str(ca_bundle)!r} is not a readable PEM file of certificates "
                         f"({exc})") from None
    return context


def _content_type(value: str) -> tuple[str, str | None]:
    media, _, params = value.partition(";")
    charset = None
    for param in params.split(";"):
        name, _, val = param.partition("=")
        if name.strip().lower() == "charset" and val.strip():
            charset = val.strip().strip('"\'')
    return media.strip().lower(), charset


__all__ = ["FetchLimits", "Fetched", "Fetcher", "ascii_url", "check_url", "trusting"]
