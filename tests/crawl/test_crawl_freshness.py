"""Keeping the index fresh: revisits on a learned interval, unchanged bodies not re-indexed,
51 removes, failures retried with back-off, policy files re-read after 24 hours, logs
pruned, the per-host cap over live URLs, duplicates under one canonical URL, normalised
URLs queued once. A scripted site under trio's mock clock; days pass on a fake clock."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import trio
from crawl_fakes import FakeSite, gmi
from crawlers import sqlite_crawler

from geminibot.crawl.adapters import FetchResult
from geminibot.crawl.progress import Progress
from geminibot.crawl.settings import CrawlOptions
from geminibot.index import search, stats
from geminibot.policy.outcomes import MAX_CACHE_SECONDS
from geminibot.store.crawlstore import SqliteStore
from geminibot.store.database import Database
from geminibot.store.db import connect
from geminibot.store.freshness import (
    DAY,
    INITIAL_REVISIT,
    LOG_RETENTION_DAYS,
    MAX_ATTEMPTS,
    MAX_REVISIT,
    MIN_REVISIT,
    NOT_FOUND_FIRST,
    RETRY_BASE,
    VANISHED_AFTER,
    VANISHED_FAILURES,
    next_interval,
    retry_delay,
)
from geminibot.store.recheck import recheck
from geminibot.store.traps import FrontierLimits

T0 = 1.7e9
ROBOTS = FetchResult(20, "text/plain", b"User-agent: *\nDisallow: /private/\n")


class FakeTime:
    """Wall-clock seconds: a settable day offset plus trio's mock clock."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return T0 + self.offset + trio.current_time()


async def crawl(
    db: Path, site: FakeSite, seeds: list[str], now: FakeTime, **kw: object
) -> tuple[Progress, sqlite3.Connection]:
    conn = connect(db)
    opts = CrawlOptions(test_range=True, **kw)  # type: ignore[arg-type]
    crawler = sqlite_crawler(conn, site.fetch, opts, wall_clock=now)
    crawler.seed(seeds)
    return await crawler.run(), conn


def site() -> dict[str, FetchResult | list[FetchResult]]:
    return {
        "gemini://a.test/robots.txt": ROBOTS,
        "gemini://a.test/": gmi("# Home\n=> /stable.gmi\n=> /moving.gmi\n=> /doomed.gmi\n"),
        "gemini://a.test/stable.gmi": gmi("# Stable\nunchanging granite\n"),
        "gemini://a.test/moving.gmi": gmi("# Moving\nfirst draft\n"),
        "gemini://a.test/doomed.gmi": gmi("# Doomed\nephemeral mayfly\n"),
    }


def ids(conn: sqlite3.Connection) -> dict[str, int]:
    return dict(conn.execute("SELECT url, id FROM pages").fetchall())


def test_interval_rule_at_its_bounds() -> None:
    assert next_interval(None, changed=True) == INITIAL_REVISIT
    assert next_interval(DAY, changed=True) == DAY / 2
    assert next_interval(DAY, changed=False) == 2 * DAY
    assert next_interval(MIN_REVISIT, changed=True) == MIN_REVISIT
    assert next_interval(MAX_REVISIT, changed=False) == MAX_REVISIT
    assert retry_delay(1) == RETRY_BASE and retry_delay(2) == 2 * RETRY_BASE
    assert retry_delay(MAX_ATTEMPTS - 1) is not None and retry_delay(MAX_ATTEMPTS) is None


