"""When a job fires: the few phrases people say, parsed by hand; five-field cron and every weekly phrase
evaluated by cronsim in the job's own IANA zone.

What it reads:
- once: `in 30m`, `in 2 hours`, `in 1h30m`, or an ISO time (`2026-12-24T18:00+01:00`; one without an offset is
  read in the person's zone);
- recurring: `every 2h` (a fixed length of real time, whatever the clocks do), `every monday 9am`,
  `every day at 7:30`, `weekdays at 9am`, and five-field cron (`0 9 * * 1-5`).
A bare duration (`30m`) is asked about, never guessed: once in 30 minutes and every 30 minutes are both what
people mean by it.

Wall-clock schedules (the weekly phrases, cron) are computed in the job's zone, so 9:00 stays 9:00 across
daylight-saving changes. On the night the clocks change, the rule is cronsim's, the one Debian's cron keeps:
a time that does not exist that night (02:30 when 02:00 jumps to 03:00) fires at the first moment after the
gap, once; a time that happens twice (02:30 when 03:00 falls back to 02:00) fires at its first occurrence,
once. An ISO time without an offset that falls in such a night is read the same way (`fold=0`: the earlier
one; in a gap, the time after it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from hermes_engine.config.clock import ClockSettings

# a recurring job fires at most this often unless the caller passes the profile's `clock.min_interval`
MIN_INTERVAL: timedelta = ClockSettings.model_fields["min_interval"].default

_UNITS = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
          "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
          "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
          "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}
_PART = re.compile(r"(\d+)\s*([a-z]+)")
_DURATION = re.compile(r"^(?:\d+\s*[a-z]+\s*)+$")
_DAYS = {"monday": "1", "tuesday": "2", "wednesday": "3", "thursday": "4", "friday": "5", "saturday": "6",
         "sunday": "0", "mon": "1", "tue": "2", "tues": "2", "wed": "3", "thu": "4", "thur": "4", "thurs": "4",
         "fri": "5", "sat": "6", "sun": "0", "day": "*", "weekday": "1-5", "weekdays": "1-5",
         "weekend": "0,6", "weekends": "0,6"}
_CLOCK = re.compile(r"^(\d{1,2})(?::(\d{2}))?\s*(am|pm)?$")
_WEEKLY = re.compile(r"^(?:every\s+)?(?P<days>[a-z]+)\s+(?:at\s+)?(?P<time>\d{1,2}(?::\d{2})?\s*(?:am|pm)?)$")
_DAILY = re.compile(r"^(?:daily|every day)\s+(?:at\s+)?(?P<time>\d{1,2}(?::\d{2})?\s*(?:am|pm)?)$")


class ScheduleError(ValueError):
    """A schedule that cannot be used; the message is one sentence for the person."""


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: exactly one of `at` (once), `every` (a fixed interval) or `cron` (wall-clock times
    in the job's zone) is set."""

    text: str
    at: datetime | None = None
    every: timedelta | None = None
    cron: str | None = None

    @property
    def once(self) -> bool:
        return self.at is not None

    def first(self, now: datetime, zone: ZoneInfo) -> datetime:
        """The first slot after `now`, in UTC."""
        if self.at is not None:
            return self.at
        nxt = self.after(now, zone)
        assert nxt is not None
        return nxt

    def after(self, moment: datetime, zone: ZoneInfo) -> datetime | None:
        """The first slot strictly after `moment`, in UTC; None for a schedule that fires once. Called with
        the later of the slot that ran and now, so slots missed while down are skipped, not replayed."""
        if self.at is not None:
            return None
        if self.every is not None:
            return (moment + self.every).astimezone(UTC)
        assert self.cron is not None
        local = moment.astimezone(zone)
        return next(iter(CronSim(self.cron, local))).astimezone(UTC)


def zone_named(name: str) -> ZoneInfo:
    """The IANA zone `name` (e.g. Europe/Berlin); `ScheduleError` for one the database does not know."""
    cleaned = name.strip()
    if not cleaned or cleaned.startswith("/") or ".." in cleaned:
        raise ScheduleError(f"I do not know the time zone {name!r}: use an IANA name such as Europe/Berlin.")
    try:
        return ZoneInfo(cleaned)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(
            f"I do not know the time zone {name!r}: use an IANA name such as Europe/Berlin.") from None


