"""The dashboard's Skills and Learning pages on the real aiohttp server and a real SqlStore, with each bot's
real `SkillsFeature`: its library in folders (beside SQLite) or in the database (SQLite, and PostgreSQL with
`-m postgres`), its usage log, approval queue, kept history and curator reports."""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from gateway_kit import database_url, free_port
from home_kit import service_home
from postgres import STATE_BACKENDS
from test_dashboard import Site, admin_routes
from typer.testing import CliRunner

from hermes_engine.memory.book import MemoryBook
from hermes_engine.memory.store import FileMemoryStore
from hermes_engine.skills.contract import SkillChange
from hermes_engine.skills.database import DatabaseSkillLibrary
from hermes_engine.skills.feature import SkillsFeature
from hermes_engine.skills.library import bot_library_dir
from hermes_engine.skills.report import CuratorReport, save_report
from hermes_gateway.cli.skills import app as skills_cli
from hermes_gateway.dashboard import skill_reads
from hermes_gateway.dashboard.app import mount
from hermes_gateway.dashboard.config import Dashboard
from hermes_gateway.dashboard.guard import is_public
from hermes_gateway.dashboard.views import PlatformState, Sources
from hermes_gateway.dashboard.views_learning import families, learning_lines
from storage.store import SqlStore

BOT = "helper"
MARKUP = "<script>alert('x')</script>"
BIDI = "abc\u202egpj.exe"
NOW = datetime.now(UTC).replace(microsecond=0)


def skill_md(name: str, description: str, steps: str = "1. Run `logrotate -f`.") -> str:
    return (f"---\nname: {name}\ndescription: {description}\n---\n## When to use\nWhen logs grow.\n\n"
            f"## Steps\n{steps}\n\n## Pitfalls\n- None known.\n")


@dataclass
class SkillSite:
    site: Site
    feature: SkillsFeature

    @property
    def client(self) -> TestClient:
        return self.site.client


async def open_skill_site(tmp_path: Path, backend: str) -> AsyncIterator[SkillSite]:
    async with database_url("sqlite" if backend == "files" else backend.removeprefix("db-"), tmp_path) as db:
        store = SqlStore(db)
        await store.init()
        person = await store.resolve_account("telegram", "bot", "666", "Admin")
        home = await asyncio.to_thread(service_home, tmp_path / "home")
        if backend == "files":
            feature = SkillsFeature(home / "skills", bot=BOT, require_approval=True)
        else:
            def in_database(bot: str) -> DatabaseSkillLibrary:
                copy = bot_library_dir(tempfile.mkdtemp(prefix="hermes-skills-", dir=tmp_path), bot)
                return DatabaseSkillLibrary(copy, store, store, bot)

            feature = SkillsFeature(home / "skills", bot=BOT, require_approval=True, library_factory=in_database)
        memory = MemoryBook(FileMemoryStore.for_home(home))
        port = free_port()
        dashboard = Dashboard(f"http://127.0.0.1:{port}", 600, 3600)
        http = web.Application()
        mount(http, Sources(store, memory, [BOT], lambda: [PlatformState(BOT, "telegram", True)], skills={BOT: feature}),
              dashboard)
        client = TestClient(TestServer(http, host="127.0.0.1", port=port),
                            cookie_jar=aiohttp.CookieJar(unsafe=True))
        await client.start_server()
        try:
            yield SkillSite(Site(client, store, memory, dashboard, http, person.person_id), feature)
        finally:
            await client.close()
            await store.close()


@pytest.fixture(params=STATE_BACKENDS)
async def skills_site(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SkillSite]:
    async for opened in open_skill_site(tmp_path, request.param):
        yield opened


async def seeded(s: SkillSite) -> None:
    """Two skills the agent wrote, one patched since, with use on three days and a baseline."""
    library = s.feature.raw_library(BOT)
    await library.apply(SkillChange("create", "rotate-logs", skill_md("rotate-logs", "Rotate logs"),
                                    category="ops"))
    await library.apply(SkillChange("create", "renew-certs", skill_md("renew-certs", "Renew TLS certificates"),
                                    category="ops"))
    await library.apply(SkillChange("patch", "rotate-logs", old_string="1. Run `logrotate -f`.",
                                    new_string="1. Run `logrotate -f /etc/logrotate.conf`.\n2. Check disk space."))
    usage = s.feature.usage_for(BOT)
    usage.set_baseline(["rotate-logs"], 12)
    for days_ago, calls, tokens in ((9, 6, 3000), (3, 4, 2000), (0, 2, 1000), (0, 4, 1400)):
        usage.record_turn({"rotate-logs": 1}, calls=calls, tokens=tokens, at=NOW - timedelta(days=days_ago))
    usage.record_correction(["rotate-logs"], at=NOW)


