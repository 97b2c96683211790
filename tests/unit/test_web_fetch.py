"""The fetcher on the wire: the vetted address pinned for the connection, compressed bodies unpacked within
the byte cap, host names sent in ASCII."""

from __future__ import annotations

import gzip
import ipaddress

import pytest
from aiohttp import web
from fakes.loopback import LoopbackServer

from hermes_engine.web.addresses import AddressPolicy, IPAddress, Refused
from hermes_engine.web.fetch import Fetcher, FetchLimits


class Site(LoopbackServer):
    """`/host` echoes the Host header; the other pages come compressed although identity was asked for."""

    def build_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/{name}", self._serve)
        return app

    async def _serve(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name == "host":
            return web.Response(text=f"host {request.host}")
        data = {"small": b"<p>tides</p>", "bomb": b"<p>" + b"a" * 50_000_000}.get(name, b"")
        encoding = "br" if name == "brotli" else "gzip"
        return web.Response(body=gzip.compress(data) if name != "brotli" else b"\x0b\x02\x80",
                            headers={"Content-Type": "text/html", "Content-Encoding": encoding})


class Answers:
    """A resolver whose answer changes after the first question: a rebinding name."""

    def __init__(self, *answers: str) -> None:
        self.answers = [ipaddress.ip_address(a) for a in answers]
        self.asked = 0

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        return [answer]


class Loopback:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        self.asked.append(host)
        return [ipaddress.ip_address("127.0.0.1")]


def fetcher(resolver: Loopback | None = None) -> Fetcher:
    return Fetcher(AddressPolicy.allowing(["127.0.0.1"]), FetchLimits(time_limit=10, max_bytes=100_000),
                   resolver or Loopback())


async def test_a_gzipped_page_is_unpacked():
    async with Site() as site:
        fetched = await fetcher().fetch(f"{site.url}/small")
    assert fetched.body == b"<p>tides</p>" and not fetched.truncated


async def test_a_compressed_body_unpacks_to_at_most_the_byte_cap():
    async with Site() as site:
        fetched = await fetcher().fetch(f"{site.url}/bomb")
    assert len(fetched.body) == 100_000 and fetched.truncated


async def test_an_encoding_it_cannot_read_is_refused_by_name():
    async with Site() as site:
        with pytest.raises(Refused, match="br-encoded"):
            await fetcher().fetch(f"{site.url}/brotli")


async def test_an_international_host_name_is_resolved_and_sent_in_ascii():
    resolver = Loopback()
    async with Site() as site:
        fetched = await fetcher(resolver).fetch(f"http://gezeiten-büro.test:{site.port}/small")
    assert resolver.asked == ["xn--gezeiten-bro-mlb.test"] and fetched.body == b"<p>tides</p>"


async def test_the_connection_goes_to_the_vetted_address_not_a_later_answer():
    async with Site() as page:
        resolver = Answers("127.0.0.1", "127.0.0.2")  # vetted first, then "rebound" to an address not allowed
        fetcher = Fetcher(AddressPolicy.allowing(["127.0.0.1/32"]), FetchLimits(time_limit=5), resolver)
        fetched = await fetcher.fetch(f"http://rebind.test:{page.port}/host")
    assert fetched.status == 200 and fetched.body == f"host rebind.test:{page.port}".encode()
    assert resolver.asked == 1
