"""`web_fetch` over HTTPS, through the real gateway and the fake LLM, against a site on 127.0.0.1 whose
certificate a certificate authority made in the test signed (`trustme`). The profile trusts that CA through
`web.ca_bundle`, as a deployment behind a corporate proxy would trust the proxy's; a certificate another CA
signed is refused with a clear error, and the connection pinned to the vetted address still checks that
the certificate names the host of the URL."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
import trustme
from aiohttp import web
from engine_harness import make_profile
from fakes.fake_llm import Reply
from fakes.loopback import LoopbackServer
from test_web_tools import NamedHosts

from hermes_engine.config import Settings, WebSettings
from hermes_engine.errors import ConfigError
from hermes_engine.web.feature import WebFeature
from hermes_gateway.wiring import build_features


class TlsSite(LoopbackServer):
    def __init__(self, ca: trustme.CA, *names: str) -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(*names).configure_cert(context)
        self.ssl_context = context
        self.hits = 0

    def build_app(self) -> web.Application:
        async def page(request: web.Request) -> web.Response:
            self.hits += 1
            return web.Response(text="<h1>Harbour tides</h1><p>High water at 06:12.</p>", content_type="text/html")

        app = web.Application()
        app.router.add_get("/page", page)
        return app


@pytest.fixture
def ca(tmp_path: Path) -> tuple[trustme.CA, Path]:
    authority = trustme.CA()
    bundle = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    return authority, bundle


async def fetch(engine: Any, fake_llm: Any, tmp_path: Path, url: str, **web_options: Any) -> str:
    profile = make_profile(toolsets=["core", "web"], web=WebSettings(allow=["127.0.0.1"], **web_options))
    settings = Settings(home=tmp_path)
    features = [f for f in build_features(settings, profile) if not isinstance(f, WebFeature)]
    hosts = NamedHosts({"tides.test": "127.0.0.1", "other.test": "127.0.0.1"})
    e = await engine(profile=profile,
                     features=[*features, WebFeature.from_settings(settings, profile.web, resolver=hosts)])
    fake_llm.script(Reply(tool_calls=[("web_fetch", {"url": url})]), Reply(text="read it"))
    assert await e.say("what does it say?") == "read it"
    return next(m["content"] for m in fake_llm.requests[1].messages if m["role"] == "tool")


async def test_a_site_whose_ca_the_profile_trusts_is_read_over_https(engine, fake_llm, tmp_path, ca):
    authority, bundle = ca
    async with TlsSite(authority, "tides.test") as site:
        result = await fetch(engine, fake_llm, tmp_path, f"https://tides.test:{site.port}/page", ca_bundle=bundle)
    assert "# Harbour tides" in result and "06:12" in result and site.hits == 1


async def test_a_certificate_another_ca_signed_is_refused(engine, fake_llm, tmp_path, ca):
    _, bundle = ca
    async with TlsSite(trustme.CA(), "tides.test") as site:
        result = await fetch(engine, fake_llm, tmp_path, f"https://tides.test:{site.port}/page", ca_bundle=bundle)
    assert result.startswith("Error: refused:") and "certificate that could not be verified" in result
    assert "unable to get local issuer certificate" in result and site.hits == 0


async def test_the_pinned_connection_still_checks_the_host_name(engine, fake_llm, tmp_path, ca):
    authority, bundle = ca
    async with TlsSite(authority, "tides.test") as site:  # trusted, but issued for another name
        result = await fetch(engine, fake_llm, tmp_path, f"https://other.test:{site.port}/page", ca_bundle=bundle)
    assert result.startswith("Error: refused:") and "Hostname mismatch" in result and site.hits == 0


def test_an_unreadable_ca_bundle_is_one_sentence_naming_it(tmp_path):
    web_settings = WebSettings(ca_bundle=tmp_path / "missing.pem")
    with pytest.raises(ConfigError, match="web.ca_bundle .*missing.pem.* is not a readable PEM file"):
        WebFeature.from_settings(Settings(home=tmp_path), web_settings)