async def test_revisit_reindexes_changed_skips_unchanged_and_52_removes(
    tmp_path: Path, autojump_clock: object
) -> None:
    pages, now, db = site(), FakeTime(), tmp_path / "c.db"
    fake = FakeSite(pages)
    _, conn = await crawl(db, fake, ["gemini://a.test/"], now)
    before = ids(conn)
    assert [r.url for r in search(conn, "mayfly")] == ["gemini://a.test/doomed.gmi"]
    conn.close()

    # Nothing is due an hour later: a second run fetches nothing.
    now.offset = 3600.0
    fake.log.clear()
    progress, conn = await crawl(db, fake, ["gemini://a.test/"], now)
    assert progress.revisits == 0 and fake.urls() == []
    conn.close()

    # A day later every page is due: one changed, one answers 52, the rest are the same.
    pages["gemini://a.test/moving.gmi"] = gmi("# Moving\nsecond draft, revised\n")
    pages["gemini://a.test/doomed.gmi"] = FetchResult(52, "gone")
    now.offset = INITIAL_REVISIT + 1
    fake.log.clear()
    progress, conn = await crawl(db, fake, ["gemini://a.test/"], now)
    assert set(fake.urls()) >= set(before)
    assert progress.revisits == 4 and progress.unchanged == 2 and progress.gone == 1
    after = ids(conn)
    assert after["gemini://a.test/stable.gmi"] == before["gemini://a.test/stable.gmi"]
    assert after["gemini://a.test/"] == before["gemini://a.test/"]
    assert after["gemini://a.test/moving.gmi"] != before["gemini://a.test/moving.gmi"]
    assert [r.url for r in search(conn, "revised")] == ["gemini://a.test/moving.gmi"]
    assert search(conn, "mayfly") == []  # 52: out of the index
    assert search(conn, "granite")  # unchanged: still found
    intervals = dict(conn.execute("SELECT url, revisit_interval FROM urls").fetchall())
    assert intervals["gemini://a.test/stable.gmi"] == 2 * INITIAL_REVISIT  # unchanged: doubled
    assert intervals["gemini://a.test/moving.gmi"] == INITIAL_REVISIT / 2  # changed: halved
    store = SqliteStore(conn, now)
    assert store.state_of("gemini://a.test/doomed.gmi") == ("gone", "status 52")
    (total,) = conn.execute("SELECT urls_total FROM hosts WHERE host = 'a.test'").fetchone()
    assert total == 3  # the gone URL no longer counts against the per-host cap
    fetched = dict(conn.execute("SELECT url, fetched_at FROM pages").fetchall())
    assert fetched["gemini://a.test/stable.gmi"] >= T0 + INITIAL_REVISIT  # seen again
    data = stats(Database(str(db), conn, path=db), now=T0 + INITIAL_REVISIT + 2 * DAY)
    assert data["age"]["1-7 days"] == 4 and data["age"]["under 1 day"] == 0
    conn.close()

    # --refresh: everything again at once (the gone URL never).
    fake.log.clear()
    progress, conn = await crawl(db, fake, ["gemini://a.test/"], now, refresh=True)
    assert progress.revisits == 3 and "gemini://a.test/doomed.gmi" not in fake.urls()
    assert progress.unchanged == 3


async def test_51_is_asked_again_growing_leaves_the_index_late_and_comes_back(
    tmp_path: Path, autojump_clock: object
) -> None:
    pages, now, db = site(), FakeTime(), tmp_path / "c.db"
    fake = FakeSite(pages)
    doomed, moving = "gemini://a.test/doomed.gmi", "gemini://a.test/moving.gmi"
    _, conn = await crawl(db, fake, ["gemini://a.test/"], now)
    conn.close()

    async def at(day: float, **kw: object) -> tuple[Progress, sqlite3.Connection, Any]:
        now.offset = day * DAY
        fake.log.clear()
        progress, conn = await crawl(db, fake, ["gemini://a.test/"], now, **kw)
        row = conn.execute(
            "SELECT state, misses, next_visit FROM urls WHERE url = ?", (doomed,)
        ).fetchone()
        return progress, conn, row

    def asked() -> list[str]:  # the pages asked (not the policy files)
        return [url for url in fake.urls() if not url.endswith(".txt")]

    def near(when: float, day: float) -> bool:  # (trio's clock runs on a little)
        return abs(when - (T0 + day * DAY)) < 3600

    # Day 1: it answers 51. Not found, not gone: still searchable, asked again in a day.
    pages[doomed] = FetchResult(51, "not found")
    progress, conn, row = await at(1)
    assert (progress.not_found, progress.gone) == (1, 0)
    assert row[:2] == ("not_found", 1) and near(row[2], 1 + NOT_FOUND_FIRST / DAY)
    assert [r.url for r in search(conn, "mayfly")] == [doomed]
    (total,) = conn.execute("SELECT urls_total FROM hosts WHERE host = 'a.test'").fetchone()
    assert total == 4  # still a live URL of the host
    conn.close()
    # Day 2: missing again, still in the index; the interval doubles.
    _, conn, row = await at(2)
    assert asked() == [doomed]
    assert row[:2] == ("not_found", 2) and near(row[2], 4)
    assert search(conn, "mayfly")
    conn.close()
    # Day 4: the third answer in a row, 3 days after the first: out of the index.
    _, conn, row = await at(4)
    assert row[:2] == ("not_found", 3) and near(row[2], 8) and fake.urls().count(doomed) == 1
    assert search(conn, "mayfly") == []
    # A link to it found again (on a page that changed, rechecked here) makes it due a
    # day after its last answer, not 4 days after.
    pages[moving] = gmi("# Moving\n=> /doomed.gmi the mayfly again\n")
    database = Database(str(db), conn, path=db)  # (the crawl's connection, between runs)
    assert recheck(database, moving, "a.test", is_url=True, now=now()).due == 1
    conn.close()
    _, conn, row = await at(4.5)
    assert asked() == [moving] and row[0] == "not_found" and near(row[2], 5)
    conn.close()
    # It is back (and --refresh asks a not-found URL too): searchable, the misses over.
    pages[doomed] = gmi("# Doomed\nephemeral mayfly returns\n")
    _, conn, row = await at(4.6, refresh=True)
    assert row[:2] == ("done", 0) and [r.url for r in search(conn, "returns")] == [doomed]
    conn.close()


