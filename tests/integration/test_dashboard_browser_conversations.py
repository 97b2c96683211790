"""The Conversations and Goals pages in a real browser (Debian's headless Chromium, driven by Selenium) against
a gateway started as a real process with the fake Telegram and the fake model. Alice talks to the bot in a DM
(a question answered with a tool call) and sets a goal; she signs in with the link `/dashboard` sent her,
searches for the conversation and opens it, then pauses the goal on the Goals page, and the chat's
`/goal status` says it is paused.

Screenshots of each page are saved beside the test's files; with UPDATE_SCREENSHOTS=1 they are also copied
into `docs/dashboard-*.png`.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from dashboard_browser_kit import (
    ALICE,
    BROWSER_MARKS,
    START_TIMEOUT,
    admin_gateway,
    dashboard_browser,
    overflow_at_375,
    publish_screenshots,
    sign_in,
    sign_in_link,
)
from engine_harness import is_judge, verdict
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram, FakeUser

pytestmark = BROWSER_MARKS

QUESTION = "How many teapots are on the invoice? <script>alert(2)</script>"
ANSWER = "There are 12 teapots on the invoice."
SHOTS = ("dashboard-conversations.png", "dashboard-conversation.png", "dashboard-goals.png")


def walk_through(link: str, shots: Path) -> dict[str, object]:
    """What the admin does in the browser (blocking: run on a thread); what the pages showed."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as shown
    from selenium.webdriver.support.ui import WebDriverWait

    seen: dict[str, object] = {}
    with dashboard_browser(shots) as driver:
        wait = WebDriverWait(driver, 15)
        sign_in(driver, link)

        driver.find_element(By.LINK_TEXT, "Conversations").click()
        wait.until(shown.title_contains("Conversations"))
        seen["list"] = driver.find_element(By.TAG_NAME, "main").text
        driver.save_screenshot(str(shots / "dashboard-conversations.png"))
        seen["list_375_overflow"] = overflow_at_375(driver)

        search = driver.find_element(By.ID, "q")  # the box takes the words, Enter sends them
        search.send_keys("teapots", Keys.ENTER)
        wait.until(shown.presence_of_element_located((By.CSS_SELECTOR, ".hits mark")))
        seen["results"] = driver.find_element(By.TAG_NAME, "main").text
        seen["results_375_overflow"] = overflow_at_375(driver)
        driver.find_element(By.CSS_SELECTOR, ".hits a").click()
        wait.until(shown.presence_of_element_located((By.CSS_SELECTOR, "ol.messages")))
        seen["conversation"] = driver.find_element(By.TAG_NAME, "main").text
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(str(shots / "dashboard-conversation.png"))
        seen["conversation_375_overflow"] = overflow_at_375(driver)

        driver.find_element(By.LINK_TEXT, "Goals").click()
        wait.until(shown.title_contains("Goals"))
        seen["goals"] = driver.find_element(By.TAG_NAME, "main").text
        driver.save_screenshot(str(shots / "dashboard-goals.png"))
        seen["goals_375_overflow"] = overflow_at_375(driver)
        driver.find_element(By.CSS_SELECTOR, "form[action$='/pause'] button").click()
        wait.until(shown.alert_is_present()).accept()  # the page asks first
        seen["said"] = wait.until(shown.presence_of_element_located((By.ID, "said"))).text
        seen["after"] = driver.find_element(By.TAG_NAME, "main").text
        driver.find_element(By.LINK_TEXT, "Changes").click()
        wait.until(shown.title_contains("Changes"))
        seen["audit"] = driver.find_element(By.TAG_NAME, "main").text
    return seen


def scripted_model(release: asyncio.Event, judged: list[int]) -> Any:
    """Each turn calls `calculate` and then answers; the goal's judge says "continue" once, and holds its
    second verdict until `release`, so the goal is running while the admin looks at it."""

    async def respond(request: Any) -> Reply:
        if is_judge(request):
            judged.append(1)
            if len(judged) > 1:
                await release.wait()
            return Reply(text=verdict("continue", "the teapots are counted; the saucers are next"))
        if request.turn_tool_results:
            return Reply(text=ANSWER)
        return Reply(tool_calls=[("calculate", {"expression": "3 * 4"})])

    return respond


async def test_an_admin_finds_a_conversation_opens_it_and_pauses_its_goal(fake_llm, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    release, judged = asyncio.Event(), []
    fake_llm.responder = scripted_model(release, judged)
    try:
        async with FakeTelegram() as telegram, admin_gateway(fake_llm, tmp_path, home, telegram,
                                                             allowed=str(ALICE)):
            alice = FakeUser(ALICE, "Alice")
            telegram.user_says(ALICE, alice, QUESTION)
            await telegram.wait_for_text(ALICE, ANSWER, START_TIMEOUT)
            telegram.user_says(ALICE, alice, "/goal count the saucers too")
            await telegram.wait_for(lambda: len(judged) >= 2, START_TIMEOUT)  # its second turn is being judged
            link = await sign_in_link(telegram, alice)
            seen = await asyncio.to_thread(walk_through, link, tmp_path)
            release.set()
            telegram.user_says(ALICE, alice, "/goal status")
            status = await telegram.wait_for(
                lambda: next((m for m in telegram.chat(ALICE).bot_messages if m.text.startswith("Goal: ")), None),
                START_TIMEOUT)
    finally:
        release.set()

    assert re.search(r"#1 telegram:\S+:dm:4242\s+telegram-dm-assistant\s+Alice", str(seen["list"])), seen["list"]
    assert "teapots" in str(seen["results"])
    conversation = str(seen["conversation"])
    assert QUESTION in conversation  # shown as text, never run
    assert "Calls calculate" in conversation and '"expression": "3 * 4"' in conversation
    assert "Result of call" in conversation and ANSWER in conversation
    assert conversation.index(QUESTION) < conversation.index("Calls calculate") < conversation.index(ANSWER)
    goals = str(seen["goals"])
    assert "active" in goals and "count the saucers too" in goals and "Alice (telegram:4242)" in goals
    assert "of 20" in goals and "continue: the teapots are counted" in goals
    assert seen["said"] == "Goal paused." and "paused" in str(seen["after"])
    assert "goal.pause" in str(seen["audit"])
    assert "Status: paused" in status.text  # the engine's own /goal sees the admin's pause
    for page in ("list", "results", "conversation", "goals"):
        assert seen[f"{page}_375_overflow"] == 0, page  # no sideways scrolling on a phone
    publish_screenshots(tmp_path / name for name in SHOTS)
