"""When a reminder falls due: durations, dates, times and recurrences, read in a time zone.

`/remind` and the `schedule` tool read times here, so both accept the same things and
refuse the same things with the same words. A recurrence is a cron expression (read by
croniter in the owner's zone, so 08:00 stays 08:00 across daylight-saving changes);
"every day 08:00" and its kin are written as one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, croniter

from bot.errors import ChorusError

ACCEPTED = (
    "a duration (30s, 10m, 2h, 3d, 1h30m), a date and time (2026-12-24 09:00, or 09:00 for "
    "the next one), or a recurrence (every day 08:00, every weekday 08:00, every monday 18:30, "
    "every hour, or cron 0 8 * * 1-5)"
)
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DURATION = re.compile(r"^(?:\d+[smhd])+$")
DURATION_PART = re.compile(r"(\d+)([smhd])")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
CLOCK = re.compile(r"^(\d{1,2}):(\d{2})$")
DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{1,2}:\d{2}")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
CRON_FIELDS = 5
# A cron expression's first firings, read to check how often it fires.
INTERVAL_SAMPLES = 4


class BadTime(ChorusError):
    """A time that cannot be read, is in the past, or recurs too often; the message says what is accepted."""


@dataclass(frozen=True)
class When:
    """When a reminder first falls due (UTC), and its recurrence if it has one."""

    due_at: datetime
    cron: str | None = None


@dataclass(frozen=True)
class Parsed:
    """A command's arguments read: when, and the reminder's text (the words after the time)."""

    when: When
    text: str


def zone_named(name: str) -> ZoneInfo:
    """The IANA time zone `name` (Europe/Berlin); raises `BadTime` naming what is accepted."""
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise BadTime(
            f"“{name.strip()}” is not a time zone I know. Use an IANA name such as "
            "Europe/Berlin, America/New_York or UTC."
        ) from None


def parse_command(args: str, zone: ZoneInfo, now: datetime, min_interval: float) -> Parsed:
    """`/remind` arguments: a time, then the text (`10m stretch`, `every day 08:00 standup`)."""
    words = args.split()
    when, used = _read_when(words, zone, now, min_interval)
    text = " ".join(words[used:]).strip()
    if not text:
        raise BadTime("Say what to remind you of after the time, e.g. /remind 10m stretch.")
    return Parsed(when, text)


def parse_arguments(
    zone: ZoneInfo,
    now: datetime,
    min_interval: float,
    *,
    in_seconds: float | None = None,
    at: str | None = None,
    cron: str | None = None,
) -> When:
    """The `schedule` tool's time: exactly one of `in_seconds`, `at` (ISO 8601) and `cron`."""
    given = [
        name for name, value in (("in_seconds", in_seconds), ("at", at), ("cron", cron)) if value is not None
    ]
    if len(given) != 1:
        raise BadTime("Give exactly one of in_seconds, at (ISO 8601) or cron.")
    if in_seconds is not None:
        return future(When(now + timedelta(seconds=in_seconds)), now)
    if at is not None:
        try:
            moment = datetime.fromisoformat(at.strip())
        except ValueError:
            raise BadTime(f"“{at}” is not an ISO 8601 time; use e.g. 2026-12-24T09:00.") from None
        local = moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)
        return future(When(local.astimezone(UTC)), now)
    assert cron is not None
    return recurring(cron, zone, now, min_interval)


def future(when: When, now: datetime) -> When:
    if when.due_at <= now:
        raise BadTime(f"That time is in the past (it is now {now:%Y-%m-%d %H:%M} UTC). {_accepted()}")
    return when


def recurring(expression: str, zone: ZoneInfo, now: datetime, min_interval: float) -> When:
    """The first firing of a cron expression after `now`, checked to recur no more often than allowed."""
    expression = " ".join(expression.split())
    if len(expression.split()) != CRON_FIELDS or not croniter.is_valid(expression):
        raise BadTime(
            f"“{expression}” is not a cron expression (minute hour day month weekday). {_accepted()}"
        )
    try:
        firings = croniter(expression, now.astimezone(zone))
        times = [firings.get_next(datetime) for _ in range(INTERVAL_SAMPLES)]
    except (CroniterBadCronError, ValueError):
        raise BadTime(f"“{expression}” is not a cron expression I can read. {_accepted()}") from None
    shortest = min(
        (later - earlier).total_seconds() for earlier, later in zip(times, times[1:], strict=False)
    )
    if shortest < min_interval:
        raise BadTime(f"A reminder may repeat at most every {min_interval / 60:.0f} minute(s).")
    return When(times[0].astimezone(UTC), expression)


