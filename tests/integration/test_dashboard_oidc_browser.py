"""Single sign-on in a real browser: headless Chromium signs in through the fake OpenID provider to a gateway
started as a real process. The provider is on another site (`localhost`, the dashboard on `127.0.0.1`) and
asks the person first, so the callback is a navigation the provider's page starts, after which Chromium
withholds the `SameSite=Strict` session cookie from a redirect (a callback answering 303 to `/admin/` lands
on the sign-in page): the Overview must show the admin signed in all the same."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dashboard_browser_kit import BROWSER_MARKS, admin_gateway, browser
from fakes.fake_oidc import FakeOidc, new_key
from fakes.fake_telegram import FakeTelegram

pytestmark = BROWSER_MARKS


def sign_in_with_single_sign_on(base: str) -> dict[str, str]:
    """What the admin does in the browser (blocking: run on a thread); what the pages showed."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as shown
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser()
    try:
        driver.get(f"{base}/admin/login")
        driver.find_element(By.LINK_TEXT, "Sign in with single sign-on").click()
        WebDriverWait(driver, 15).until(shown.presence_of_element_located((By.ID, "allow"))).click()
        WebDriverWait(driver, 15).until(shown.presence_of_element_located((By.ID, "pending")))
        return {"url": driver.current_url, "who": driver.find_element(By.CSS_SELECTOR, ".who").text,
                "cookies": " ".join(f"{c['name']}:{c.get('sameSite')}" for c in driver.get_cookies())}
    finally:
        driver.quit()


async def test_an_admin_signs_in_through_the_provider_in_a_browser(fake_llm, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    async with FakeOidc(new_key(), host="localhost", consent=True) as provider, FakeTelegram() as telegram:
        oidc = {"HERMES_DASHBOARD_OIDC_ISSUER": provider.issuer, "HERMES_DASHBOARD_OIDC_CLIENT_ID": provider.client_id,
                "HERMES_DASHBOARD_OIDC_CLIENT_SECRET": provider.client_secret,
                "HERMES_DASHBOARD_OIDC_ADMINS": "ada@example.com"}
        async with admin_gateway(fake_llm, tmp_path, home, telegram, env=oidc) as base:
            seen = await asyncio.to_thread(sign_in_with_single_sign_on, base)
    assert seen["url"] == f"{base}/admin/"
    assert seen["who"] == "oidc:ada@example.com"
    assert "hermes_dashboard:Strict" in seen["cookies"]
    assert len(provider.token_requests) == 1
