"""The crawl loop against a scripted site (injected fetcher), under trio's mock clock."""

import itertools
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
import trio
from crawl_fakes import FakeSite, generated_site, gmi
from crawlers import sqlite_crawler

from geminibot.crawl.adapters import FetchResult
from geminibot.crawl.crawler import Crawler
from geminibot.crawl.politeness import RATE_STEP, START_DELAY
from geminibot.crawl.settings import ConfigMismatch, CrawlOptions
from geminibot.index import search, stats
from geminibot.store.database import Database
from geminibot.store.db import connect
from geminibot.store.traps import FrontierLimits

ROBOTS = FetchResult(20, "text/plain", b"User-agent: indexer\nDisallow: /private/\n")


def site_a() -> dict[str, FetchResult | list[FetchResult]]:
    return {
        "gemini://a.test/robots.txt": ROBOTS,
        "gemini://a.test/": gmi(
            "# Home\nHello garden.\n=> /b.gmi B\n=> /private/x.gmi secret\n"
            "=> gemini://elsewhere.test/ other host\n=> https://example.org/ web\n=> /copy.gmi\n"
            "=> /moved\n=> /img.png picture\n"
        ),
        "gemini://a.test/b.gmi": gmi("# Bee\n## Pollination\nbees visit flowers\n=> / home\n"),
        "gemini://a.test/copy.gmi": gmi("# Bee\n## Pollination\nbees visit flowers\n=> / home\n"),
        "gemini://a.test/moved": FetchResult(31, "/b2.gmi"),
        "gemini://a.test/b2.gmi": gmi("# Moved here\n"),
        "gemini://a.test/img.png": FetchResult(20, "image/png", b"\x89PNG..."),
    }


def policy_files(host: str) -> list[str]:
    return [f"gemini://{host}/{name}" for name in ("robots.txt", "robots2.txt", "agents.txt")]


def mock_wall_clock() -> float:
    """Wall-clock time that follows trio's mock clock, the same for every crawl in a test."""
    return 1.7e9 + trio.current_time()


async def crawl(
    db: Path, site: FakeSite, seeds: list[str], **kw: object
) -> tuple[Crawler, sqlite3.Connection]:
    conn = connect(db)
    crawler = sqlite_crawler(conn, site.fetch, CrawlOptions(**kw), wall_clock=mock_wall_clock)  # type: ignore[arg-type]
    crawler.seed(seeds)
    await crawler.run()
    return crawler, conn


async def test_crawl_obeys_robots_and_indexes(tmp_path: Path, autojump_clock: object) -> None:
    site = FakeSite(site_a())
    crawler, conn = await crawl(tmp_path / "c.db", site, ["gemini://a.test/"], test_range=True)
    urls = site.urls()
    assert urls[0] == "gemini://a.test/robots.txt"
    assert set(urls) == {
        "gemini://a.test/robots.txt",
        "gemini://a.test/robots2.txt",
        "gemini://a.test/agents.txt",
        "gemini://a.test/",
        "gemini://a.test/b.gmi",
        "gemini://a.test/copy.gmi",
        "gemini://a.test/moved",
        "gemini://a.test/b2.gmi",
        "gemini://a.test/img.png",
    }
    assert len(urls) == len(set(urls))  # nothing fetched twice
    assert crawler.store.state_of("gemini://a.test/private/x.gmi") == (
        "refused",
        conn.execute("SELECT reason FROM decisions WHERE NOT allowed").fetchone()[0],
    )
    assert [r.url for r in search(conn, "pollination")] == ["gemini://a.test/b.gmi"]
    row = conn.execute(
        "SELECT duplicate_of FROM pages WHERE url = 'gemini://a.test/copy.gmi'"
    ).fetchone()
    assert row == ("gemini://a.test/b.gmi",)
    redirect = conn.execute(
        "SELECT status, redirect_to FROM pages WHERE url = 'gemini://a.test/moved'"
    ).fetchone()
    assert redirect == (31, "gemini://a.test/b2.gmi")
    data = stats(Database("c.db", conn, path=tmp_path / "c.db"))
    assert data["refusals"] == 1
    assert data["mime"]["image/png"] == 1
    assert data["robots"] == {
        "agents.txt unavailable": 1,
        "robots.txt success": 1,
        "robots2.txt unavailable": 1,
    }
    assert site.max_in_flight_per_host == 1


