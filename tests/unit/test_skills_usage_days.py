"""Per-day usage figures in one small file per UTC day beside the usage file: a turn rewrites only its own
day's file, days past the span are deleted, and a usage file of an older version (days inside its entries)
is read as it is and moved to day files by the next write, losing no figure."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hermes_engine.skills.contract import USAGE_DAYS_DIR
from hermes_engine.skills.usage import DAYS_KEPT, DayUse, UsageLog

AT = datetime(2026, 11, 30, 9, 15, tzinfo=UTC)


def test_a_turn_rewrites_only_its_own_days_file_and_the_usage_file_keeps_no_days(tmp_path: Path):
    log = UsageLog(tmp_path / ".usage.json")
    log.record_turn({"rotate-logs": 1, "renew-certs": 2}, calls=4, tokens=900, at=AT - timedelta(days=1))
    log.record_turn({"rotate-logs": 1}, calls=6, at=AT)
    before = log.day_stamps()
    assert sorted(before) == ["2026-11-29", "2026-11-30"]

    log.record_turn({"rotate-logs": 1}, calls=2, tokens=100, at=AT)
    after = log.day_stamps()
    assert after["2026-11-29"] == before["2026-11-29"] and after["2026-11-30"] != before["2026-11-30"]
    assert log.read_day("2026-11-30") == {"rotate-logs": DayUse(counted=2, calls=8, tokened=1, tokens=100)}
    assert json.loads((tmp_path / USAGE_DAYS_DIR / "2026-11-29.json").read_text()) == {
        "renew-certs": {"counted": 1, "calls": 4, "tokened": 1, "tokens": 900},
        "rotate-logs": {"counted": 1, "calls": 4, "tokened": 1, "tokens": 900}}
    assert all("days" not in entry for entry in json.loads(log.path.read_text())["skills"].values())
    assert log.per_day("renew-certs") == [("2026-11-29", {"renew-certs": DayUse(1, 4, 1, 900)})]


def test_a_turn_without_a_tool_call_count_writes_no_day(tmp_path: Path):
    log = UsageLog(tmp_path / ".usage.json")
    log.record_view("rotate-logs", at=AT)
    assert log.get("rotate-logs").turns == 1 and log.day_stamps() == {}


def test_days_past_the_span_are_deleted_when_a_new_day_begins(tmp_path: Path):
    log = UsageLog(tmp_path / ".usage.json")
    oldest, kept = AT - timedelta(days=DAYS_KEPT), AT - timedelta(days=DAYS_KEPT - 1)
    for at in (oldest, kept):
        log.record_turn({"rotate-logs": 1}, calls=1, at=at)
    assert len(log.day_stamps()) == 2
    log.record_turn({"rotate-logs": 1}, calls=1, at=AT)
    assert sorted(log.day_stamps()) == [kept.date().isoformat(), "2026-11-30"]


def test_an_older_usage_file_with_days_inside_its_entries_loses_no_figure(tmp_path: Path):
    path = tmp_path / ".usage.json"
    path.write_text(json.dumps({"skills": {
        "rotate-logs": {"turns": 3, "counted": 3, "calls": 12, "days": {
            "2026-11-28": {"counted": 2, "calls": 9, "tokened": 2, "tokens": 3000},
            "2026-11-30": {"counted": 1, "calls": 3}}},
        "renew-certs": {"turns": 1, "counted": 1, "calls": 5, "days": {
            "2026-11-30": {"counted": 1, "calls": 5, "tokened": 1, "tokens": 700}, "not a day": {"counted": 9}}}}}))
    log = UsageLog(path)
    legacy = [("2026-11-28", {"rotate-logs": DayUse(2, 9, 2, 3000)}),
              ("2026-11-30", {"renew-certs": DayUse(1, 5, 1, 700), "rotate-logs": DayUse(1, 3, 0, 0)})]
    assert log.per_day() == legacy  # read as they are before any write
    assert log.snapshot()[1] == dict(legacy) and log.day_stamps() == {}

    log.record_turn({"rotate-logs": 1}, calls=1, tokens=50, at=AT)  # the next write moves them, then counts
    assert all("days" not in entry for entry in json.loads(path.read_text())["skills"].values())
    assert log.snapshot()[1] == {}
    assert log.per_day() == [("2026-11-28", {"rotate-logs": DayUse(2, 9, 2, 3000)}),
                             ("2026-11-30", {"renew-certs": DayUse(1, 5, 1, 700), "rotate-logs": DayUse(2, 4, 1, 50)})]
    assert log.get("rotate-logs").turns == 4 and log.get("rotate-logs").calls == 13


def test_any_write_moves_an_older_files_days_not_only_a_turn(tmp_path: Path):
    path = tmp_path / ".usage.json"
    path.write_text(json.dumps({"skills": {"rotate-logs": {"turns": 1, "days": {"2026-11-30": {"counted": 1,
                                                                                                "calls": 3}}}}}))
    log = UsageLog(path)
    log.set_status("rotate-logs", "stale", at=AT)
    assert "days" not in json.loads(path.read_text())["skills"]["rotate-logs"]
    assert log.read_day("2026-11-30") == {"rotate-logs": DayUse(1, 3)}
