"""The Kanban, Jobs and Approvals pages in a real browser (Debian's headless Chromium, driven by Selenium)
against a gateway started as a real process with the fake Telegram and the fake model: an admin signs in with
the link `/dashboard` sent in the DM, moves a card on the board, opens a blocked card's history, pauses and
resumes a job and reads the approvals; at 375 px wide no page scrolls sideways.

Screenshots of each page are saved beside the test's files; with UPDATE_SCREENSHOTS=1 they are also copied into
`docs/dashboard-*.png` (what the README shows).
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

from hermes_engine.ports.cards import CardSpec
from hermes_engine.ports.jobs import JobSpec
from storage.store import SqlStore

pytestmark = BROWSER_MARKS

BOT = "telegram-dm-assistant"
PROFILE = "research"  # cards of a profile this gateway's dispatcher does not run: the board stays as seeded


async def seed(home: Path) -> dict[str, int]:
    """The gateway's own database, made before it starts: cards in several columns (one blocked after a failed
    attempt, with its handoff), a weekly job and approval requests, one still waiting and one answered."""
    store = SqlStore(f"sqlite+aiosqlite:///{home / 'hermes.db'}")
    await store.init()
    try:
        alice = await store.resolve_account("telegram", BOT, str(ALICE), "Alice")
        specs = [CardSpec(title=t, body=b, profile=PROFILE, status=s) for t, b, s in (  # type: ignore[misc]
            ("Draft the release notes", "From the merged changes since 1.4", "todo"),
            ("Collect benchmark numbers", "p50 and p99 of every page", "triage"),
            ("Build the release", "Wheel and container image", "ready"),
            ("Announce the release", "", "done"))]
        cards = await store.create_cards(specs, actor="cli")
        [claimed] = await store.claim_cards(PROFILE, "worker-7", lease_seconds=60, max_running=5)
        assert claimed.claim
        await store.finish_attempt(claimed.id, claimed.claim, ok=False, result="the image build ran out of disk",
                                   handoff={"summary": "wheel built; the container image needs 4 GB more",
                                            "next": "free space on the runner, then retry"}, max_failures=1)
        job = await store.create_job(JobSpec(
            owner_id=alice.person_id, bot=BOT, target={"platform": "telegram", "account": BOT,
                                                        "chat_id": str(ALICE), "chat_kind": "dm"},
            session_key=f"telegram:{BOT}:dm:{ALICE}", name="plan the week", schedule="every monday 9am",
            timezone="Europe/Berlin", kind="task", text="Plan my week from the open cards",
            next_due=datetime(2030, 1, 7, 8, tzinfo=UTC), once=False))
        soon = datetime.now(UTC) + timedelta(hours=2)
        await store.record_approval("5f3a9c01d2e4", BOT, f"telegram:{BOT}:dm:{ALICE}", soon, asked_by=str(ALICE),
                                    command="rm -rf ~/builds/old", risk="dangerous")
        await store.record_approval("77b2e0aa4c19", BOT, f"telegram:{BOT}:dm:{ALICE}", soon, asked_by=str(ALICE),
                                    command="docker system prune -af", risk="dangerous")
        assert await store.answer_approval("77b2e0aa4c19", BOT, "once", str(ALICE))
        return {"todo": cards[0].id, "blocked": claimed.id, "job": job.id}
    finally:
        await store.close()


def walk_through(link: str, shots: Path, ids: dict[str, int]) -> dict[str, object]:
    """What the admin does in the browser (blocking: run on a thread); what the pages showed."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as shown
    from selenium.webdriver.support.ui import Select, WebDriverWait

    seen: dict[str, object] = {}
    with dashboard_browser(shots) as driver:
        wait = WebDriverWait(driver, 15)
        sign_in(driver, link)

        driver.find_element(By.LINK_TEXT, "Kanban").click()
        wait.until(shown.title_contains("Kanban"))
        seen["board"] = driver.find_element(By.TAG_NAME, "main").text
        seen["columns"] = [h.text.split()[0].lower() for h in driver.find_elements(By.CSS_SELECTOR, ".column h2")]
        driver.save_screenshot(str(shots / "dashboard-kanban.png"))
        seen["kanban_375_overflow"] = overflow_at_375(driver)

        driver.find_element(By.PARTIAL_LINK_TEXT, "Draft the release notes").click()
        wait.until(shown.presence_of_element_located((By.ID, "status")))
        Select(driver.find_element(By.ID, "status")).select_by_value("done")
        driver.find_element(By.ID, "reason").send_keys("written by hand", Keys.ENTER)  # by keyboard
        seen["moved"] = wait.until(shown.presence_of_element_located((By.ID, "said"))).text
        seen["moved_history"] = driver.find_element(By.CSS_SELECTOR, ".history").text

        driver.get(link.split("/admin/", 1)[0] + f"/admin/kanban/{ids['blocked']}")
        wait.until(shown.presence_of_element_located((By.CSS_SELECTOR, ".history details")))
        driver.find_element(By.CSS_SELECTOR, ".history details summary").click()
        seen["card"] = driver.find_element(By.TAG_NAME, "main").text
        driver.set_window_size(1200, 1300)  # the whole card, its handoff open
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(str(shots / "dashboard-card.png"))
        driver.set_window_size(1200, 900)
        seen["card_375_overflow"] = overflow_at_375(driver)

        driver.find_element(By.LINK_TEXT, "Jobs").click()
        wait.until(shown.title_contains("Jobs"))
        seen["jobs"] = driver.find_element(By.TAG_NAME, "main").text
        driver.find_element(By.CSS_SELECTOR, f"form[action='/admin/jobs/{ids['job']}/pause'] button").click()
        seen["paused"] = wait.until(shown.presence_of_element_located((By.ID, "said"))).text
        driver.find_element(By.CSS_SELECTOR, f"form[action='/admin/jobs/{ids['job']}/resume'] button").click()
        wait.until(shown.text_to_be_present_in_element((By.ID, "said"), "Resumed"))
        seen["resumed"] = driver.find_element(By.ID, "said").text
        driver.save_screenshot(str(shots / "dashboard-jobs.png"))
        seen["jobs_375_overflow"] = overflow_at_375(driver)

        driver.find_element(By.LINK_TEXT, "Approvals").click()
        wait.until(shown.title_contains("Approvals"))
        seen["approvals"] = driver.find_element(By.TAG_NAME, "main").text
        driver.save_screenshot(str(shots / "dashboard-approvals.png"))
        seen["approvals_375_overflow"] = overflow_at_375(driver)

        driver.find_element(By.LINK_TEXT, "Changes").click()
        wait.until(shown.title_contains("Changes"))
        seen["changes"] = driver.find_element(By.TAG_NAME, "main").text
    return seen


