"""Traps caught by their shape (geminibot.store.traps), each bound at its edge, and the
frontier recording a trapped URL's reason as a decision."""

import sqlite3
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from store_helpers import Frontier

from geminibot.store import traps
from geminibot.store.db import connect, transaction
from geminibot.store.traps import MAX_URLS_PER_HOST, FrontierLimits
from geminibot.urls import URL, normalise, parse_url

TODAY = date(2026, 11, 25)
NOON = datetime(2026, 11, 25, 12, tzinfo=UTC).timestamp()


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    return connect(tmp_path / "t.db")


def test_per_host_cap_is_kennedys_per_authority_limit() -> None:
    assert MAX_URLS_PER_HOST == 15_000
    assert FrontierLimits().max_urls_per_host == 15_000


def test_segment_repeats_edge() -> None:
    at_bound = "/a/b" * traps.MAX_SEGMENT_REPEATS
    assert traps.shape_trap(at_bound) is None
    over = at_bound + "/a"
    assert traps.shape_trap(over) == "a path segment repeated more than 3 times"


def test_segment_count_edge() -> None:
    at_bound = "".join(f"/s{k}" for k in range(traps.MAX_SEGMENTS))
    assert traps.shape_trap(at_bound) is None
    assert traps.shape_trap(at_bound + "/last") == "more than 12 path segments"
    assert traps.segments("/a//b/") == ["a", "b"]  # empty segments do not count


def url(text: str) -> URL:
    return parse_url(normalise(text))


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/calendar/1991/1", None),
        ("/calendar/1990/12", "a calendar date before 1991"),
        ("/log/1990-12-31.gmi", "a calendar date before 1991"),
        ("/log/1991-01-01.gmi", None),
        ("/cal?day=2028-11-25", None),  # exactly two years ahead
        ("/cal?day=2028-11-26", "a calendar date more than 2 years ahead"),
        ("/calendar/2028/11", None),  # a month means its first day
        ("/calendar/2028/12", "a calendar date more than 2 years ahead"),
        ("/p/1234/13", None),  # month 13: not a date
        ("/p/0001-02-31", None),  # 31 February: not a date
        ("/p/12345/01", None),  # five digits: not a year
    ],
)
def test_calendar_dates_edges(path: str, reason: str | None) -> None:
    """A date out of range is a calendar's once its run of dates is known on the host,
    never on its own."""
    u = url("gemini://a.test" + path)
    run = traps.calendar_neighbours(u, TODAY)
    assert traps.calendar_trap(u, TODAY, run) == reason
    assert traps.calendar_trap(u, TODAY, ()) is None
    assert bool(run) is (reason is not None)


def months(first: tuple[int, int], count: int, template: str) -> list[str]:
    """``count`` URLs of ``template`` (``{y}``, ``{m}``) for the months from ``first``."""
    year, month = first
    found = []
    for _ in range(count):
        found.append(template.format(y=year, m=month))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return found


@pytest.mark.parametrize("step", ["/calendar/{y}/{m}", "/calendar/{y}/{m:02d}", "/c/{y}-{m}.gmi"])
def test_a_calendar_is_a_run_of_dates_edge(step: str) -> None:
    """Twelve months in a row before 1991 are known: the thirteenth is a trap; eleven
    are not enough. Either direction, with or without leading zeros."""
    base = "gemini://a.test"
    back = url(base + step.format(y=1990, m=12))
    after = [base + u for u in months((1991, 1), traps.CALENDAR_RUN, step)]
    assert traps.calendar_trap(back, TODAY, after) == "a calendar date before 1991"
    assert traps.calendar_trap(back, TODAY, after[:-1]) is None
    assert traps.calendar_trap(back, TODAY, after[1:]) is None  # not next to it
    ahead = url(base + step.format(y=2029, m=1))
    before = [base + u for u in months((2028, 1), traps.CALENDAR_RUN, step)]
    assert traps.calendar_trap(ahead, TODAY, before) == "a calendar date more than 2 years ahead"
    other = [u.replace("a.test/c", "a.test/other") for u in after]
    assert traps.calendar_trap(back, TODAY, other) is None  # another URL's dates