async def held(s: SkillSite, name: str = "tidy-tmp", description: str = "Tidy /tmp") -> str:
    """A skill the agent asked for, held for an admin by the gate `skills.require_approval` puts in front."""
    result = await s.feature.library_for(BOT).apply(SkillChange("create", name, skill_md(name, description)))
    assert result.pending_id
    return result.pending_id


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, page
    return found.group(1)


async def test_the_library_shows_the_figures_skills_stats_prints(skills_site: SkillSite) -> None:
    await seeded(skills_site)
    await skills_site.site.sign_in()
    page = await (await skills_site.client.get("/admin/skills")).text()
    row = re.search(r'<tr>\s*<th scope="row" data-label="Skill"><a href="/admin/skills/helper/rotate-logs">'
                    r'rotate-logs</a>(.*?)</tr>', page, re.S)
    assert row, page
    cells = re.findall(r'<td data-label="([^"]+)">([^<]*)</td>', row.group(1))
    usage = skills_site.feature.usage_for(BOT).get("rotate-logs")
    assert dict(cells) == {"Category": "ops", "Uses": "4", "Successes": "3",
                           "Last used": usage.last_used_at.strftime("%Y-%m-%d %H:%M UTC") if usage.last_used_at else "",
                           "Calls saved per use": "8.0"}
    assert re.search(r'renew-certs</a>.*?data-label="Uses">0<.*?data-label="Calls saved per use">unknown<', page, re.S)
    assert page.index("rotate-logs</a>") < page.index("renew-certs</a>")  # most used first, as stats ranks them


async def test_the_figures_are_those_of_the_skills_stats_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async for s in open_skill_site(tmp_path, "files"):
        await seeded(s)
        monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
        printed = await asyncio.to_thread(CliRunner().invoke, skills_cli, ["stats", "--bot", BOT, "--json"])
        stats = json.loads(printed.output)[BOT]
        await s.site.sign_in()
        page = await (await s.client.get("/admin/skills")).text()
        shown = re.findall(r'<a href="/admin/skills/helper/([a-z-]+)">.*?data-label="Uses">(\d+)<.*?'
                           r'data-label="Successes">(\d+)<.*?data-label="Calls saved per use">([^<]+)<', page, re.S)
        assert shown == [(row["name"], str(row["uses"]), str(row["successes"]),
                          "unknown" if row["tool_calls_saved_per_use"] is None
                          else f"{row['tool_calls_saved_per_use']:.1f}") for row in stats]


async def test_a_skill_page_shows_its_text_and_each_write_as_a_diff(skills_site: SkillSite) -> None:
    await seeded(skills_site)
    await skills_site.site.sign_in()
    response = await skills_site.client.get("/admin/skills/helper/rotate-logs")
    assert response.status == 200
    page = await response.text()
    assert "2. Check disk space." in page.split('id="text"', 1)[1].split("</pre>", 1)[0]
    patch = page.split('id="history"', 1)[1]
    assert '<span class="remove">-1. Run `logrotate -f`.</span>' in patch
    assert '<span class="add">+1. Run `logrotate -f /etc/logrotate.conf`.</span>' in patch
    assert '<span class="add">+2. Check disk space.</span>' in patch
    assert patch.index("patch SKILL.md") < patch.index("create SKILL.md")  # newest first
    missing = await skills_site.client.get("/admin/skills/helper/no-such-skill")
    assert missing.status == 404