async def test_default_delay_between_requests(tmp_path: Path, autojump_clock: object) -> None:
    site = FakeSite(site_a(), latency=0.5)
    await crawl(tmp_path / "c.db", site, ["gemini://a.test/"], max_pages=3)
    times = [t for t, _ in site.log]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(times) == 6  # robots.txt, robots2.txt, agents.txt and three pages
    # the request, then the address's wait: its rate started at the rule of thumb and
    # each quick answer (policy files included) added a step
    rates = [1 / START_DELAY + RATE_STEP * n for n in range(1, 6)]
    assert gaps == pytest.approx([0.5 + 1 / rate for rate in rates])


async def test_crawl_delay_and_slow_down(tmp_path: Path, autojump_clock: object) -> None:
    pages = site_a()
    pages["gemini://a.test/robots.txt"] = FetchResult(
        20, "text/plain", b"User-agent: *\nCrawl-delay: 3\n"
    )
    pages["gemini://a.test/b.gmi"] = [FetchResult(44, "7"), FetchResult(44, "1"), gmi("# Bee\n")]
    site = FakeSite(pages)
    await crawl(tmp_path / "c.db", site, ["gemini://a.test/"], test_range=True)
    log = site.log
    for (t0, _), (t1, _) in itertools.pairwise(log):
        assert t1 - t0 >= 3.0  # Crawl-delay, even on a test range
    b_times = [t for t, u in log if u == "gemini://a.test/b.gmi"]
    assert len(b_times) == 3
    assert b_times[1] - b_times[0] >= 7.0  # the 44's own wait
    assert b_times[2] - b_times[1] >= 3.0  # second 44: max(1 s, back-off 2 s), then delay


async def test_unreachable_robots_skips_host(tmp_path: Path, autojump_clock: object) -> None:
    pages = site_a()
    pages["gemini://a.test/robots.txt"] = FetchResult(None, error="connection refused")
    site = FakeSite(pages)
    crawler, conn = await crawl(tmp_path / "c.db", site, ["gemini://a.test/"], test_range=True)
    assert site.urls() == ["gemini://a.test/robots.txt"]
    assert "unreachable" in crawler.progress.hosts_skipped["a.test"]
    assert crawler.store.queued() == 1  # the seed waits for a later run
    database = Database("c.db", conn, path=tmp_path / "c.db")
    assert stats(database)["robots"] == {"robots.txt unreachable": 1}


async def test_missing_robots_allows_all(tmp_path: Path, autojump_clock: object) -> None:
    pages = site_a()
    del pages["gemini://a.test/robots.txt"]
    site = FakeSite(pages)
    await crawl(tmp_path / "c.db", site, ["gemini://a.test/"], test_range=True)
    assert "gemini://a.test/private/x.gmi" in site.urls()


async def test_absurd_slow_down_skips_host(tmp_path: Path, autojump_clock: object) -> None:
    pages = site_a()
    pages["gemini://a.test/"] = FetchResult(44, "86400")
    site = FakeSite(pages)
    crawler, _ = await crawl(tmp_path / "c.db", site, ["gemini://a.test/"], test_range=True)
    assert site.urls() == [*policy_files("a.test"), "gemini://a.test/"]
    assert "a.test" in crawler.progress.hosts_skipped
    assert crawler.store.state_of("gemini://a.test/") == ("queued", None)


async def test_concurrency_across_hosts(tmp_path: Path, autojump_clock: object) -> None:
    site = FakeSite(generated_site(4, 10), latency=1.0)
    crawler, _ = await crawl(
        tmp_path / "c.db",
        site,
        [f"gemini://h{h}.test/" for h in range(4)],
        test_range=True,
        concurrency=4,
    )
    assert site.max_in_flight_per_host == 1
    assert len(site.urls()) == len(set(site.urls())) == 4 * (3 + 1 + 12)
    assert crawler.progress.pages == 4 * 13
    # four hosts in parallel: about a quarter of the sequential time
    assert trio.current_time() < 4 * 14 * 1.0 / 2


