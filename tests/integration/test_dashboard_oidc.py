"""Single sign-on to the dashboard through a fake OpenID Connect provider on loopback, with the real Authlib
client, joserfc's checks and a real SqlStore (SQLite, and PostgreSQL with `-m postgres`): an admin signs in
(the callback landing on another replica), and everything that proves nothing opens nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fakes.fake_oidc import FakeOidc, new_key
from gateway_kit import database_url
from joserfc.jwk import RSAKey
from postgres import BACKENDS
from test_dashboard import Site, open_site

from hermes_engine.config import AccessRules, BotProfile, Settings
from hermes_engine.errors import ConfigError
from hermes_gateway.dashboard.config import Dashboard, DashboardSettings, Oidc
from hermes_gateway.dashboard.oidc import binding
from hermes_gateway.dashboard.oidc.admins import admin_of
from hermes_gateway.dashboard.oidc.binding import COOKIE as BINDING
from hermes_gateway.dashboard.serving import slack_admins
from hermes_gateway.dashboard.tokens import COOKIE
from storage.store import SqlStore

ADMIN = "ada@example.com"


@pytest.fixture(scope="module")
def key() -> RSAKey:
    return new_key()


@pytest.fixture
async def provider(key: RSAKey) -> AsyncIterator[FakeOidc]:
    async with FakeOidc(key) as fake:
        yield fake


@pytest.fixture(params=BACKENDS)
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    async with database_url(request.param, tmp_path) as url:
        yield url


def sso(provider: FakeOidc, *admins: str) -> Oidc:
    return Oidc(provider.issuer, provider.client_id, provider.client_secret, frozenset(admins or (ADMIN,)))


@pytest.fixture
async def site(tmp_path: Path, provider: FakeOidc) -> AsyncIterator[Site]:
    async for opened in open_site(tmp_path, oidc=sso(provider)):
        yield opened


@dataclass
class Return:
    """Where the provider sent the browser back (a path and query on the dashboard) and the browser's cookie
    binding the sign-on to it."""

    callback: str
    binding: str


async def to_provider_and_back(site: Site, provider: FakeOidc) -> Return:
    start = await site.client.get("/admin/oidc/start", allow_redirects=False)
    assert start.status == 303, await start.text()
    location = start.headers["Location"]
    assert location.startswith(f"{provider.url}/authorize?")
    cookie = start.cookies[BINDING]
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    async with aiohttp.ClientSession() as browser:
        back = await browser.get(location, allow_redirects=False)
    assert back.status == 302, await back.text()
    return Return(back.headers["Location"].removeprefix(site.dashboard.public_url), cookie.value)


async def assert_refused_with_nothing_opened(site: Site, response: aiohttp.ClientResponse, says: str) -> str:
    body = await response.text()
    assert response.status == 403, body
    assert says in body
    assert COOKIE not in response.cookies
    assert await site.store.dashboard_changes() == []
    assert (await site.client.get("/admin/", allow_redirects=False)).status == 303
    return body


async def test_an_admin_signs_in_and_the_callback_may_land_on_another_replica(
        tmp_path: Path, db: str, provider: FakeOidc) -> None:
    async for one in open_site(tmp_path / "one", db=db, oidc=sso(provider)):
        # Behind one address (a load balancer's), as replicas are: the provider knows one redirect URI.
        async for other in open_site(tmp_path / "two", one.dashboard.public_url, db=db, oidc=sso(provider)):
            balanced = {"Host": one.dashboard.host}
            back = await to_provider_and_back(one, provider)
            other.client.session.cookie_jar.update_cookies({BINDING: back.binding})
            landed = await other.client.get(back.callback, allow_redirects=False, headers=balanced)
            page = await landed.text()
            assert landed.status == 200, page
            # A page of the dashboard's own moves on: a same-site step, after which the Strict cookie is sent.
            assert '<meta http-equiv="refresh" content="0;url=/admin/">' in page
            session = landed.cookies[COOKIE]
            assert session["samesite"] == "Strict" and session["httponly"]
            overview = await other.client.get("/admin/", allow_redirects=False, headers=balanced)
            assert overview.status == 200 and f"oidc:{ADMIN}" in await overview.text()
            one.client.session.cookie_jar.update_cookies({COOKIE: session.value})
            assert (await one.client.get("/admin/people", allow_redirects=False)).status == 200
            [entry] = await one.store.dashboard_changes()
            assert (entry.admin, entry.action, entry.subject, entry.detail) == (
                f"oidc:{ADMIN}", "sign-in", "dashboard (single sign-on)", provider.issuer)
    [asked] = provider.authorize_requests
    assert asked["code_challenge_method"] == "S256" and asked["nonce"] and asked["state"]
    [token_request] = provider.token_requests
    assert token_request["code_verifier"] and "client_secret" not in token_request  # sent as Basic


async def test_the_sign_in_page_offers_single_sign_on_only_when_configured(site: Site, tmp_path: Path) -> None:
    assert "Sign in with single sign-on" in await (await site.client.get("/admin/login")).text()
    async for plain in open_site(tmp_path / "plain"):
        assert "single sign-on" not in await (await plain.client.get("/admin/login")).text()
        started = await plain.client.get("/admin/oidc/start", allow_redirects=False)
        assert (started.status, started.headers["Location"]) == (303, "/admin/login")


async def test_an_address_not_among_the_admins_is_refused_and_shown_as_text(site: Site, provider: FakeOidc) -> None:
    provider.identity = {"sub": "u-2", "email": "<script>x</script>@evil.example", "email_verified": True}
    back = await to_provider_and_back(site, provider)
    body = await assert_refused_with_nothing_opened(site, await site.client.get(back.callback), "is not an admin")
    assert "<script>x" not in body and "&lt;script&gt;x" in body


async def test_an_admins_address_the_provider_has_not_verified_is_refused(site: Site, provider: FakeOidc) -> None:
    provider.identity = {"sub": "u-3", "email": ADMIN, "email_verified": False}
    back = await to_provider_and_back(site, provider)
    await assert_refused_with_nothing_opened(site, await site.client.get(back.callback), "not an admin")


@pytest.mark.parametrize("tamper", [
    pytest.param({"nonce": "another-browsers-nonce"}, id="wrong-nonce"),
    pytest.param({"aud": "another-client"}, id="wrong-audience"),
    pytest.param({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, id="expired"),
    pytest.param({"iss": "https://evil.example"}, id="wrong-issuer"),
])
async def test_an_id_token_with_a_claim_that_does_not_hold_opens_nothing(
        site: Site, provider: FakeOidc, tamper: dict[str, Any]) -> None:
    provider.tamper = tamper
    back = await to_provider_and_back(site, provider)
    await assert_refused_with_nothing_opened(site, await site.client.get(back.callback), "could not be verified")


@pytest.mark.parametrize("forgery", ["another-key", "unsigned"])
async def test_a_forged_or_unsigned_id_token_opens_nothing(site: Site, provider: FakeOidc, forgery: str) -> None:
    if forgery == "unsigned":
        provider.unsigned = True
    else:
        provider.sign_with = new_key()
    back = await to_provider_and_back(site, provider)
    await assert_refused_with_nothing_opened(site, await site.client.get(back.callback), "could not be verified")


async def test_a_state_is_used_once(site: Site, provider: FakeOidc) -> None:
    back = await to_provider_and_back(site, provider)
    assert (await site.client.get(back.callback)).status == 200
    site.client.session.cookie_jar.update_cookies({BINDING: back.binding})
    again = await site.client.get(back.callback, allow_redirects=False)
    assert again.status == 403 and "expired or was already used" in await again.text()
    assert COOKIE not in again.cookies
    assert len(await site.store.dashboard_changes()) == 1


async def test_an_unknown_state_opens_nothing(site: Site, provider: FakeOidc) -> None:
    back = await to_provider_and_back(site, provider)
    forged = back.callback.replace("state=", "state=0")
    await assert_refused_with_nothing_opened(site, await site.client.get(forged), "expired or was already used")


async def test_a_callback_opened_in_another_browser_opens_nothing(site: Site, provider: FakeOidc) -> None:
    """A login CSRF: an attacker's own callback URL handed to a victim, whose browser never started it."""
    back = await to_provider_and_back(site, provider)
    site.client.session.cookie_jar.clear()
    await assert_refused_with_nothing_opened(site, await site.client.get(back.callback), "expired or was already used")