async def test_an_approved_skill_is_applied_by_the_engine_and_recorded(skills_site: SkillSite) -> None:
    pending_id = await held(skills_site)
    assert await skills_site.feature.raw_library(BOT).get("tidy-tmp") is None
    csrf = await skills_site.site.sign_in()
    listing = await (await skills_site.client.get("/admin/skills")).text()
    assert f"/admin/skills/helper/pending/{pending_id}/approve" in listing and "create tidy-tmp" in listing
    response = await skills_site.client.post(f"/admin/skills/helper/pending/{pending_id}/approve",
                                             data={"csrf": csrf}, headers={"Origin": skills_site.site.origin},
                                             allow_redirects=False)
    assert response.status == 303, await response.text()
    approved = await skills_site.feature.raw_library(BOT).get("tidy-tmp")
    assert approved is not None and approved.created_by == "agent"  # applied as its author, as /skills approve does
    assert skills_site.feature.pending_for(BOT).list() == []
    changes = await skills_site.site.store.dashboard_changes()
    assert (changes[0].action, changes[0].subject) == ("skills.approve", f"helper {pending_id}")
    assert "create tidy-tmp" in changes[0].detail
    after = await (await skills_site.client.get(response.headers["Location"])).text()
    assert f"Approved {pending_id}." in after and "Nothing waits for an admin." in after


async def test_a_rejected_skill_is_dropped_and_recorded(skills_site: SkillSite) -> None:
    pending_id = await held(skills_site)
    csrf = await skills_site.site.sign_in()
    response = await skills_site.client.post(f"/admin/skills/helper/pending/{pending_id}/reject",
                                             data={"csrf": csrf}, headers={"Origin": skills_site.site.origin},
                                             allow_redirects=False)
    assert response.status == 303
    assert await skills_site.feature.raw_library(BOT).get("tidy-tmp") is None
    assert skills_site.feature.pending_for(BOT).list() == []
    changes = await skills_site.site.store.dashboard_changes()
    assert (changes[0].action, changes[0].detail) == ("skills.reject", "create tidy-tmp: create tidy-tmp")


async def test_a_change_decided_already_is_refused_and_nothing_recorded(skills_site: SkillSite) -> None:
    pending_id = await held(skills_site)
    csrf = await skills_site.site.sign_in()
    skills_site.feature.reject(BOT, pending_id)  # decided meanwhile, e.g. by /skills reject in a chat
    response = await skills_site.client.post(f"/admin/skills/helper/pending/{pending_id}/approve",
                                             data={"csrf": csrf}, headers={"Origin": skills_site.site.origin})
    assert response.status == 409
    assert "No pending change" in await response.text()
    assert [c.action for c in await skills_site.site.store.dashboard_changes()] == ["sign-in"]
    assert await skills_site.feature.raw_library(BOT).get("tidy-tmp") is None


async def test_a_decision_without_the_csrf_token_changes_nothing(skills_site: SkillSite) -> None:
    pending_id = await held(skills_site)
    await skills_site.site.sign_in()
    response = await skills_site.client.post(f"/admin/skills/helper/pending/{pending_id}/approve",
                                             headers={"Origin": skills_site.site.origin})
    assert response.status == 403
    assert [p.id for p in skills_site.feature.pending_for(BOT).list()] == [pending_id]


async def test_markup_and_bidi_overrides_in_skills_are_shown_as_text(skills_site: SkillSite) -> None:
    """The scan refuses bidi overrides in a skill's text, so they reach the pages in what is around it: the
    name of the person whose chat asked for a held change, a curator report's error."""
    library = skills_site.feature.raw_library(BOT)
    await library.apply(SkillChange("create", "odd-name", skill_md("odd-name", f"Show {MARKUP}",
                                                                   steps=f"1. Print {MARKUP}")))
    await library.apply(SkillChange("patch", "odd-name", old_string="1. Print", new_string=f"1. Echo {MARKUP}"))
    await skills_site.feature.library_for(BOT).apply(
        SkillChange("create", "held-odd", skill_md("held-odd", f"Held {MARKUP}")),
        requested_by={"by": f"{MARKUP}{BIDI}"})
    save_report(library.root, CuratorReport(bot=BOT, started_at="2026-11-01T03:00:00+00:00", status="failed",
                                            error=f"{MARKUP}{BIDI}"), datetime(2026, 11, 1, 3, tzinfo=UTC))
    await skills_site.site.sign_in()
    for path, bidi in (("/admin/skills", True), ("/admin/skills/helper/odd-name", False)):
        page = await (await skills_site.client.get(path)).text()
        assert "<script>alert" not in page and "\u202e" not in page, path
        assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page, path
        assert ("abc&lt;U+202E&gt;gpj.exe" in page) is bidi, path
    diff = (await (await skills_site.client.get("/admin/skills/helper/odd-name")).text()).split('id="history"')[1]
    assert '<span class="add">+1. Echo &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;' in diff


