"""Crawler traps caught by their shape (pure: no I/O, no clock of its own).

A per-host cap on URLs is a last resort, not a quota: real large capsules hold thousands
of URLs (Kennedy allows 15,000 per authority), so the frontier's cap is set that high and
the generated link mazes and endless calendars that a cap used to stop are caught here by
what their URLs look like instead:

- a path segment that occurs more than :data:`MAX_SEGMENT_REPEATS` times
  (``/a/b/a/b/a/b/a/b``: relative links that loop);
- more than :data:`MAX_SEGMENTS` path segments (a maze that never repeats a name);
- more than :data:`MAX_DEEP_URLS_PER_HOST` URLs of one host deeper than
  :data:`DEEP_SEGMENTS` segments (a maze that stays just under the two bounds above);
  the frontier counts them per host and passes the count;
- a calendar date in the path or query before :data:`EARLIEST_YEAR` or more than
  :data:`MAX_YEARS_AHEAD` years after today (``/calendar/1990/12``, ``?day=2031-01-01``):
  an endless calendar's "previous" and "next" links walk out of that range. A date is
  four digits, then a month 1-12, then optionally a day 1-31, joined by ``/`` or ``-``;
  a date without a day means its month's first day.

Segments are the non-empty parts of the path between slashes (``/a//b/`` has two).
"""

from __future__ import annotations

import re
from datetime import date

#: A path segment may occur this many times in one path; one more is a trap.
MAX_SEGMENT_REPEATS = 3
#: Most path segments a URL may have.
MAX_SEGMENTS = 12
#: A URL with more path segments than this is "deep" ...
DEEP_SEGMENTS = 4
#: ... and one host may have at most this many deep URLs in the frontier.
MAX_DEEP_URLS_PER_HOST = 300
#: Dates before this year are a calendar walking backwards (the web began in 1991).
EARLIEST_YEAR = 1991
#: Dates more than this many years after today are a calendar walking forwards.
MAX_YEARS_AHEAD = 2

_DATE = re.compile(r"(?<![0-9])([0-9]{4})([/-])([0-9]{1,2})(?:\2([0-9]{1,2}))?(?![0-9])")


def segments(path: str) -> list[str]:
    """The non-empty segments of a URL path (without its query)."""
    return [s for s in path.split("/") if s]


def is_deep(path: str) -> bool:
    """Whether a path counts against :data:`MAX_DEEP_URLS_PER_HOST`."""
    return len(segments(path)) > DEEP_SEGMENTS


def latest_date(today: date) -> date:
    """The last date not too far ahead: :data:`MAX_YEARS_AHEAD` years after ``today``
    (29 February becomes 28 February in a year that has none)."""
    year = today.year + MAX_YEARS_AHEAD
    try:
        return today.replace(year=year)
    except ValueError:
        return today.replace(year=year, day=28)


def calendar_dates(text: str) -> list[date]:
    """The dates written in ``text`` (a path and query), as described above."""
    found = []
    for m in _DATE.finditer(text):
        year, month = int(m[1]), int(m[3])
        day = int(m[4]) if m[4] else 1
        if year < 1 or not 1 <= month <= 12:
            continue
        try:
            found.append(date(year, month, day))
        except ValueError:  # 31 February is no date
            continue
    return found


def shape_trap(path: str, query: str | None, today: date) -> str | None:
    """The trap a URL's path and query look like, or None."""
    parts = segments(path)
    if len(parts) > MAX_SEGMENTS:
        return f"more than {MAX_SEGMENTS} path segments"
    counts: dict[str, int] = {}
    for part in parts:
        counts[part] = counts.get(part, 0) + 1
        if counts[part] > MAX_SEGMENT_REPEATS:
            return f"a path segment repeated more than {MAX_SEGMENT_REPEATS} times"
    text = path if query is None else f"{path}?{query}"
    latest = latest_date(today)
    for when in calendar_dates(text):
        if when.year < EARLIEST_YEAR:
            return f"a calendar date before {EARLIEST_YEAR}"
        if when > latest:
            return f"a calendar date more than {MAX_YEARS_AHEAD} years ahead"
    return None


def deep_trap(path: str, deep_on_host: int, limit: int = MAX_DEEP_URLS_PER_HOST) -> str | None:
    """The deep-URL bound, for a URL whose host already has ``deep_on_host`` deep URLs."""
    if is_deep(path) and deep_on_host >= limit:
        return f"more than {limit} URLs deeper than {DEEP_SEGMENTS} segments on the host"
    return None