async def test_max_pages_and_depth(tmp_path: Path, autojump_clock: object) -> None:
    site = FakeSite(generated_site(1, 50))
    _, conn = await crawl(
        tmp_path / "c.db", site, ["gemini://h0.test/"], test_range=True, max_pages=5
    )
    assert conn.execute("SELECT count(*) FROM pages").fetchone()[0] == 5
    site2 = FakeSite(generated_site(1, 50))
    await crawl(
        tmp_path / "d.db",
        site2,
        ["gemini://h0.test/"],
        test_range=True,
        limits=FrontierLimits(max_depth=2),
    )
    assert set(site2.urls()) == {
        *policy_files("h0.test"),
        "gemini://h0.test/",
        "gemini://h0.test/0.gmi",
        "gemini://h0.test/1.gmi",
        "gemini://h0.test/2.gmi",
    }


async def test_resume_fetches_nothing_twice(tmp_path: Path, autojump_clock: object) -> None:
    """A crawl stopped and resumed fetches what one whole crawl does, each URL once (no
    depth bound within reach: which link finds a page first depends on the order)."""
    site = FakeSite(generated_site(2, 30))
    seeds = ["gemini://h0.test/", "gemini://h1.test/"]
    deep = FrontierLimits(max_depth=100)
    _, conn = await crawl(
        tmp_path / "c.db", site, seeds, test_range=True, max_pages=20, limits=deep
    )
    conn.close()
    _, conn = await crawl(tmp_path / "c.db", site, seeds, test_range=True, limits=deep)
    urls = site.urls()
    assert len(urls) == len(set(urls))  # robots.txt came from the cache the second time
    whole = FakeSite(generated_site(2, 30))
    _, conn2 = await crawl(tmp_path / "d.db", whole, seeds, test_range=True, limits=deep)
    assert sorted(urls) == sorted(whole.urls())
    assert pages_of(conn) == pages_of(conn2)


async def test_a_fetcher_that_never_waits_still_lets_the_other_hosts_go(
    tmp_path: Path, autojump_clock: object
) -> None:
    """Each request is a schedule point whatever the fetcher (taking its address and a
    place in flight yields): with a fetcher that answers at once (no latency) and no
    delay (the test range), a worker that never yielded would hold the event loop until
    --max-pages, and the other host would never be asked (seen when taking a free place
    was made a cancel point only)."""
    site = FakeSite(generated_site(2, 30))
    seeds = ["gemini://h0.test/", "gemini://h1.test/"]
    await crawl(tmp_path / "c.db", site, seeds, test_range=True, max_pages=20)
    assert {url.split("/")[2] for url in site.urls()} == {"h0.test", "h1.test"}


