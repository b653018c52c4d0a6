"""Crawler traps: the bounds a crawl puts on the URLs it queues (pure: no I/O, no clock of
its own, no database: the command line shows the bounds without importing a store).

:class:`FrontierLimits` holds the bounds of one crawl and :func:`trap_reason` applies them
to a new URL: its length (:data:`MAX_URL_LENGTH`), its depth from a seed
(:data:`DEFAULT_MAX_DEPTH`), the query strings on its path (:data:`MAX_QUERIES_PER_PATH`),
the live URLs on its host (:data:`MAX_URLS_PER_HOST`), and its shape, below.

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
- an endless calendar: a date in the URL before :data:`EARLIEST_YEAR` or more than
  :data:`MAX_YEARS_AHEAD` years after today, at the end of a run of :data:`CALENDAR_RUN`
  dates in a row already known on the host under the same URL (``/calendar/1990/12``
  once ``/calendar/1991/1`` to ``/calendar/1991/12`` are known; ``?day=2031-01-01``
  after the twelve days before it): the "previous" and "next" links of a generated
  calendar walk out of that range one step at a time. One date is content, not a trap:
  ``/apollo/1969-07-20.gmi``, ``/books/1984/1.gmi`` or a camera's ``IMG_1081-1.jpg``
  is fetched like any page.

Segments are the non-empty parts of the path between slashes (``/a//b/`` has two). A
date is four digits, then a month 1-12, then optionally a day 1-31, joined by ``/`` or
``-``; its step is a day when it has one, else a month. Its neighbours are the URL with
the date moved by whole steps, written with and without leading zeros. Whether they are
known is the store's to say: :func:`calendar_neighbours` names the URLs to look up (none
for a URL without a date out of range), :func:`calendar_trap` decides from those found.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import date, timedelta

from geminibot.urls import URL

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
#: Dates in a row (a year of months, twelve days) under one URL on one host that make a
#: calendar of a date out of range next to them.
CALENDAR_RUN = 12

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


@dataclass(frozen=True, slots=True)
class DateInURL:
    """A date written in a URL: where (``start``, ``end`` in the text), and its parts."""

    start: int
    end: int
    when: date
    separator: str
    has_day: bool


def url_dates(text: str) -> list[DateInURL]:
    """The dates written in ``text`` (a URL, or a path and query), as described above."""
    found = []
    for m in _DATE.finditer(text):
        year, month = int(m[1]), int(m[3])
        day = int(m[4]) if m[4] else 1
        if year < 1 or not 1 <= month <= 12:
            continue
        try:
            when = date(year, month, day)
        except ValueError:  # 31 February is no date
            continue
        found.append(DateInURL(m.start(), m.end(), when, m[2], m[4] is not None))
    return found


def out_of_range(when: date, today: date) -> str | None:
    """Why ``when`` is a calendar's date out of range, None if it is in range."""
    if when.year < EARLIEST_YEAR:
        return f"a calendar date before {EARLIEST_YEAR}"
    if when > latest_date(today):
        return f"a calendar date more than {MAX_YEARS_AHEAD} years ahead"
    return None


def _moved(found: DateInURL, steps: int) -> date | None:
    if found.has_day:
        try:
            return found.when + timedelta(days=steps)
        except OverflowError:
            return None
    months = found.when.year * 12 + found.when.month - 1 + steps
    year, month = divmod(months, 12)
    return date(year, month + 1, 1) if 1 <= year <= 9999 else None


def _spellings(found: DateInURL, when: date) -> set[str]:
    sep = found.separator
    months = {str(when.month), f"{when.month:02d}"}
    if not found.has_day:
        return {f"{when.year:04d}{sep}{m}" for m in months}
    days = {str(when.day), f"{when.day:02d}"}
    return {f"{when.year:04d}{sep}{m}{sep}{d}" for m in months for d in days}


def _runs(url: URL, today: date) -> tuple[DateInURL, list[list[set[str]]]] | None:
    """The URL's first date out of range (in its path or query) and, for each direction
    (back, ahead), the spellings of the URL at 1 to :data:`CALENDAR_RUN` steps from it."""
    text = str(url)
    where = url.path if url.query is None else f"{url.path}?{url.query}"
    if not text.endswith(where):  # pragma: no cover - a URL ends with its path and query
        return None
    offset = len(text) - len(where)
    found = next((d for d in url_dates(where) if out_of_range(d.when, today)), None)
    if found is None:
        return None
    head, tail = text[: offset + found.start], text[offset + found.end :]
    runs = []
    for sign in (-1, 1):
        run = []
        for step in range(1, CALENDAR_RUN + 1):
            when = _moved(found, sign * step)
            if when is None:
                break
            run.append({head + text + tail for text in _spellings(found, when)})
        runs.append(run)
    return found, runs