async def test_failures_are_retried_with_back_off_then_given_up(
    tmp_path: Path, autojump_clock: object
) -> None:
    now, db = FakeTime(), tmp_path / "c.db"
    pages: dict[str, FetchResult | list[FetchResult]] = {
        "gemini://a.test/robots.txt": ROBOTS,
        "gemini://a.test/": gmi("# Home\n=> /flaky.gmi\n"),
        "gemini://a.test/flaky.gmi": FetchResult(None, error="connection reset"),
    }
    fake = FakeSite(pages)
    url = "gemini://a.test/flaky.gmi"
    waits = []
    for attempt in range(1, MAX_ATTEMPTS + 1):
        _, conn = await crawl(db, fake, ["gemini://a.test/"], now)
        state, next_visit, attempts = conn.execute(
            "SELECT state, next_visit, attempts FROM urls WHERE url = ?", (url,)
        ).fetchone()
        assert (state, attempts) == ("failed", attempt)
        conn.close()
        if next_visit is None:
            break
        waits.append(next_visit - now())
        now.offset = next_visit - T0 - trio.current_time() + 1
    assert attempt == MAX_ATTEMPTS  # bounded: not retried after MAX_ATTEMPTS
    assert [round(w / RETRY_BASE) for w in waits] == [1, 2, 4, 8]
    assert fake.urls().count(url) == MAX_ATTEMPTS