async def test_a_provider_that_cannot_be_reached_is_said_so(tmp_path: Path, provider: FakeOidc) -> None:
    oidc = sso(provider)
    await provider.stop()
    async for site in open_site(tmp_path, oidc=oidc):
        started = await site.client.get("/admin/oidc/start", allow_redirects=False)
        assert started.status == 502 and "could not be reached" in await started.text()


async def test_sign_ons_under_way_are_bounded_and_an_expired_one_frees_its_place(tmp_path: Path, db: str) -> None:
    store = SqlStore(db)
    await store.init()
    try:
        now = datetime.now(UTC)
        soon, gone = now + timedelta(minutes=10), now + timedelta(seconds=1)
        assert await store.put_dashboard_oidc_state("s1", "b1", soon, at_most=2)
        assert await store.put_dashboard_oidc_state("s2", "b2", gone, at_most=2)
        assert not await store.put_dashboard_oidc_state("s3", "b3", soon, at_most=2)
        assert await store.take_dashboard_oidc_state("s3") is None  # refused means not kept
        assert await store.take_dashboard_oidc_state("s1") == "b1"  # a finished sign-on frees its place
        assert await store.put_dashboard_oidc_state("s4", "b4", soon, at_most=2)
        assert not await store.put_dashboard_oidc_state("s5", "b5", soon, at_most=2)
        await asyncio.sleep(1.1)  # s2 expires
        assert await store.put_dashboard_oidc_state("s5", "b5", soon, at_most=2)
    finally:
        await store.close()