def next_firing(expression: str, zone_name: str, after: datetime) -> datetime:
    """A recurring reminder's next due time after `after` (UTC)."""
    firing: datetime = croniter(expression, after.astimezone(ZoneInfo(zone_name))).get_next(datetime)
    return firing.astimezone(UTC)


def local_text(moment: datetime, zone: ZoneInfo) -> str:
    """A due time as the person reads it: `2026-12-24 09:00 CET`."""
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")


def _read_when(words: list[str], zone: ZoneInfo, now: datetime, min_interval: float) -> tuple[When, int]:
    """The time at the start of `words`, and how many words it took."""
    first = words[0].lower() if words else ""
    if not first:
        raise BadTime(f"Tell me when: {ACCEPTED}. For example /remind 10m stretch.")
    if DURATION.match(first):
        seconds = sum(int(count) * UNITS[unit] for count, unit in DURATION_PART.findall(first))
        return future(When(now + timedelta(seconds=seconds)), now), 1
    if first == "every":
        return _read_every(words[1:], zone, now, min_interval)
    if first == "cron":
        return recurring(" ".join(words[1 : 1 + CRON_FIELDS]), zone, now, min_interval), 1 + CRON_FIELDS
    if DATE_TIME.match(first):
        return parse_arguments(zone, now, min_interval, at=words[0]), 1
    if DATE.match(first):
        clock = CLOCK.match(words[1]) if len(words) > 1 else None
        hour, minute = (int(clock.group(1)), int(clock.group(2))) if clock else (9, 0)
        try:
            day = datetime.fromisoformat(first)
            local = day.replace(hour=hour, minute=minute, tzinfo=zone)
        except ValueError:
            raise BadTime(
                f"“{' '.join(words[:2])}” is not a date and time I can read. {_accepted()}"
            ) from None
        return future(When(local.astimezone(UTC)), now), 2 if clock else 1
    if clock := CLOCK.match(first):
        return _next_clock(int(clock.group(1)), int(clock.group(2)), zone, now), 1
    raise BadTime(f"I could not read a time in “{' '.join(words[:3])}”. {_accepted()}")


def _read_every(words: list[str], zone: ZoneInfo, now: datetime, min_interval: float) -> tuple[When, int]:
    period = words[0].lower() if words else ""
    if period == "hour":
        return recurring("0 * * * *", zone, now, min_interval), 2
    if period == "minute":
        return recurring("* * * * *", zone, now, min_interval), 2
    clock = CLOCK.match(words[1]) if len(words) > 1 else None
    if clock is None or not (0 <= int(clock.group(1)) <= 23 and 0 <= int(clock.group(2)) <= 59):
        raise BadTime(f"Say at what time, e.g. every day 08:00. {_accepted()}")
    hour, minute = int(clock.group(1)), int(clock.group(2))
    if period == "day":
        days = "*"
    elif period == "weekday":
        days = "1-5"
    elif period in WEEKDAYS:
        days = str((WEEKDAYS.index(period) + 1) % 7)
    else:
        raise BadTime(f"I could not read “every {period}”. {_accepted()}")
    return recurring(f"{minute} {hour} * * {days}", zone, now, min_interval), 3


def _next_clock(hour: int, minute: int, zone: ZoneInfo, now: datetime) -> When:
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        raise BadTime(f"{hour}:{minute:02d} is not a time of day. {_accepted()}")
    local = now.astimezone(zone).replace(hour=hour, minute=minute, second=0, microsecond=0)
    if local.astimezone(UTC) <= now:
        local = (local + timedelta(days=1)).replace(hour=hour, minute=minute)
    return When(local.astimezone(UTC))


def _accepted() -> str:
    return f"I accept {ACCEPTED}."