async def test_a_vanished_host_leaves_the_index_and_comes_back(
    tmp_path: Path, autojump_clock: object
) -> None:
    """Daily runs after b.test stops answering: its robots.txt fails once a run (its
    pages wait in the queue); its pages stay found until it has been unanswered for
    VANISHED_AFTER (and VANISHED_FAILURES requests), then leave the index while a.test's
    stay; once it answers again, its unchanged pages are indexed again."""
    pages = site()
    other = {
        "gemini://b.test/robots.txt": ROBOTS,
        "gemini://b.test/": gmi("# Bee\nbumblebee meadow\n=> /hive.gmi\n"),
        "gemini://b.test/hive.gmi": gmi("# Hive\nhoneycomb\n"),
    }
    pages.update(other)
    now, db, fake = FakeTime(), tmp_path / "c.db", FakeSite(pages)
    seeds = ["gemini://a.test/", "gemini://b.test/"]
    _, conn = await crawl(db, fake, seeds, now)
    assert [r.url for r in search(conn, "honeycomb")] == ["gemini://b.test/hive.gmi"]
    conn.close()
    for url in other:
        pages[url] = FetchResult(None, error="connection refused")
    days = int(VANISHED_AFTER // DAY) + 1
    for day in range(1, days + 1):
        now.offset = day * DAY
        progress, conn = await crawl(db, fake, seeds, now)
        gone = day == days  # its first failure was on day 1: VANISHED_AFTER ago on day 8
        assert progress.vanished == (2 if gone else 0), day
        assert bool(search(conn, "honeycomb")) != gone and bool(search(conn, "bumblebee")) != gone
        assert search(conn, "granite")  # a.test answers: its pages stay
        before = ids(conn)
        conn.close()
    assert days - 1 >= VANISHED_FAILURES
    pages.update(other)  # back, with the same pages
    now.offset = (days + 1) * DAY
    progress, conn = await crawl(db, fake, seeds, now)
    assert [r.url for r in search(conn, "honeycomb")] == ["gemini://b.test/hive.gmi"]
    assert progress.vanished == 0
    after = ids(conn)
    for url in ("gemini://b.test/", "gemini://b.test/hive.gmi"):  # re-indexed, though the same
        assert after[url] != before[url]
    conn.close()


async def test_robots_txt_is_read_again_after_24_hours(
    tmp_path: Path, autojump_clock: object
) -> None:
    """One run lasting two days (an hour between requests): robots.txt is fetched again
    once its cached copy is 24 hours old, and what it now says is obeyed."""
    pages: dict[str, FetchResult | list[FetchResult]] = {
        "gemini://a.test/robots.txt": [
            FetchResult(20, "text/plain", b"User-agent: *\nCrawl-delay: 3600\n"),
            FetchResult(20, "text/plain", b"User-agent: *\nCrawl-delay: 3600\nDisallow: /late/\n"),
        ],
        "gemini://a.test/": gmi("".join(f"=> /late/{n}.gmi\n" for n in range(40))),
    }
    for n in range(40):
        pages[f"gemini://a.test/late/{n}.gmi"] = gmi(f"# Page {n}\n")
    fake = FakeSite(pages)
    now = FakeTime()
    _, conn = await crawl(tmp_path / "c.db", fake, ["gemini://a.test/"], now)
    reads = [t for t, u in fake.log if u == "gemini://a.test/robots.txt"]
    assert len(reads) == 2
    assert MAX_CACHE_SECONDS <= reads[1] - reads[0] < MAX_CACHE_SECONDS + 2 * 3600
    fetched = [u for t, u in fake.log if "/late/" in u]
    assert all(t < reads[1] for t, u in fake.log if "/late/" in u)
    assert 0 < len(fetched) < 40  # refused from the second reading on
    refused = conn.execute("SELECT count(*) FROM urls WHERE state = 'refused'").fetchone()[0]
    assert refused == 40 - len(fetched)


async def test_logs_are_pruned_after_their_days(tmp_path: Path, autojump_clock: object) -> None:
    now, db = FakeTime(), tmp_path / "c.db"
    conn = connect(db)
    cutoff = T0 - LOG_RETENTION_DAYS * DAY
    for at in (cutoff - 10, cutoff + 10):
        conn.execute(
            "INSERT INTO fetches (url, host, status, started_at, duration)"
            " VALUES ('gemini://a.test/old', 'a.test', 20, ?, 0)",
            (at,),
        )
        conn.execute(
            "INSERT INTO decisions (url, host, allowed, reason, at)"
            " VALUES ('gemini://a.test/old', 'a.test', 1, 'x', ?)",
            (at,),
        )
    conn.close()
    _, conn = await crawl(db, FakeSite(site()), ["gemini://a.test/"], now)
    old = "url = 'gemini://a.test/old'"
    assert conn.execute(f"SELECT started_at FROM fetches WHERE {old}").fetchall() == [
        (cutoff + 10,)
    ]
    assert conn.execute(f"SELECT at FROM decisions WHERE {old}").fetchall() == [(cutoff + 10,)]


async def test_duplicates_collapse_under_the_canonical_url(
    tmp_path: Path, autojump_clock: object
) -> None:
    body = "# Same\nidentical twins\n"
    pages: dict[str, FetchResult | list[FetchResult]] = {
        "gemini://a.test/robots.txt": ROBOTS,
        # the longest URL is met first; the shortest becomes the canonical one (searched
        # for "identical": a link's URL words make the home page match "twins" too)
        "gemini://a.test/": gmi("=> /copy/of/twins.gmi a\n=> /twins.gmi?ref=x b\n=> /t.gmi c\n"),
        "gemini://a.test/copy/of/twins.gmi": gmi(body),
        "gemini://a.test/twins.gmi?ref=x": gmi(body),
        "gemini://a.test/t.gmi": gmi(body),
    }
    now, db = FakeTime(), tmp_path / "c.db"
    fake = FakeSite(pages)
    _, conn = await crawl(db, fake, ["gemini://a.test/"], now)
    assert [r.url for r in search(conn, "identical")] == ["gemini://a.test/t.gmi"]
    store = SqliteStore(conn, now)
    assert store.aliases("gemini://a.test/t.gmi") == [
        "gemini://a.test/copy/of/twins.gmi",
        "gemini://a.test/twins.gmi?ref=x",
    ]
    assert stats(Database(str(db), conn, path=db))["duplicates"] == 2
    conn.close()

    # The canonical page changes: its aliases are fetched again the same run, and one of
    # them becomes the canonical URL of the old body.
    pages["gemini://a.test/t.gmi"] = gmi("# Other\nsomething else\n")
    now.offset = INITIAL_REVISIT + 1
    _, conn = await crawl(db, fake, ["gemini://a.test/"], now)
    assert [r.url for r in search(conn, "identical")] == ["gemini://a.test/twins.gmi?ref=x"]
    assert SqliteStore(conn, now).aliases("gemini://a.test/twins.gmi?ref=x") == [
        "gemini://a.test/copy/of/twins.gmi"
    ]
    assert [r.url for r in search(conn, "something")] == ["gemini://a.test/t.gmi"]


async def test_normalised_urls_are_queued_once(tmp_path: Path, autojump_clock: object) -> None:
    variants = [
        "gemini://A.TEST:1965/x.gmi",  # host case, default port
        "/./x.gmi",  # dot segments
        "/y/../x.gmi",
        "/%78.gmi",  # an escaped unreserved character
        "gemini://a.test/x.gmi#part",  # fragment
    ]
    pages: dict[str, FetchResult | list[FetchResult]] = {
        "gemini://a.test/robots.txt": ROBOTS,
        "gemini://a.test/": gmi(
            "".join(f"=> {v}\n" for v in variants)
            + "=> gemini://a.test\n=> /%7euser/\n=> /~user/\n"
        ),
        "gemini://a.test/x.gmi": gmi("# X\n"),
        "gemini://a.test/~user/": gmi("# User\n"),
    }
    now = FakeTime()
    fake = FakeSite(pages)
    # the seed itself is not normalised by the caller here: the frontier does it
    _, conn = await crawl(tmp_path / "c.db", fake, ["gemini://a.test:1965"], now)
    urls = sorted(u for (u,) in conn.execute("SELECT url FROM urls"))
    assert urls == ["gemini://a.test/", "gemini://a.test/x.gmi", "gemini://a.test/~user/"]
    assert sorted(fake.urls()).count("gemini://a.test/x.gmi") == 1


async def test_per_host_cap_counts_live_urls(tmp_path: Path, autojump_clock: object) -> None:
    """A URL that answered 51 leaves the cap's count: a URL trapped by the cap earlier is
    queued when it is met again."""
    pages: dict[str, FetchResult | list[FetchResult]] = {
        "gemini://a.test/robots.txt": ROBOTS,
        "gemini://a.test/": gmi("=> /a.gmi\n=> /b.gmi\n=> /c.gmi\n"),
        "gemini://a.test/a.gmi": gmi("# A\n"),
        "gemini://a.test/b.gmi": gmi("# B\n"),
        "gemini://a.test/c.gmi": gmi("# C\n"),
    }
    now, db = FakeTime(), tmp_path / "c.db"
    fake = FakeSite(pages)
    limits = FrontierLimits(max_urls_per_host=3)
    _, conn = await crawl(db, fake, ["gemini://a.test/"], now, limits=limits)
    store = SqliteStore(conn, now)
    assert store.state_of("gemini://a.test/c.gmi") == ("trapped", "more than 3 URLs on the host")
    conn.close()
    pages["gemini://a.test/a.gmi"] = FetchResult(52, "gone for good")
    now.offset = INITIAL_REVISIT + 1
    _, conn = await crawl(db, fake, ["gemini://a.test/"], now, limits=limits, refresh=True)
    store = SqliteStore(conn, now)
    assert store.state_of("gemini://a.test/a.gmi") == ("gone", "status 52")
    # the home page was unchanged, so its links were not met again: --refresh of a changed
    # home page meets them; the next run with a changed home page queues /c.gmi
    pages["gemini://a.test/"] = gmi("# Home again\n=> /a.gmi\n=> /b.gmi\n=> /c.gmi\n")
    conn.close()
    _, conn = await crawl(db, fake, ["gemini://a.test/"], now, limits=limits, refresh=True)
    assert SqliteStore(conn, now).state_of("gemini://a.test/c.gmi") == ("done", None)


async def test_an_old_database_is_revisited_a_day_after_its_crawl(
    tmp_path: Path, autojump_clock: object
) -> None:
    """A database from before revisits (schema 1): its finished URLs are due one day after
    they were last changed, and then fetched again like any other."""
    from test_crawl_policy_files import old_crawl

    db = tmp_path / "old.db"
    old_crawl(db)
    conn = connect(db)  # upgraded in place
    due = conn.execute(
        "SELECT next_visit - updated_at FROM urls WHERE url = 'gemini://a.test/'"
    ).fetchone()
    assert due == (INITIAL_REVISIT,)
    conn.close()
    pages: dict[str, FetchResult | list[FetchResult]] = {
        "gemini://a.test/robots.txt": ROBOTS,
        "gemini://a.test/": gmi("# A\n"),
    }
    fake, now = FakeSite(pages), FakeTime()
    now.offset = INITIAL_REVISIT  # the old home page was fetched at T0 - 100
    progress, conn = await crawl(db, fake, ["gemini://a.test/"], now)
    assert progress.revisits == 1 and "gemini://a.test/" in fake.urls()
    # the old row had no text indexed; the revisit indexed it
    assert conn.execute(
        "SELECT text_indexed FROM pages WHERE url = 'gemini://a.test/'"
    ).fetchone() == (1,)