@pytest.mark.parametrize(
    "path",
    [
        "/books/1984/1.gmi",
        "/books/1984/12.gmi",
        "/apollo/1969-07-20.gmi",
        "/photos/IMG_1081-1-675x483.jpg",
        "/history/1066-10-14.gmi",
    ],
)
def test_one_date_is_content_not_a_trap(path: str) -> None:
    """Dates in real capsules' URLs: a book's chapters, a historical day, a camera's file
    name; their siblings known on the host (other chapters, other days) change nothing."""
    u = url("gemini://a.test" + path)
    siblings = ["gemini://a.test/books/1984/" + f"{k}.gmi" for k in range(1, 31)] + [
        f"gemini://a.test/apollo/1969-07-{d:02d}.gmi" for d in (16, 19, 21, 24)
    ]
    assert traps.shape_trap(u.path) is None
    assert traps.calendar_trap(u, TODAY, siblings) is None


def test_latest_date_on_29_february() -> None:
    assert traps.latest_date(date(2028, 2, 29)) == date(2030, 2, 28)


def test_deep_urls_edge() -> None:
    deep = "/a/b/c/d/e"
    assert traps.is_deep(deep) and not traps.is_deep("/a/b/c/d")
    assert traps.deep_trap(deep, traps.MAX_DEEP_URLS_PER_HOST - 1) is None
    assert traps.deep_trap(deep, traps.MAX_DEEP_URLS_PER_HOST) == (
        "more than 300 URLs deeper than 4 segments on the host"
    )
    assert traps.deep_trap("/a/b/c/d", 10_000) is None  # shallow URLs are not counted


def test_frontier_records_trap_as_decision(conn: sqlite3.Connection) -> None:
    f = Frontier(conn, lambda: NOON)
    with transaction(conn):
        assert f.add("gemini://a.test/calendar/2026/11", 1) == "queued"
        for month in months((1991, 1), traps.CALENDAR_RUN, "gemini://a.test/calendar/{y}/{m}"):
            assert f.add(month, 1) == "queued"
        assert f.add("gemini://a.test/calendar/1990/12", 1) == (
            "trapped: a calendar date before 1991"
        )
        assert f.add("gemini://a.test/x/x/x/x", 1).startswith("trapped: a path segment")
    assert f.state_of("gemini://a.test/calendar/1990/12") == (
        "trapped",
        "a calendar date before 1991",
    )
    rows = conn.execute("SELECT url, allowed, reason, at FROM decisions ORDER BY id").fetchall()
    assert rows == [
        ("gemini://a.test/calendar/1990/12", 0, "trap: a calendar date before 1991", NOON),
        ("gemini://a.test/x/x/x/x", 0, "trap: a path segment repeated more than 3 times", NOON),
    ]


def test_frontier_future_dates_follow_its_clock(conn: sqlite3.Connection) -> None:
    later = datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    with transaction(conn):
        for host in ("a.test", "b.test"):
            for month in months((2030, 1), traps.CALENDAR_RUN, f"gemini://{host}/{{y}}/{{m:02d}}"):
                Frontier(conn, lambda: later).add(month, 1)
        assert Frontier(conn, lambda: NOON).add("gemini://a.test/2031/01", 1).startswith("trapped")
        assert Frontier(conn, lambda: later).add("gemini://b.test/2031/01", 1) == "queued"


def test_frontier_deep_urls_per_host_edge(conn: sqlite3.Connection) -> None:
    f = Frontier(conn, lambda: NOON)
    bound = traps.MAX_DEEP_URLS_PER_HOST
    with transaction(conn):
        for k in range(bound - 1):
            assert f.add(f"gemini://m.test/a/b/c/d/{k}", 1) == "queued"
        assert f.add("gemini://m.test/a/b/c/d/e/f", 1) == "queued"  # the 300th deep URL
        assert f.add("gemini://m.test/a/b/c/d/last", 1) == (
            "trapped: more than 300 URLs deeper than 4 segments on the host"
        )
        assert f.add("gemini://m.test/a/b/c/shallow", 1) == "queued"
        assert f.add("gemini://n.test/a/b/c/d/e", 1) == "queued"  # another host


def test_frontier_deep_count_survives_a_restart(conn: sqlite3.Connection) -> None:
    limits = FrontierLimits(max_deep_urls_per_host=2)
    with transaction(conn):
        first = Frontier(conn, lambda: NOON, limits)
        assert first.add("gemini://m.test/a/b/c/d/1", 1) == "queued"
        assert first.add("gemini://m.test/a/b/c/d/2", 1) == "queued"
    again = Frontier(conn, lambda: NOON, limits)  # counts the table afresh
    with transaction(conn):
        assert again.add("gemini://m.test/a/b/c/d/3", 1).startswith("trapped: more than 2 URLs")