def pages_of(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
    return conn.execute(
        "SELECT url, status, title, content_hash, duplicate_of FROM pages ORDER BY url"
    ).fetchall()


async def test_role_mismatch_refused(tmp_path: Path, autojump_clock: object) -> None:
    site = FakeSite(site_a())
    _, conn = await crawl(tmp_path / "c.db", site, ["gemini://a.test/"], test_range=True)
    conn.close()
    with pytest.raises(ConfigMismatch, match="role 'indexer'"):
        await crawl(tmp_path / "c.db", site, ["gemini://a.test/"], role="researcher")


async def test_stop_releases_leases(tmp_path: Path, autojump_clock: object) -> None:
    site = FakeSite(generated_site(2, 20), latency=1.0)
    conn = connect(tmp_path / "c.db")
    crawler = sqlite_crawler(
        conn, site.fetch, CrawlOptions(test_range=True), wall_clock=mock_wall_clock
    )
    crawler.seed(["gemini://h0.test/", "gemini://h1.test/"])

    def stop_after_some(url: str) -> None:
        if len(site.log) == 8:
            crawler.stop()

    site.on_request = stop_after_some
    await crawler.run()
    assert crawler.store.leased() == []
    before = set(site.urls())
    conn.close()
    site.on_request = None
    seeds = ["gemini://h0.test/", "gemini://h1.test/"]
    _, conn = await crawl(tmp_path / "c.db", site, seeds, test_range=True)
    # the interrupted requests are the only ones repeated
    assert len(site.urls()) - len(set(site.urls())) <= 2
    assert before <= set(site.urls())
    whole = FakeSite(generated_site(2, 20))
    _, conn2 = await crawl(tmp_path / "d.db", whole, seeds, test_range=True)
    assert set(site.urls()) == set(whole.urls())
    assert pages_of(conn) == pages_of(conn2)


@pytest.mark.parametrize(("start_hour", "fetched"), [(23.5, True), (12.0, False)])
async def test_visit_window_waits_or_skips(
    tmp_path: Path, autojump_clock: object, start_hour: float, fetched: bool
) -> None:
    pages = site_a()
    pages["gemini://a.test/robots.txt"] = FetchResult(
        20, "text/plain", b"User-agent: *\nVisit-time: 0000-0100\nDisallow: /private/\n"
    )
    site = FakeSite(pages)
    start = datetime(2026, 11, 23, tzinfo=UTC).timestamp() + start_hour * 3600
    t0 = trio.current_time()
    conn = connect(tmp_path / "c.db")
    crawler = sqlite_crawler(
        conn,
        site.fetch,
        CrawlOptions(test_range=True),
        wall_clock=lambda: start + trio.current_time() - t0,
    )
    crawler.seed(["gemini://a.test/"])
    await crawler.run()
    page_times = [t for t, u in site.log if "robots" not in u and "agents" not in u]
    if fetched:  # half an hour to midnight: wait for the window, then crawl
        assert page_times and min(page_times) - t0 >= 1800
    else:  # noon: the window is 12 hours away, more than the longest wait
        assert page_times == []
        assert "more than" in crawler.progress.hosts_skipped["a.test"]
        assert crawler.store.state_of("gemini://a.test/") == ("queued", None)


async def test_after_a_kill_each_claim_is_committed_before_its_request(
    tmp_path: Path, autojump_clock: object
) -> None:
    """The crawl loop batches its SQLite writes; a run that finds the run before it never
    ended (killed: its end_run did not clear run_open) commits each claim's attempt before
    the request goes out (another connection sees it: so would the run after another
    kill). Every run commits everything when it ends, and marks itself ended."""
    db = tmp_path / "c.db"
    site = FakeSite(generated_site(3, 6))
    seen: list[tuple[str, str, int]] = []

    def look(url: str) -> None:
        if url.endswith(".txt"):
            return  # policy files are not claimed
        other = sqlite3.connect(db)
        row = other.execute("SELECT state, attempts FROM urls WHERE url = ?", (url,)).fetchone()
        other.close()
        seen.append((url, *row))

    def committed(sql: str) -> object:
        other = sqlite3.connect(db)
        try:
            return other.execute(sql).fetchone()[0]
        finally:
            other.close()

    seeds = [f"gemini://h{i}.test/" for i in range(3)]
    _, conn = await crawl(db, site, seeds[:1], test_range=True, max_pages=2)
    conn.close()
    assert committed("SELECT value FROM settings WHERE key = 'run_open'") == "0"
    assert committed("SELECT count(*) FROM pages") == 2
    other = sqlite3.connect(db)
    with other:
        other.execute("UPDATE settings SET value = '1' WHERE key = 'run_open'")  # killed
    other.close()
    site.on_request = look
    _, conn = await crawl(db, site, seeds, test_range=True)
    conn.close()
    assert len(seen) > 18 and all(s[1:] == ("leased", 1) for s in seen)
    assert committed("SELECT count(*) FROM pages") == len(seen) + 2
    assert committed("SELECT count(*) FROM urls WHERE state IN ('queued', 'leased')") == 0
    assert committed("SELECT value FROM settings WHERE key = 'run_open'") == "0"