def calendar_neighbours(url: URL, today: date) -> set[str]:
    """The URLs a store looks up for :func:`calendar_trap` (empty for a URL with no date
    out of range: it cannot be a calendar's)."""
    found = _runs(url, today)
    if found is None:
        return set()
    return {u for run in found[1] for step in run for u in step}


def calendar_trap(url: URL, today: date, known: Collection[str]) -> str | None:
    """The calendar trap, or None: ``url`` has a date out of range and the
    :data:`CALENDAR_RUN` dates before it or after it, under the same URL, are all among
    ``known`` (URLs the host already has; those of :func:`calendar_neighbours` suffice)."""
    found = _runs(url, today)
    if found is None:
        return None
    first, runs = found
    have = set(known)
    for run in runs:
        if len(run) == CALENDAR_RUN and all(step & have for step in run):
            return out_of_range(first.when, today)
    return None


def shape_trap(path: str) -> str | None:
    """The trap a URL's path looks like on its own (a loop, a maze), or None."""
    parts = segments(path)
    if len(parts) > MAX_SEGMENTS:
        return f"more than {MAX_SEGMENTS} path segments"
    counts: dict[str, int] = {}
    for part in parts:
        counts[part] = counts.get(part, 0) + 1
        if counts[part] > MAX_SEGMENT_REPEATS:
            return f"a path segment repeated more than {MAX_SEGMENT_REPEATS} times"
    return None


def deep_trap(path: str, deep_on_host: int, limit: int = MAX_DEEP_URLS_PER_HOST) -> str | None:
    """The deep-URL bound, for a URL whose host already has ``deep_on_host`` deep URLs."""
    if is_deep(path) and deep_on_host >= limit:
        return f"more than {limit} URLs deeper than {DEEP_SEGMENTS} segments on the host"
    return None


#: Longest URL accepted, in UTF-8 bytes: a Gemini request is at most 1024 bytes with CRLF.
MAX_URL_LENGTH = 1022
#: Most distinct query strings followed under one path (stops calendars and search forms).
MAX_QUERIES_PER_PATH = 16
#: Links further than this from a seed are not followed (seeds are depth 0).
DEFAULT_MAX_DEPTH = 16
#: Most live URLs one host may have in the frontier: a last bound, not a quota (Kennedy
#: allows 15,000 per authority; real large capsules need thousands). Generated mazes and
#: calendars are stopped earlier by their shape (:func:`shape_trap`, :func:`calendar_trap`).
MAX_URLS_PER_HOST = 15_000
#: How the per-host cap's trap reason ends (a trapped URL with it is queued once the host
#: has room again).
CAP_REASON = " URLs on the host"


@dataclass(frozen=True)
class FrontierLimits:
    """The trap bounds a crawl applies to the URLs it queues (:func:`trap_reason`)."""

    max_depth: int = DEFAULT_MAX_DEPTH
    max_url_length: int = MAX_URL_LENGTH
    max_queries_per_path: int = MAX_QUERIES_PER_PATH
    max_urls_per_host: int = MAX_URLS_PER_HOST
    max_deep_urls_per_host: int = MAX_DEEP_URLS_PER_HOST


def trap_reason(
    lim: FrontierLimits,
    url: URL,
    depth: int,
    host_total: int,
    queries_on_path: int | None,
    *,
    today: date,
    deep_on_host: int | None = None,
    known: Collection[str] = (),
) -> str | None:
    """The trap bound a new (parsed, normalised) URL breaks, or None: ``host_total`` URLs
    already queued on its host, ``queries_on_path`` query strings already on its path
    (None: it has no query), ``today`` the crawl clock's UTC date (for calendar dates),
    ``deep_on_host`` deep URLs on its host (None: not counted), ``known`` those of its
    :func:`~geminibot.store.traps.calendar_neighbours` the host already has."""
    if len(str(url).encode("utf-8", "surrogatepass")) > lim.max_url_length:
        return f"URL longer than {lim.max_url_length} bytes"
    if depth > lim.max_depth:
        return f"deeper than {lim.max_depth} links"
    if host_total >= lim.max_urls_per_host:
        return f"more than {lim.max_urls_per_host}{CAP_REASON}"
    if queries_on_path is not None and queries_on_path >= lim.max_queries_per_path:
        return f"more than {lim.max_queries_per_path} query strings on the path"
    shape = shape_trap(url.path) or calendar_trap(url, today, known)
    if shape is not None or deep_on_host is None:
        return shape
    return deep_trap(url.path, deep_on_host, lim.max_deep_urls_per_host)


#: How a trap bound's refusing decision is worded: a refusal so worded is not the site's policy.
TRAP_REASON_PREFIX = "trap: "


def trap_decision(reason: str) -> str:
    """The reason of the refusing decision recorded for a URL trapped by ``reason``."""
    return f"{TRAP_REASON_PREFIX}{reason}"