async def test_learning_draws_calls_and_tokens_per_task_of_each_family(skills_site: SkillSite) -> None:
    await seeded(skills_site)
    await skills_site.site.sign_in()
    response = await skills_site.client.get("/admin/learning")
    assert response.status == 200
    page = await response.text()
    family = page.split('class="family"', 1)[1]
    assert re.match(r'>\s*<h2 id="fam-f[0-9a-f]{12}">ops ', family), family[:200]
    assert "rotate-logs, renew-certs" in family.split("</h2>", 1)[0]
    days = [(NOW - timedelta(days=n)).date().isoformat() for n in (9, 3, 0)]
    rows = re.findall(r"<tr><td>([\d-]+)</td><td>(\d+)</td>\s*<td>([^<]+)</td>\s*<td>([^<]+)</td></tr>", family)
    assert rows == [(days[0], "1", "6.0", "3,000"), (days[1], "1", "4.0", "2,000"), (days[2], "2", "3.0", "1,200")]
    assert "without the skills: 12.0 tool calls a task" in family
    charts = re.findall(r'<svg viewBox="0 0 640 240" role="img".*?</svg>', family, re.S)
    assert len(charts) == 2
    calls, tokens = charts
    assert len(re.findall(r"<circle ", calls)) == 3 and 'class="baseline"' in calls
    assert 'class="baseline"' not in tokens and "Tokens per task, ops" in tokens
    points = [tuple(map(float, p.split(","))) for p in re.search(r'points="([^"]+)"', calls).group(1).split()]
    assert [x for x, _ in points] == sorted(x for x, _ in points)
    assert points[0][1] < points[1][1] < points[2][1]  # fewer calls a task drawn lower, day by day
    assert "style=" not in page and "<script>" not in page.replace('<script src="/admin/static/dashboard.js" defer></script>', "")


def family_rows(page: str) -> list[tuple[str, ...]]:
    """The table rows of the page's first family."""
    family = page.split('class="family"')[1]
    return re.findall(r"<tr><td>([\d-]+)</td><td>(\d+)</td>\s*<td>([^<]+)</td>\s*<td>([^<]+)</td></tr>", family)


async def test_after_a_turn_learning_reads_again_only_the_day_and_the_family_it_changed(skills_site: SkillSite) -> None:
    await seeded(skills_site)
    await skills_site.feature.raw_library(BOT).apply(
        SkillChange("create", "warm-cache", skill_md("warm-cache", "Warm the cache"), category="web"))
    usage = skills_site.feature.usage_for(BOT)
    usage.record_turn({"warm-cache": 1}, calls=5, tokens=800, at=NOW - timedelta(days=3))
    sources = Sources(skills_site.site.store, skills_site.site.memory, [BOT], lambda: [], skills={BOT: skills_site.feature})
    before = await skill_reads.read(skills_site.feature, BOT)
    ops, web_family = await families(sources)
    days = dict(before.days)

    usage.record_turn({"rotate-logs": 1}, calls=6, tokens=600, at=NOW)
    after = await skill_reads.read(skills_site.feature, BOT)
    today, older = NOW.date().isoformat(), [d for d in days if d != NOW.date().isoformat()]
    assert len(older) == 2 and all(after.days[d] is days[d] for d in older)  # their files were not read again
    assert after.days[today] is not days[today] and after.days[today].uses["rotate-logs"].counted == 3
    ops_now, web_now = await families(sources)
    assert web_now is web_family and ops_now is not ops  # the family the turn left alone is not drawn again
    assert ops_now.days[-1][1].counted == 3 and ops_now.days[:-1] == ops.days[:-1]
    await skills_site.site.sign_in()
    page = await (await skills_site.client.get("/admin/learning")).text()
    assert family_rows(page)[-1] == (today, "3", "4.0", "1,000")


async def test_learning_shows_the_days_an_older_usage_file_keeps_inside_its_entries(skills_site: SkillSite) -> None:
    """A usage file written before days had their files of their own: its figures are shown as they are,
    and the next turn moves them to day files without losing one."""
    await seeded(skills_site)
    await skills_site.site.sign_in()
    shown = family_rows(await (await skills_site.client.get("/admin/learning")).text())
    usage = skills_site.feature.usage_for(BOT)
    data = json.loads(usage.path.read_text())
    for day, figures in usage.per_day():
        for name, use in figures.items():
            data["skills"][name].setdefault("days", {})[day] = asdict(use)
        usage.days.path(day).unlink()
    usage.path.write_text(json.dumps(data))
    assert usage.day_stamps() == {}
    assert family_rows(await (await skills_site.client.get("/admin/learning")).text()) == shown

    usage.record_turn({"renew-certs": 1}, calls=1, tokens=200, at=NOW)
    assert "days" not in usage.path.read_text() and len(usage.day_stamps()) == 3
    rows = family_rows(await (await skills_site.client.get("/admin/learning")).text())
    assert rows[:-1] == shown[:-1] and rows[-1] == (NOW.date().isoformat(), "3", "2.3", "867")


