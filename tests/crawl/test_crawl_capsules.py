"""End to end on loopback: the crawler against capsule_server serving the test capsules.

For every capsule and every role it has a ``[crawl.ROLE]`` table for, the set of paths
requested is exactly what the table allows, robots.txt comes first, no honeypot is
touched, and every 44 is sat out. Time is trio's mock clock (shared with the server), so
policy delays cost no real time.
"""

import itertools
from datetime import UTC, datetime
from pathlib import Path

import pytest
import trio
import trio.testing
from capsule_crawl import (
    check_fetched,
    check_slow_downs_obeyed,
    crawl_cases,
    crawl_host,
    expectation,
    serving,
)

from geminibot.crawl.settings import CrawlOptions
from geminibot.gemini.server import ServerLimits
from geminibot.index import search
from geminibot.store.traps import FrontierLimits

#: A server rate limit the crawl never meets (test_rate_limited_server_44s_obeyed meets one).
FAST = ServerLimits(rate_burst=10_000, rate_per_second=10_000.0)
MAZE_BOUND = 30
NIGHT = datetime(2026, 11, 23, 23, 0, tzinfo=UTC).timestamp()  # inside robots-v2's window
NOON = datetime(2026, 11, 23, 12, 0, tzinfo=UTC).timestamp()  # outside it


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("certs")


def clock_at(start: float) -> "object":
    t0 = trio.current_time()
    return lambda: start + trio.current_time() - t0


@pytest.mark.parametrize(("host", "role"), crawl_cases(("indexer", "archiver", "researcher")))
async def test_capsule_crawl(
    host: str, role: str, cert_dir: Path, tmp_path: Path, loopback_clock: trio.testing.MockClock
) -> None:
    expect = expectation(host)
    # the maze is bounded by the URLs-per-host trap bound; a lower one keeps the test quick
    # (the default is tested at its edge in tests/store/test_store_frontier.py)
    limits = FrontierLimits(max_urls_per_host=MAZE_BOUND)
    async with serving([host], tmp_path / "capsules", cert_dir, FAST) as served:
        await crawl_host(
            served.port,
            host,
            tmp_path / "c.db",
            CrawlOptions(role=role, test_range=True, limits=limits),
            wall_clock=clock_at(NIGHT),  # type: ignore[arg-type]
        )
    check_fetched(served.hits[host], expect, role)
    check_slow_downs_obeyed(served.hits[host])
    report = served.report()
    assert report.compliant, report.as_dict()
    assert role in report.consistent_with, report.as_dict()


async def test_visit_time_outside_window(
    cert_dir: Path, tmp_path: Path, loopback_clock: trio.testing.MockClock
) -> None:
    host = "robots-v2.test"
    async with serving([host], tmp_path / "capsules", cert_dir, FAST) as served:
        progress, conn = await crawl_host(
            served.port,
            host,
            tmp_path / "c.db",
            CrawlOptions(test_range=True),
            wall_clock=clock_at(NOON),  # type: ignore[arg-type]
        )
    fetched = {h.path for h in served.hits[host]} - {"/robots2.txt", "/agents.txt"}
    assert fetched == set(expectation(host)["crawl"]["indexer"]["fetched_outside_visit_time"])
    assert "more than" in progress.hosts_skipped[host]  # the window opens 10 hours later
    assert conn.execute("SELECT state FROM urls").fetchall() == [("queued",)]


async def test_ext20_request_rate_obeyed(
    cert_dir: Path, tmp_path: Path, loopback_clock: trio.testing.MockClock
) -> None:
    host = "robots-v2.test"
    async with serving([host], tmp_path / "capsules", cert_dir, FAST) as served:
        await crawl_host(
            served.port,
            host,
            tmp_path / "c.db",
            CrawlOptions(test_range=True),
            wall_clock=clock_at(NIGHT),  # type: ignore[arg-type]
        )
    interval = expectation(host)["rate"]["min_interval_seconds"]
    times = [h.at for h in served.hits[host]][1:]  # the pace is known once robots.txt is read
    assert all(b - a >= interval for a, b in itertools.pairwise(times))


async def test_rate_limited_server_44s_obeyed(
    cert_dir: Path, tmp_path: Path, loopback_clock: trio.testing.MockClock
) -> None:
    host = "va-groups.test"
    limits = ServerLimits(rate_burst=2, rate_per_second=0.5)
    async with serving([host], tmp_path / "capsules", cert_dir, limits) as served:
        progress, conn = await crawl_host(
            served.port, host, tmp_path / "c.db", CrawlOptions(test_range=True)
        )
    # Each 44 sat out (the token bucket: 2 at once, one every 2 s).
    hits = served.hits[host]
    slow_downs = check_slow_downs_obeyed(hits)
    assert progress.slow_downs == slow_downs >= 1
    assert len(hits) > 5
    # the address's pace halves at each 44 and creeps back up: a server this slow (one
    # request every 2 s) sees a 44 every few requests, not on every other one
    assert slow_downs * 3 <= len(hits)
    check_fetched(served.hits[host], expectation(host), "indexer")
    report = served.report()
    assert report.compliant, report.as_dict()
    assert report.rate_refused  # the server did slow the crawler down ...
    assert not report.during_wait  # ... and it waited every time
    assert search(conn, "virtual")


async def test_robots2_chain_followed(
    cert_dir: Path, tmp_path: Path, loopback_clock: trio.testing.MockClock
) -> None:
    host = "robots2-chain.test"
    async with serving([host], tmp_path / "capsules", cert_dir, FAST) as served:
        await crawl_host(served.port, host, tmp_path / "c.db", CrawlOptions(test_range=True))
    paths = [h.path for h in served.hits[host]]
    chain = expectation(host)["robots2"]["chain"]
    assert [p for p in paths if p in chain] == chain  # in order, each once
    rate = float(expectation(host)["robots2"]["directives"]["rate"])  # requests per minute
    times = [h.at for h in served.hits[host] if h.path not in chain and h.path != "/robots.txt"]
    assert all(b - a >= 60 / rate for a, b in itertools.pairwise(times[1:]))


@pytest.mark.parametrize("store", ["no", "session-only", "yes"])
async def test_robots2_store_decides_what_the_index_keeps(
    cert_dir: Path, tmp_path: Path, loopback_clock: trio.testing.MockClock, store: str
) -> None:
    """robots2.txt `store: no` or `session-only`: nothing of the content is persisted,
    so the page is indexed by its metadata only and a search finds nothing."""
    host = "store.test"
    capsule = tmp_path / "source" / host
    capsule.mkdir(parents=True)
    (capsule / "robots.txt").write_text("User-agent: *\nDisallow:\n")
    (capsule / "robots2.txt").write_text(f"crawl: yes\nstore: {store}\n")
    (capsule / "index.gmi").write_text("# Unicorn meadow\nA page about unicorns.\n")
    async with serving([host], tmp_path / "capsules", cert_dir, FAST, tmp_path / "source") as s:
        _, conn = await crawl_host(s.port, host, tmp_path / "c.db", CrawlOptions(test_range=True))
    assert "/" in {h.path for h in s.hits[host]}
    (text_indexed,) = conn.execute("SELECT text_indexed FROM pages").fetchone()
    found = search(conn, "unicorns")
    if store == "yes":
        assert text_indexed == 1 and [r.url for r in found] == [f"gemini://{host}/"]
    else:
        assert text_indexed == 0 and found == []