async def test_a_stranger_starting_sign_ons_in_a_loop_is_refused_past_the_bound(
        site: Site, provider: FakeOidc, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "STATES_AT_MOST", 2)
    for _ in range(2):
        assert (await site.client.get("/admin/oidc/start", allow_redirects=False)).status == 303
    refused = await site.client.get("/admin/oidc/start", allow_redirects=False)
    assert refused.status == 503 and refused.headers["Retry-After"] == "60"
    assert "Too many sign-ins are under way" in await refused.text()
    assert binding.COOKIE not in refused.cookies or not refused.cookies[binding.COOKIE].value


def test_slack_admins_sign_in_with_slack_by_their_user_id() -> None:
    slack = Oidc("https://slack.com", "1.2", "secret", frozenset())
    claims = {"sub": "U1", "https://slack.com/user_id": "U0ADMIN", "email": "x@example.com", "email_verified": True}
    assert admin_of(claims, slack, {"U0ADMIN"}) == "slack:U0ADMIN"
    assert admin_of(claims, slack, {"U0OTHER"}) is None
    elsewhere = Oidc("https://idp.example.com", "c", "s", frozenset({"x@example.com"}))
    assert admin_of(claims, elsewhere, {"U0ADMIN"}) == "oidc:x@example.com"  # the claim counts from Slack only


def test_the_slack_admins_are_those_of_the_profiles_serving_slack() -> None:
    profiles = [BotProfile(name="helper", platforms={"slack": {}}, access=AccessRules(admins=["U0ADMIN"])),
                BotProfile(name="dm", platforms={"telegram": {}}, access=AccessRules(admins=["4242"]))]
    assert slack_admins(profiles) == {"U0ADMIN"}


def test_single_sign_on_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_DASHBOARD_OIDC_ISSUER", "https://idp.example.com/")
    monkeypatch.setenv("HERMES_DASHBOARD_OIDC_CLIENT_ID", "hermes")
    monkeypatch.setenv("HERMES_DASHBOARD_OIDC_CLIENT_SECRET", "s3")
    monkeypatch.setenv("HERMES_DASHBOARD_OIDC_ADMINS", " Ada@Example.com, bob@example.com ,")
    dashboard = Dashboard.from_settings(Settings(), DashboardSettings())
    assert dashboard.oidc == Oidc("https://idp.example.com", "hermes", "s3",
                                  frozenset({"ada@example.com", "bob@example.com"}))
    monkeypatch.delenv("HERMES_DASHBOARD_OIDC_CLIENT_SECRET")
    with pytest.raises(ConfigError, match="CLIENT_SECRET"):
        Dashboard.from_settings(Settings(), DashboardSettings())
    monkeypatch.setenv("HERMES_DASHBOARD_OIDC_ISSUER", "http://idp.example.com")
    with pytest.raises(ConfigError, match="https"):
        Dashboard.from_settings(Settings(), DashboardSettings())
    monkeypatch.delenv("HERMES_DASHBOARD_OIDC_ISSUER")
    assert Dashboard.from_settings(Settings(), DashboardSettings()).oidc is None