async def test_learning_lines_sum_up_this_week(skills_site: SkillSite) -> None:
    await seeded(skills_site)
    lines = await learning_lines(Sources(skills_site.site.store, skills_site.site.memory, [BOT], lambda: [],
                                         skills={BOT: skills_site.feature}))
    # this week: three tasks (the one nine days ago is not), 12 calls a task without the skill, 10 made
    assert lines == ["helper: skills: 2, used 3 times this week, ~26 tool calls saved"]
    await skills_site.site.sign_in()
    overview = await (await skills_site.client.get("/admin/")).text()
    assert "<li>helper: skills: 2, used 3 times this week, ~26 tool calls saved</li>" in overview


async def test_curator_reports_are_listed_newest_first(skills_site: SkillSite) -> None:
    await seeded(skills_site)
    root = skills_site.feature.raw_library(BOT).root
    for n, status in ((1, "ok"), (2, "failed")):
        save_report(root, CuratorReport(bot=BOT, started_at=f"2026-11-0{n}T03:00:00+00:00", status=status,
                                        skills=2, error=MARKUP if status == "failed" else None),
                    datetime(2026, 11, n, 3, tzinfo=UTC))
    await skills_site.site.sign_in()
    page = await (await skills_site.client.get("/admin/skills")).text()
    reports = re.findall(r"<summary>([^<]+)</summary>", page)
    assert reports[:2] == ["2026-11-02T03:00:00+00:00 · failed", "2026-11-01T03:00:00+00:00 · ok"]
    assert "Status: failed — &lt;script&gt;" in page


async def test_every_skills_route_refuses_a_visitor_without_a_session(skills_site: SkillSite) -> None:
    pending_id = await held(skills_site)
    mine = [(verb, path) for verb, path in admin_routes(skills_site.site.http)
            if path.startswith(("/admin/skills", "/admin/learning"))]
    assert sorted({verb for verb, _ in mine}) == ["GET", "HEAD", "POST"] and len(mine) == 8
    for verb, path in mine:
        assert not is_public(path)
        path = path.replace("{bot}", BOT).replace("{skill}", "tidy-tmp").replace("{pending}", pending_id)
        path = re.sub(r"\{bot:[^}]*\}", BOT, path)
        path = re.sub(r"\{skill:[^}]*\}", "tidy-tmp", path)
        path = re.sub(r"\{pending:[^}]*\}", pending_id, path)
        response = await skills_site.client.request(verb, path, allow_redirects=False,
                                                    headers={"Origin": skills_site.site.origin})
        assert "tidy-tmp" not in await response.text(), (verb, path)
        assert response.status == (401 if verb == "POST" else 303), (verb, path, response.status)
    assert [p.id for p in skills_site.feature.pending_for(BOT).list()] == [pending_id]
    assert await skills_site.site.store.dashboard_changes() == []


async def test_a_large_library_is_shown_fifty_skills_a_page(tmp_path: Path) -> None:
    async for s in open_skill_site(tmp_path, "files"):
        library = s.feature.raw_library(BOT)
        for n in range(53):
            await library.apply(SkillChange("create", f"skill-{n:02d}", skill_md(f"skill-{n:02d}", f"Skill {n}")))
        await s.site.sign_in()
        first = await (await s.client.get("/admin/skills")).text()
        second = await (await s.client.get("/admin/skills?bot=helper&page=2")).text()
        shown = [re.findall(r'<a href="/admin/skills/helper/(skill-\d+)">', page) for page in (first, second)]
        assert [len(names) for names in shown] == [50, 3] and not set(shown[0]) & set(shown[1])
        assert "53 skills" in first and "Page 1 of 2" in first and 'href="/admin/skills?bot=helper&amp;page=2"' in first
        assert shown[1] == re.findall(r'<a href="/admin/skills/helper/(skill-\d+)">',
                                      await (await s.client.get("/admin/skills?bot=helper&page=9")).text())
