"""The dashboard in a real browser: Debian's headless Chromium, driven by Selenium, against the shipped Telegram
DM assistant started as a real process with the fake Telegram and the fake model. What every browser test of
the dashboard sets up: the admin bot, the gateway's environment, the sign-in link `/dashboard` sends, the
browser itself, the check that a page does not scroll sideways on a phone, and the screenshots the README
shows."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from engine_harness import fake_llm_environment
from fakes.fake_telegram import FakeTelegram, FakeUser
from gateway_kit import ROOT, free_port, gateway_process, wait_ready

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
BROWSER_MARKS = [
    pytest.mark.slow,  # a gateway process and a browser: over ten seconds
    pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
                       reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"),
]

ALICE = 4242  # the bot's admin
START_TIMEOUT = 90  # a hang guard for a cold start of the gateway process, not a speed target
SIGN_IN_LINK = re.compile(r"http://\S+/admin/login\?token=\S+")


def admin_bot(folder: Path) -> Path:
    """The shipped Telegram DM assistant with Alice as its admin, so that her `/dashboard` is answered with a
    link; edits flushed quickly, so that a test does not wait on the stream's pacing."""
    bot = folder / "bot"
    shutil.copytree(ROOT / "bots" / "telegram-dm-assistant", bot)
    profile = yaml.safe_load((bot / "profile.yaml").read_text())
    profile["access"]["admins"] = [str(ALICE)]
    profile["platforms"]["telegram"].update(edit_interval_seconds=0.05)
    (bot / "profile.yaml").write_text(yaml.safe_dump(profile))
    return bot


def gateway_environment(fake_llm: Any, home: Path, base: str, telegram: FakeTelegram,
                        allowed: str | None) -> dict[str, str]:
    """What an operator sets, pointed at the fakes: the public URL is the one the sign-in link names, so the
    browser follows it to this process; `allowed`, if given, is TELEGRAM_ALLOWED_USERS."""
    env = {**fake_llm_environment(fake_llm), "HERMES_HOME": str(home), "HERMES_MODEL": "openai:gpt-test",
           "HERMES_FALLBACK_MODELS": "", "HERMES_HTTP_PORT": base.rsplit(":", 1)[1], "HERMES_PUBLIC_URL": base,
           "TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_BASE_URL": telegram.base_url}
    if allowed is not None:
        env["TELEGRAM_ALLOWED_USERS"] = allowed
    return env


@asynccontextmanager
async def admin_gateway(fake_llm: Any, folder: Path, home: Path, telegram: FakeTelegram, *,
                        allowed: str | None = None, env: Mapping[str, str] | None = None) -> AsyncIterator[str]:
    """The admin bot as a real process on a port of its own, once its `/ready` answers; its base URL. `env`
    adds to (or overrides) the gateway's environment: a database, a sign-in provider."""
    base = f"http://127.0.0.1:{free_port()}"
    environment = {**gateway_environment(fake_llm, home, base, telegram, allowed), **(env or {})}
    async with gateway_process(admin_bot(folder), environment) as proc:
        await wait_ready(f"{base}/ready", proc, START_TIMEOUT)
        yield base


async def sign_in_link(telegram: FakeTelegram, user: FakeUser) -> str:
    """The one-time link the bot sends `user` for `/dashboard`: how an admin reaches the dashboard."""
    telegram.user_says(user.id, user, "/dashboard")
    message = await telegram.wait_for(
        lambda: next((m for m in telegram.chat(user.id).bot_messages if "/admin/login?token=" in m.text), None),
        START_TIMEOUT)
    link = SIGN_IN_LINK.search(message.text)
    assert link, message.text
    return link.group(0)


def browser() -> Any:
    """Headless Chromium at a desktop size, past any proxy the machine sets, so it reaches the loopback."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1200,900", "--no-proxy-server"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


@contextmanager
def dashboard_browser(shots: Path) -> Iterator[Any]:
    """A browser for one walk through the pages, always quit; a failure leaves the page it met in
    `shots/failed-page.html`, since an assertion on its text rarely tells why it was not as expected."""
    driver = browser()
    try:
        yield driver
    except Exception:
        (shots / "failed-page.html").write_text(driver.current_url + "\n" + driver.page_source)
        raise
    finally:
        driver.quit()


def sign_in(driver: Any, link: str) -> None:
    """Follow the sign-in link and press its button (the link alone signs no one in: a preview of it in a
    chat must not), until the Overview shows."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as shown
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(link)
    driver.find_element(By.CSS_SELECTOR, "form[action='/admin/login'] button").click()
    WebDriverWait(driver, 15).until(shown.presence_of_element_located((By.ID, "pending")))


def overflow_at_375(driver: Any, shot: Path | None = None) -> int:
    """How far the page scrolls sideways on a 375-px phone (0: not at all), the screenshot `shot` taken at
    that width if given; the window is desktop-sized again afterwards."""
    driver.set_window_size(375, 812)
    overflow = int(driver.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"))
    if shot is not None:
        driver.save_screenshot(str(shot))
    driver.set_window_size(1200, 900)
    return overflow


def publish_screenshots(shots: Iterable[Path]) -> None:
    """With UPDATE_SCREENSHOTS=1, the pages as the test saw them become the README's `docs/` images."""
    if os.environ.get("UPDATE_SCREENSHOTS"):
        for shot in shots:
            shutil.copy(shot, ROOT / "docs" / shot.name)