def parse_schedule(text: str, zone: ZoneInfo, now: datetime, *, min_interval: timedelta = MIN_INTERVAL) -> Schedule:
    """`text` as a `Schedule` for a person in `zone` at `now` (aware); `ScheduleError` with one sentence for
    the person when it cannot be used, or when it recurs more often than `min_interval` (the profile's
    `clock.min_interval`)."""
    raw = " ".join(text.split())
    lowered = raw.lower()
    if not lowered:
        raise ScheduleError("Say when: for example `in 30m`, `every monday 9am` or `0 9 * * 1-5`.")
    if lowered.startswith("in "):
        return Schedule(raw, at=(now + _duration(lowered[3:], raw)).astimezone(UTC))
    if _DURATION.match(lowered):
        spoken = _spoken(_duration(lowered, raw))
        raise ScheduleError(f"Once in {spoken}, or every {spoken}? Say `in {lowered}` or `every {lowered}`.")
    if lowered.startswith("every ") and _DURATION.match(lowered[6:].strip()):
        every = _duration(lowered[6:], raw, allow_zero=True)
        if every <= timedelta(0):
            raise ScheduleError("An interval has to be longer than zero: say, for example, `every 2h`.")
        if every < min_interval:
            raise _too_often(min_interval)
        return Schedule(raw, every=every)
    if (cron := _phrase_cron(lowered)) is not None:
        return _often_enough(Schedule(raw, cron=cron), zone, now, min_interval)
    fields = lowered.split(" ")
    if len(fields) == 5 and all(re.fullmatch(r"[\d*/,\-a-z?LW#]+", f) for f in fields):
        try:
            CronSim(lowered, now.astimezone(zone))
        except CronSimError as exc:
            raise ScheduleError(f"That cron expression does not work ({exc}).") from None
        return _often_enough(Schedule(raw, cron=lowered), zone, now, min_interval)
    if len(fields) in (6, 7) and all(re.fullmatch(r"[\d*/,\-a-z?LW#]+", f) for f in fields):
        raise ScheduleError("Cron expressions here have five fields (minute hour day month weekday), not seconds "
                            "or years.")
    at = _iso(raw, zone)
    if at is None:
        raise ScheduleError(f"I cannot read {raw!r} as a time: try `in 30m`, `every monday 9am`, "
                            "`weekdays at 9am`, `0 9 * * 1-5` or an ISO time like 2026-12-24T18:00+01:00.")
    if at <= now:
        raise ScheduleError(f"{at.astimezone(zone):%Y-%m-%d %H:%M} has already passed: give a time in the future.")
    return Schedule(raw, at=at.astimezone(UTC))


CRON_SLOTS_CHECKED = 60  # consecutive slots of a cron schedule whose gaps are held to the minimum interval


def _too_often(min_interval: timedelta) -> ScheduleError:
    seconds = int(min_interval.total_seconds())
    short = f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds}s"
    return ScheduleError(f"A recurring job can fire at most once every {_spoken(min_interval)}: use `every {short}` "
                         "or a schedule that fires less often.")


def _often_enough(schedule: Schedule, zone: ZoneInfo, now: datetime, min_interval: timedelta) -> Schedule:
    """`schedule` when none of its next slots follows the one before sooner than `min_interval`."""
    slot = schedule.first(now, zone)
    for _ in range(CRON_SLOTS_CHECKED):
        following = schedule.after(slot, zone)
        if following is None:
            break
        if following - slot < min_interval:
            raise _too_often(min_interval)
        slot = following
    return schedule


def _duration(text: str, raw: str, *, allow_zero: bool = False) -> timedelta:
    text = text.strip()
    if not _DURATION.match(text):
        raise ScheduleError(f"I cannot read {raw!r}: give a length such as `30m`, `2h` or `1h30m`.")
    seconds = 0
    for number, unit in _PART.findall(text):
        if unit not in _UNITS:
            raise ScheduleError(f"I do not know the unit {unit!r}: use s, m, h, d or w.")
        seconds += int(number) * _UNITS[unit]
    if seconds <= 0 and not allow_zero:
        raise ScheduleError("A time from now has to be more than zero: say, for example, `in 30m`.")
    return timedelta(seconds=seconds)


def _spoken(length: timedelta) -> str:
    seconds = int(length.total_seconds())
    for size, name in ((604800, "week"), (86400, "day"), (3600, "hour"), (60, "minute"), (1, "second")):
        if seconds % size == 0 and seconds >= size:
            count = seconds // size
            return f"{count} {name}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"


def _clock(text: str) -> tuple[int, int] | None:
    match = _CLOCK.match(text.strip())
    if match is None:
        return None
    hour, minute, half = int(match.group(1)), int(match.group(2) or 0), match.group(3)
    if half is not None:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    return hour, minute


def _phrase_cron(text: str) -> str | None:
    """`every monday 9am`, `weekdays at 9am`, `every day at 7:30` as a cron expression; None otherwise."""
    match = _DAILY.match(text) or _WEEKLY.match(text)
    if match is None:
        return None
    days = _DAYS.get(match.groupdict().get("days") or "day")
    if days is None:
        return None
    clock = _clock(match.group("time"))
    if clock is None:
        raise ScheduleError(f"I cannot read {match.group('time')!r} as a time of day: say, for example, 9am or 17:30.")
    return f"{clock[1]} {clock[0]} * * {days}"


def _iso(text: str, zone: ZoneInfo) -> datetime | None:
    try:
        value = datetime.fromisoformat(text.replace(" ", "T", 1) if " " in text else text)
    except ValueError:
        return None
    if value.tzinfo is None:  # the person's wall clock; fold=0 is the earlier of a doubled hour
        value = value.replace(tzinfo=zone)
        if value.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != value.replace(tzinfo=None):
            value = value.astimezone(UTC).astimezone(zone)  # in a gap: the time after it
    return value


def local_time(moment: datetime, zone: ZoneInfo) -> str:
    """How a person is told when: their wall clock, its zone's abbreviation and name, e.g.
    "Mon 7 Dec 2026, 09:00 CET (Europe/Berlin)"; seconds only when the time has them."""
    local = moment.astimezone(zone)
    clock = f"{local:%H:%M:%S}" if local.second else f"{local:%H:%M}"
    return f"{local:%a} {local.day} {local:%b %Y}, {clock} {local:%Z} ({zone.key})"
