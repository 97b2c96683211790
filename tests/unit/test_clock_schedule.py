"""Schedules as people say them, computed in their zone: one run at the local hour on a daylight-saving night,
and one sentence for each thing that cannot be used."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from hermes_engine.clock.schedule import ScheduleError, local_time, parse_schedule, zone_named

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 3, 25, 12, 0, tzinfo=UTC)  # a Wednesday, before the clocks go forward on the 29th


def _slots(text: str, start: datetime, n: int, zone: ZoneInfo = BERLIN) -> list[datetime]:
    schedule = parse_schedule(text, zone, start)
    slots = [schedule.first(start, zone)]
    while len(slots) < n:
        nxt = schedule.after(slots[-1], zone)
        assert nxt is not None
        slots.append(nxt)
    return slots


def test_in_a_duration_fires_once_that_long_from_now() -> None:
    schedule = parse_schedule("in 30m", BERLIN, NOW)
    assert schedule.once and schedule.first(NOW, BERLIN) == NOW + timedelta(minutes=30)
    assert schedule.after(NOW + timedelta(minutes=30), BERLIN) is None
    assert parse_schedule("in 1h30m", BERLIN, NOW).at == NOW + timedelta(minutes=90)
    assert parse_schedule("in 2 seconds", BERLIN, NOW).at == NOW + timedelta(seconds=2)


def test_an_iso_time_with_an_offset_fires_once_at_that_instant() -> None:
    schedule = parse_schedule("2026-12-24T18:00+01:00", BERLIN, NOW)
    assert schedule.at == datetime(2026, 12, 24, 17, 0, tzinfo=UTC)


def test_every_interval_is_a_fixed_length_of_real_time() -> None:
    assert _slots("every 2h", NOW, 3) == [NOW + timedelta(hours=2 * i) for i in (1, 2, 3)]


def test_weekly_and_weekday_phrases_fire_at_the_local_hour() -> None:
    mondays = _slots("every monday 9am", NOW, 2)
    assert [s.astimezone(BERLIN).replace(tzinfo=None) for s in mondays] == [
        datetime(2026, 3, 30, 9, 0), datetime(2026, 4, 6, 9, 0)]
    weekdays = _slots("weekdays at 9am", NOW, 4)
    assert [s.astimezone(BERLIN).strftime("%a %H:%M") for s in weekdays] == [
        "Thu 09:00", "Fri 09:00", "Mon 09:00", "Tue 09:00"]
    assert [s.astimezone(BERLIN).strftime("%H:%M") for s in _slots("0 9 * * 1-5", NOW, 3)] == ["09:00"] * 3


def test_nine_stays_nine_across_the_spring_change_in_berlin() -> None:
    days = _slots("every day at 9am", NOW, 7)
    assert {s.astimezone(BERLIN).strftime("%H:%M") for s in days} == {"09:00"}
    assert {s.astimezone(UTC).strftime("%H:%M") for s in days} == {"08:00", "07:00"}  # CET, then CEST


def test_a_time_skipped_by_the_spring_change_fires_once_right_after_the_gap() -> None:
    nights = _slots("30 2 * * *", datetime(2026, 3, 27, 12, 0, tzinfo=UTC), 4)
    local = [s.astimezone(BERLIN).strftime("%d %H:%M") for s in nights]
    assert local == ["28 02:30", "29 03:00", "30 02:30", "31 02:30"]


def test_a_time_doubled_by_the_autumn_change_fires_once_at_its_first_occurrence() -> None:
    nights = _slots("30 2 * * *", datetime(2026, 10, 23, 12, 0, tzinfo=UTC), 3)
    assert [s.astimezone(BERLIN).strftime("%d %H:%M %Z") for s in nights] == [
        "24 02:30 CEST", "25 02:30 CEST", "26 02:30 CET"]


@pytest.mark.parametrize(("text", "sentence"), [
    ("30m", "Once in 30 minutes, or every 30 minutes? Say `in 30m` or `every 30m`."),
    ("0 0 9 * * 1", "Cron expressions here have five fields (minute hour day month weekday), not seconds or years."),
    ("every 0 minutes", "An interval has to be longer than zero: say, for example, `every 2h`."),
    ("2020-01-01T09:00+00:00", "2020-01-01 10:00 has already passed: give a time in the future."),
    ("every 10s", "A recurring job can fire at most once every 5 minutes: use `every 5m` or a schedule that fires "
                  "less often."),
    ("*/2 * * * *", "A recurring job can fire at most once every 5 minutes: use `every 5m` or a schedule that "
                    "fires less often."),
    ("sometime soon", "I cannot read 'sometime soon' as a time: try `in 30m`, `every monday 9am`, "
                      "`weekdays at 9am`, `0 9 * * 1-5` or an ISO time like 2026-12-24T18:00+01:00."),
])
def test_a_schedule_that_cannot_be_used_is_one_sentence(text: str, sentence: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(text, BERLIN, NOW)
    assert str(caught.value) == sentence


def test_an_unknown_time_zone_is_one_sentence() -> None:
    for name in ("Mars/Olympus", "../etc/passwd", ""):
        with pytest.raises(ScheduleError) as caught:
            zone_named(name)
        assert str(caught.value) == f"I do not know the time zone {name!r}: use an IANA name such as Europe/Berlin."


def test_the_local_time_names_the_clock_and_the_zone() -> None:
    assert local_time(datetime(2026, 12, 7, 8, 0, tzinfo=UTC), BERLIN) == "Mon 7 Dec 2026, 09:00 CET (Europe/Berlin)"
    assert local_time(datetime(2026, 12, 7, 8, 0, 5, tzinfo=UTC), zone_named("UTC")) == "Mon 7 Dec 2026, 08:00:05 UTC (UTC)"


def test_the_profiles_minimum_interval_bounds_intervals_and_cron_alike() -> None:
    assert parse_schedule("every 1m", BERLIN, NOW, min_interval=timedelta(minutes=1)).every == timedelta(minutes=1)
    assert parse_schedule("*/10 * * * *", BERLIN, NOW, min_interval=timedelta(minutes=10)).cron == "*/10 * * * *"
    for text in ("every 9m", "*/5 * * * *", "0,5 9 * * *"):
        with pytest.raises(ScheduleError, match="at most once every 10 minutes: use `every 10m`"):
            parse_schedule(text, BERLIN, NOW, min_interval=timedelta(minutes=10))