async def test_an_admin_moves_a_card_reads_its_history_pauses_and_resumes_a_job_and_reads_approvals(
        fake_llm, tmp_path):  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    home.mkdir()
    ids = await seed(home)
    async with FakeTelegram() as telegram, admin_gateway(fake_llm, tmp_path, home, telegram, allowed=str(ALICE)):
        link = await sign_in_link(telegram, FakeUser(ALICE, "Alice"))
        seen = await asyncio.to_thread(walk_through, link, tmp_path, ids)

    assert seen["columns"] == ["triage", "todo", "ready", "running", "blocked", "done"]
    assert "Build the release" in str(seen["board"]) and "the image build ran out of disk" in str(seen["board"])
    assert seen["moved"] == f"Card #{ids['todo']} is now done."
    assert f"telegram:{ALICE} moved todo→done: written by hand" in str(seen["moved_history"])
    assert "worker-7" in str(seen["card"]) and "the container image needs 4 GB more" in str(seen["card"])
    assert "Every monday 9am".lower() in str(seen["jobs"]).lower() and "Europe/Berlin" in str(seen["jobs"])
    assert seen["paused"] == f"Paused job #{ids['job']} 'plan the week'."
    assert str(seen["resumed"]).startswith(f"Resumed job #{ids['job']} 'plan the week'; next Mon ")
    assert "rm -rf ~/builds/old" in str(seen["approvals"]) and "5f3a9c01d2e4" in str(seen["approvals"])
    assert "docker system prune -af" in str(seen["approvals"]) and "approved once" in str(seen["approvals"])
    for page in ("kanban", "card", "jobs", "approvals"):
        assert seen[f"{page}_375_overflow"] == 0, page  # no sideways scrolling on a phone
    for action in ("kanban.move", "job.pause", "job.resume"):
        assert action in str(seen["changes"])
    publish_screenshots(tmp_path / f"dashboard-{name}.png" for name in ("kanban", "card", "jobs", "approvals"))
