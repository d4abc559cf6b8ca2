"""Dates as search terms: when a message was said, and the days it talks about.

A message is indexed with terms for the day it was said (`d20230508`, `m202305`,
`y2023`, `mo05`) and for the days its relative phrases point at, resolved against
that day ("yesterday" said on 8 May 2023 is 7 May 2023). A query that names a date
("in July 2022", "on 8 May 2023", "in 2023") gets the same terms, so full-text search
finds what was said or told about that time. Pure functions, no I/O.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal

Precision = Literal["day", "week", "month", "year"]

MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): number for number, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
WEEKDAYS = {name.lower(): number for number, name in enumerate(calendar.day_name)}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "several": 3}
_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"


@dataclass(frozen=True)
class Span:
    """A day, the week starting on a day, a month or a year."""

    start: date
    precision: Precision

    def label(self) -> str:
        if self.precision == "year":
            return f"{self.start:%Y}"
        if self.precision == "month":
            return f"{self.start:%Y-%m}"
        if self.precision == "week":
            return f"week of {self.start:%Y-%m-%d}"
        return f"{self.start:%Y-%m-%d}"

    def terms(self) -> list[str]:
        day = self.start
        if self.precision == "year":
            return [f"y{day:%Y}"]
        if self.precision == "month":
            return [f"m{day:%Y%m}", f"y{day:%Y}", f"mo{day:%m}"]
        days = 7 if self.precision == "week" else 1
        terms = [f"d{day + timedelta(days=offset):%Y%m%d}" for offset in range(days)]
        return [*terms, f"m{day:%Y%m}", f"y{day:%Y}", f"mo{day:%m}"]


@dataclass(frozen=True)
class Mention:
    """A relative phrase in a message and the span it points at."""

    phrase: str
    span: Span


def said_on_terms(day: date) -> list[str]:
    """The terms of the day a message was said."""
    return Span(day, "day").terms()


def _shift_month(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


# Relative phrases that name one day, as an offset from the day they were said.
_DAY_OFFSETS = {
    "today": 0, "tonight": 0, "this morning": 0, "this afternoon": 0, "this evening": 0,
    "yesterday": -1, "last night": -1, "tomorrow": 1,
    "今天": 0, "今晚": 0, "昨天": -1, "昨晚": -1, "前天": -2, "明天": 1,
}  # fmt: skip
# Chinese phrases for the previous or next week, month or year.
_CJK_STEPS = {"上周": ("week", -1), "下周": ("week", 1), "上个月": ("month", -1), "下个月": ("month", 1),
              "去年": ("year", -1), "明年": ("year", 1)}  # fmt: skip
_STEPS = {"last": -1, "this": 0, "next": 1}


def _resolve(phrase: str, said: date) -> Span | None:
    lowered = phrase.lower()
    if lowered in _DAY_OFFSETS:
        return Span(said + timedelta(days=_DAY_OFFSETS[lowered]), "day")
    words = lowered.split()
    if words[-1] == "ago":
        count = int(words[0]) if words[0].isdigit() else _NUMBERS.get(words[0], 1)
        unit = words[-2].rstrip("s")
        if unit == "day":
            return Span(said - timedelta(days=count), "day")
        if unit == "week":
            return Span(said - timedelta(days=7 * count), "week")
        if unit == "month":
            return Span(_shift_month(said, -count), "month")
        return Span(date(said.year - count, 1, 1), "year")
    unit, direction = _CJK_STEPS.get(phrase) or (words[-1], _STEPS.get(words[0], 0))
    if unit in ("week", "weekend"):
        monday = said - timedelta(days=said.weekday()) + timedelta(days=7 * direction)
        return Span(monday + timedelta(days=5), "day") if unit == "weekend" else Span(monday, "week")
    if unit == "month":
        return Span(_shift_month(said, direction), "month")
    if unit == "year":
        return Span(date(said.year + direction, 1, 1), "year")
    if unit in WEEKDAYS and words[0] == "last":
        back = (said.weekday() - WEEKDAYS[unit]) % 7 or 7
        return Span(said - timedelta(days=back), "day")
    return None


_RELATIVE = re.compile(
    r"\b(?:today|tonight|yesterday|tomorrow|last night|this (?:morning|afternoon|evening)"
    r"|(?:last|next|this) (?:week|weekend|month|year|" + "|".join(WEEKDAYS) + r")"
    r"|(?:\d+|a|an|one|two|three|four|five|six|several) (?:days?|weeks?|months?|years?) ago)\b"
    r"|今天|今晚|昨天|昨晚|前天|明天|上周|下周|上个月|下个月|去年|明年",
    re.I,
)


def relative_mentions(text: str, said: date) -> list[Mention]:
    """Relative phrases in `text`, each resolved against the day it was said."""
    found: list[Mention] = []
    for match in _RELATIVE.finditer(text):
        span = _resolve(match.group(0), said)
        if span is not None:
            found.append(Mention(match.group(0), span))
    return found


def message_date_terms(text: str, said: date) -> list[str]:
    """Index terms for a message: the day it was said and the days it mentions."""
    terms = said_on_terms(said)
    for mention in relative_mentions(text, said):
        terms.extend(mention.span.terms())
    return list(dict.fromkeys(terms))


_QUERY_DATES = [
    (re.compile(r"\b(?P<y>(?:19|20)\d\d)-(?P<m>[01]\d)-(?P<d>[0-3]\d)\b"), "iso"),
    (re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I), "day"),
    (re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.I), "day"),
    (re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I), "month"),
    (re.compile(rf"\b{_YEAR}\b"), "year"),
]
# A month named alone only after a word that introduces a time ("in July"): "May I" is no date.
_MONTH_ALONE = re.compile(
    r"\b(?:in|of|during|since|until|before|after|early|late|mid|by|last|next|this)\s+("
    + "|".join(calendar.month_name[1:])
    + r")\b",
    re.I,
)


def query_date_terms(query: str) -> tuple[list[str], str]:
    """Terms for the dates a query names (most precise first), and the query without them.

    The date's own words ("7", "May", "2023") leave the query: its terms say it better.
    """
    terms: list[str] = []
    rest = query
    for pattern, precision in _QUERY_DATES:
        for match in pattern.finditer(rest):
            try:
                terms.extend(_query_span(match, precision).terms()[:1])
            except ValueError:
                continue
        rest = pattern.sub(" ", rest)
    for match in _MONTH_ALONE.finditer(rest):
        terms.append(f"mo{MONTHS[match.group(1).lower()]:02d}")
    rest = _MONTH_ALONE.sub(" ", rest)
    return list(dict.fromkeys(terms)), rest


def _query_span(match: re.Match[str], precision: str) -> Span:
    if precision == "iso":
        return Span(date(int(match["y"]), int(match["m"]), int(match["d"])), "day")
    year = int(match["year"])
    if precision == "year":
        return Span(date(year, 1, 1), "year")
    month = MONTHS[match["month"].lower()]
    if precision == "month":
        return Span(date(year, month, 1), "month")
    return Span(date(year, month, int(match["day"])), "day")
