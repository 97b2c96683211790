"""The Skills and Learning pages in a real browser (Debian's headless Chromium through Selenium) against a
gateway started as a real process with the fake Telegram and the fake model. The admin signs in with the
link `/dashboard` sent in the DM, opens Skills, a skill with a patch shown as a diff, approves a skill the
approval gate held, and opens Learning.

Screenshots are saved beside the test's files; with UPDATE_SCREENSHOTS=1 they are also copied into
`docs/dashboard-{skills,skill,learning}.png` (what the README shows).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dashboard_browser_kit import (
    ALICE,
    BROWSER_MARKS,
    admin_gateway,
    dashboard_browser,
    overflow_at_375,
    publish_screenshots,
    sign_in,
    sign_in_link,
)
from fakes.fake_telegram import FakeTelegram, FakeUser

from hermes_engine.skills.approvals import GatedLibrary
from hermes_engine.skills.contract import SkillChange
from hermes_engine.skills.curator import Curator
from hermes_engine.skills.files import FileSkillLibrary
from hermes_engine.skills.library import library_root
from hermes_engine.skills.usage import UsageLog

pytestmark = BROWSER_MARKS

BOT = "telegram-dm-assistant"
NOW = datetime.now(UTC).replace(microsecond=0)


def skill_md(name: str, description: str, steps: str) -> str:
    return (f"---\nname: {name}\ndescription: {description}\n---\n## When to use\n{description}.\n\n"
            f"## Steps\n{steps}\n\n## Pitfalls\n- Check the disk first.\n")


async def library_in_use(home: Path) -> str:
    """The bot's library as weeks of use leave it, written through the engine's own library, usage log,
    curator and approval gate; the held change's id."""
    root = library_root(home, BOT)
    library = FileSkillLibrary(root)
    await library.apply(SkillChange("create", "rotate-logs", skill_md(
        "rotate-logs", "Rotate and compress the service logs", "1. Run `logrotate -f`."), category="ops"))
    await library.apply(SkillChange("patch", "rotate-logs", old_string="1. Run `logrotate -f`.",
                                    new_string="1. Run `logrotate -f /etc/logrotate.conf`.\n2. Check `df -h`."))
    await library.apply(SkillChange("create", "renew-certs", skill_md(
        "renew-certs", "Renew the TLS certificates", "1. Run `certbot renew`."), category="ops"))
    await library.apply(SkillChange("create", "weekly-report", skill_md(
        "weekly-report", "Write the weekly status report", "1. Collect the closed cards."), category="writing"))
    usage = UsageLog.for_library(root)
    usage.set_baseline(["rotate-logs", "renew-certs"], 14)
    usage.set_baseline(["weekly-report"], 9)
    for days_ago in range(20, -1, -1):
        at = NOW - timedelta(days=days_ago)
        usage.record_turn({"rotate-logs": 1}, calls=max(3, 12 - (20 - days_ago) // 2), tokens=9000 - 300 * (20 - days_ago), at=at)
        if days_ago % 3 == 0:
            usage.record_turn({"weekly-report": 1}, calls=max(2, 8 - (20 - days_ago) // 3), tokens=6000 - 150 * (20 - days_ago), at=at)
        if days_ago % 5 == 0:
            usage.record_turn({"renew-certs": 1}, calls=6, tokens=4000, at=at)
    await Curator(library, usage, llm_pass=False, bot=BOT).run(dry_run=True)
    held = await GatedLibrary(library).apply(SkillChange("create", "tidy-tmp", skill_md(
        "tidy-tmp", "Clear old files from /tmp", "1. Run `find /tmp -mtime +7 -delete`."), category="ops"),
        requested_by={"by": "Alice"})
    assert held.pending_id
    return held.pending_id


def walk_through(link: str, shots: Path, pending_id: str) -> dict[str, object]:
    """What the admin does in the browser (blocking: run on a thread); what the pages showed."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as shown
    from selenium.webdriver.support.ui import WebDriverWait

    seen: dict[str, object] = {}
    with dashboard_browser(shots) as driver:
        wait = WebDriverWait(driver, 15)
        sign_in(driver, link)

        driver.find_element(By.LINK_TEXT, "Skills").click()
        wait.until(shown.title_contains("Skills"))
        seen["skills"] = driver.find_element(By.TAG_NAME, "main").text
        driver.save_screenshot(str(shots / "dashboard-skills.png"))
        seen["skills_375_overflow"] = overflow_at_375(driver)

        driver.find_element(By.LINK_TEXT, "rotate-logs").click()
        wait.until(shown.presence_of_element_located((By.CSS_SELECTOR, "pre.diff")))
        seen["added"] = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "article.patch:first-of-type pre.diff .add")]
        seen["removed"] = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "article.patch:first-of-type pre.diff .remove")]
        seen["skill_text"] = driver.find_element(By.CSS_SELECTOR, "pre.skill-text").text
        driver.save_screenshot(str(shots / "dashboard-skill.png"))
        seen["skill_375_overflow"] = overflow_at_375(driver)

        driver.find_element(By.LINK_TEXT, "← Skills").click()
        wait.until(shown.title_contains("Skills"))
        approve = driver.find_element(By.CSS_SELECTOR, f"form[action$='/pending/{pending_id}/approve'] button")
        approve.send_keys("\n")  # by keyboard
        seen["approved"] = wait.until(shown.presence_of_element_located((By.ID, "said"))).text
        seen["after_approval"] = driver.find_element(By.TAG_NAME, "main").text

        driver.find_element(By.LINK_TEXT, "Learning").click()
        wait.until(shown.title_contains("Learning"))
        seen["learning"] = driver.find_element(By.TAG_NAME, "main").text
        seen["charts"] = len(driver.find_elements(By.CSS_SELECTOR, "figure.chart svg polyline"))
        driver.save_screenshot(str(shots / "dashboard-learning.png"))
        seen["learning_375_overflow"] = overflow_at_375(driver)
    return seen


async def test_an_admin_reads_the_skills_approves_a_held_one_and_sees_the_learning(fake_llm, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    pending_id = await library_in_use(home)
    async with FakeTelegram() as telegram, admin_gateway(fake_llm, tmp_path, home, telegram, allowed=f"{ALICE}"):
        link = await sign_in_link(telegram, FakeUser(ALICE, "Alice"))
        seen = await asyncio.to_thread(walk_through, link, tmp_path, pending_id)

    skills = str(seen["skills"])
    assert "rotate-logs" in skills and "weekly-report" in skills and "create tidy-tmp" in skills
    assert "Curator reports" in skills and "dry run" in skills
    assert seen["skills_375_overflow"] == seen["skill_375_overflow"] == seen["learning_375_overflow"] == 0
    assert seen["removed"] == ["-1. Run `logrotate -f`."]
    assert seen["added"] == ["+1. Run `logrotate -f /etc/logrotate.conf`.", "+2. Check `df -h`."]
    assert "2. Check `df -h`." in str(seen["skill_text"])
    assert seen["approved"] == f"Approved {pending_id}."
    assert "Nothing waits for an admin." in str(seen["after_approval"])
    approved = await FileSkillLibrary(library_root(home, BOT)).get("tidy-tmp")
    assert approved is not None  # in the library the bot reads, through the engine's approval
    learning = str(seen["learning"])
    assert "ops" in learning and "writing" in learning and "used " in learning and "this week" in learning
    assert seen["charts"] == 4  # calls and tokens per task, for each of the two families
    publish_screenshots(tmp_path / f"dashboard-{name}.png" for name in ("skills", "skill", "learning"))
