"""``geminibot crawl --forever``: runs, sleeps until the next URL is due, runs again (a
changed page re-indexed, a new link followed), stops on SIGTERM with exit 0, resumes."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import trio
import trio.testing
from commands import crawl_in_trio
from crawl_fakes import FakeSite, gmi
from db_rows import rows
from served_capsules import generate

from capsule_server.testing import running_server
from geminibot.crawl.adapters import FetchResult
from geminibot.crawl.build import build_crawler
from geminibot.crawl.clock import TrioWallClock
from geminibot.crawl.continuous import (
    MAX_SLEEP,
    MIN_PAUSE,
    Stopper,
    keep_going,
    pause,
)
from geminibot.crawl.settings import CrawlOptions
from geminibot.gemini.accesslog import AccessRecord
from geminibot.gemini.server import ServerLimits
from geminibot.store.crawlstore import SqliteStore
from geminibot.store.database import Database, open_database
from geminibot.store.db import connect
from geminibot.store.freshness import DAY
from geminibot.store.recheck import DUE_POLL, recheck
from geminibot.store.submissions import submit

TIMEOUT = 120.0
A = "gemini://a.test/"
#: The URLs a crawl run still has to fetch.
WAITING = "SELECT 1 FROM urls WHERE state IN ('queued', 'leased')"


async def wait_for(db: Path, sql: str, step: float = 600.0, most: int = 1000) -> None:
    """Sleep (trio's clock: mock time) until ``sql`` finds a row, ``most`` steps at most."""
    for _ in range(most):
        if rows(db, sql):
            return
        await trio.sleep(step)
    raise AssertionError(f"never: {sql}")


@contextlib.asynccontextmanager
async def sleeping_after_its_first_run(
    tmp_path: Path, seeds: list[str], db: Path
) -> AsyncIterator[None]:
    """``crawl --forever`` of ``seeds`` (served from ``tmp_path / "capsules"``), entered
    once its first run has ended (its batch committed, the run marked ended) and it
    sleeps; the body must stop it (SIGTERM), within a day of trio's mock time."""
    argv = [*seeds, "--forever", "--json", "--db", str(db), "--test-range"]
    async with running_server(
        tmp_path / "capsules", tmp_path / "certs", ServerLimits(), None, trio.current_time
    ) as s:
        argv += ["--connect-to", f"*.test:1965:127.0.0.1:{s.port}"]
        with trio.fail_after(TIMEOUT * DAY):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(crawl_in_trio, argv)
                await wait_for(db, "SELECT 1 FROM settings WHERE key = 'run_open' AND value = '0'")
                yield


async def searchable_within_the_poll(db: Path, page: str, word: str) -> None:
    """Wait until ``page`` is searchable by ``word``: within DUE_POLL (and a few seconds
    for the fetch) of trio's mock time from now, not a day nor an hour; then stop the
    crawl."""
    asked = trio.current_time()
    await wait_for(
        db,
        "SELECT 1 FROM pages_fts f JOIN pages p ON p.id = f.rowid"
        f" WHERE p.url LIKE '%/{page}' AND f.body LIKE '%{word}%'",
        step=0.5,
    )
    assert trio.current_time() - asked <= DUE_POLL + 5
    os.kill(os.getpid(), signal.SIGTERM)


async def test_forever_revisits_when_due_and_stops_on_sigterm(
    tmp_path: Path, in_process_clock: trio.testing.MockClock
) -> None:
    capsules = tmp_path / "capsules"
    seeds = generate(capsules, 1, 4)
    db = tmp_path / "f.db"
    argv = [*seeds, "--forever", "--json", "--db", str(db), "--test-range"]
    done: list[object] = []
    async with running_server(
        capsules, tmp_path / "certs", ServerLimits(), None, trio.current_time
    ) as s:
        argv += ["--connect-to", f"*.test:1965:127.0.0.1:{s.port}"]

        async def crawl() -> None:
            done.append(await crawl_in_trio(argv))

        with trio.fail_after(TIMEOUT * DAY):  # mock seconds: days pass in an instant
            async with trio.open_nursery() as nursery:
                nursery.start_soon(crawl)
                await wait_for(db, "SELECT 1 FROM pages WHERE url LIKE '%/p2.gmi'")
                started = trio.current_time()
                page = capsules / "host00.test" / "p1.gmi"
                page.write_text("# Changed\n\nzeppelin\n=> /new.gmi a new page\n")
                (capsules / "host00.test" / "new.gmi").write_text("# New\n\nlichen\n")
                new = "SELECT 1 FROM pages WHERE url LIKE '%/new.gmi'"
                await wait_for(db, f"SELECT 1 WHERE NOT EXISTS ({WAITING})")
                # The first run over, nothing is due for a day: the crawl's looks every
                # DUE_POLL (5,760 a day) need no idle real time between them, only its
                # requests do (the server reads files on a thread), so the clock jumps at
                # once until an hour before anything can be due.
                threshold = in_process_clock.autojump_threshold
                in_process_clock.autojump_threshold = 0.0
                await trio.sleep(started + DAY - MAX_SLEEP - trio.current_time())
                in_process_clock.autojump_threshold = threshold
                assert not rows(db, new)  # not revisited before it was due
                await wait_for(db, new)
                assert trio.current_time() - started >= DAY - MAX_SLEEP  # slept until due
                os.kill(os.getpid(), signal.SIGTERM)
    (proc,) = done
    assert proc.returncode == 0, proc.stderr  # type: ignore[attr-defined]
    runs = [json.loads(line) for line in proc.stdout.splitlines()]  # type: ignore[attr-defined]
    assert len(runs) >= 2 and runs[0]["pages"] >= 4
    assert "sleeping" in proc.stderr  # type: ignore[attr-defined]
    text = rows(
        db,
        "SELECT f.body FROM pages_fts f JOIN pages p ON p.id = f.rowid WHERE p.url LIKE '%/p1.gmi'",
    )
    assert text and "zeppelin" in str(text[0][0])
    assert rows(db, "SELECT count(*) FROM urls WHERE state = 'leased'") == [(0,)]


def test_pause_is_bounded() -> None:
    assert pause(100.0, None) == MAX_SLEEP
    assert pause(100.0, 50.0) == MIN_PAUSE
    assert pause(100.0, 160.0) == 60.0
    assert pause(100.0, 100.0 + 10 * MAX_SLEEP) == MAX_SLEEP


@pytest.mark.parametrize("during", ["run", "sleep"])
async def test_a_stop_ends_the_run_or_the_sleep(
    during: str, autojump_clock: trio.testing.MockClock
) -> None:
    stopper = Stopper()
    stopped_runs: list[int] = []

    async def run_once(clock: object) -> None:
        event = trio.Event()
        stopper.running(lambda: (stopped_runs.append(1), event.set()))
        try:
            if during == "run":
                stopper.stop()
            if during == "run":
                await event.wait()
            else:
                await trio.sleep(1)
        finally:
            stopper.running(None)

    def due(now: float) -> float:
        stopper.stop()  # asked while it sleeps (a signal then)
        return now + DAY

    runs = await keep_going(run_once, due, stopper)
    assert runs == 1
    assert stopped_runs == ([1] if during == "run" else [])
    assert trio.current_time() < DAY  # the sleep did not last


async def test_a_sleep_ends_when_its_test_says_work_came_due(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``woken(since)`` is called as each sleep begins; its test, asked every DUE_POLL
    seconds, ends a day's sleep at the first look after work came due."""
    stopper = Stopper()
    starts: list[float] = []
    asleep: list[float] = []

    async def run_once(clock: object) -> None:
        starts.append(trio.current_time())
        if len(starts) == 2:
            stopper.stop()

    def woken(since: float) -> Callable[[float], bool]:
        asleep.append(since)
        return lambda now: trio.current_time() - starts[0] > 100.0

    runs = await keep_going(run_once, lambda now: now + DAY, stopper, woken=woken)
    assert runs == 2 and len(asleep) == 1
    assert 100.0 < starts[1] - starts[0] <= 100.0 + DUE_POLL


async def test_a_submitted_url_wakes_the_sleeping_crawl_within_the_poll(
    tmp_path: Path, in_process_clock: trio.testing.MockClock
) -> None:
    """A URL the store never met, submitted (``/submit``'s store routine) while the crawl
    sleeps a day, is fetched within DUE_POLL: it was queued after the sleep began."""
    capsules = tmp_path / "capsules"
    seeds = generate(capsules, 1, 4)
    db = tmp_path / "f.db"
    (capsules / "host00.test" / "submitted.gmi").write_text("# Submitted\n\nwombat\n")
    async with sleeping_after_its_first_run(tmp_path, seeds, db):
        url = seeds[0] + "submitted.gmi"
        what = await trio.to_thread.run_sync(submit, str(db), url, time.time)
        assert what == "queued"
        await searchable_within_the_poll(db, "submitted.gmi", "wombat")


async def test_a_recheck_wakes_the_sleeping_crawl_within_the_poll(
    tmp_path: Path, in_process_clock: trio.testing.MockClock
) -> None:
    """After its run the crawl sleeps until the next URL is due (a day); a page made due
    by ``geminibot recheck`` is fetched within DUE_POLL (trio's mock seconds)."""
    capsules = tmp_path / "capsules"
    seeds = generate(capsules, 1, 4)
    db = tmp_path / "f.db"
    page_url = seeds[0] + "p1.gmi"
    async with sleeping_after_its_first_run(tmp_path, seeds, db):
        (capsules / "host00.test" / "p1.gmi").write_text("# Changed\n\nquokka\n")

        def look_again() -> None:
            with open_database(str(db)) as database:  # as geminibot recheck does
                done = recheck(database, page_url, "host00.test", is_url=True, now=time.time())
            assert done.due == 1

        await trio.to_thread.run_sync(look_again)
        await searchable_within_the_poll(db, "p1.gmi", "quokka")


async def test_a_recheck_during_a_run_is_taken_by_that_run(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A continuous crawl's run looks for URLs come due every ``poll_due`` seconds: a
    page fetched early in a long run and rechecked is fetched again before the run ends."""
    pages: dict[str, FetchResult | list[FetchResult]] = {
        "gemini://a.test/robots.txt": FetchResult(20, "text/plain", b"User-agent: *\n"),
        "gemini://a.test/": gmi("# Home\n" + "".join(f"=> /{i}.gmi\n" for i in range(20))),
        **{f"gemini://a.test/{i}.gmi": gmi(f"# Page {i}\n") for i in range(20)},
    }
    fake = FakeSite(pages, latency=2.0)  # a run of ~45 mock seconds, one request at a time
    conn = connect(tmp_path / "c.db")
    database = Database("c.db", conn, path=tmp_path / "c.db")  # (the crawl's connection)
    options = CrawlOptions(test_range=True, concurrency=1)
    clock = TrioWallClock(lambda: 1.7e9)
    store = SqliteStore(conn, clock.now, options.limits)  # (each write committed)
    crawler = build_crawler(store, options, clock, fetch=fake.fetch, poll_due=5.0)
    crawler.seed(["gemini://a.test/"])
    done: list[int] = []

    def rechecked(url: str) -> None:
        if url.endswith("/10.gmi"):  # home fetched long ago: made due again
            done.append(recheck(database, A, "a.test", is_url=True, now=1.7e9).due)

    fake.on_request = rechecked
    progress = await crawler.run()
    conn.close()
    assert done == [1]
    assert fake.urls().count(A) == 2 and progress.revisits == 1


async def test_a_url_submitted_during_a_run_is_fetched_by_that_run(
    tmp_path: Path, in_process_clock: trio.testing.MockClock
) -> None:
    """A long run (a capsule asking ``Crawl-delay: 20``: about 3 minutes of the mock
    clock, each of them 120 progress reports that cost 5 ms of real idleness): a URL the store never met, on a
    host the crawl has not asked yet (``--allow-host``), submitted during it is fetched by
    that run within DUE_POLL, its host's robots.txt first; one submitted on the slow host
    is its next request, before the pages it had queued, at that host's pace."""
    capsules = tmp_path / "capsules"
    seeds = generate(capsules, 1, 8)  # host00.test: 8 pages
    slow = capsules / "host00.test"
    (slow / "robots.txt").write_text("User-agent: *\nDisallow: /private/\nCrawl-delay: 20\n")
    (slow / "submitted.gmi").write_text("# Submitted\n\nnumbat\n")
    (capsules / "late.test").mkdir()
    (capsules / "late.test" / "robots.txt").write_text("User-agent: *\nDisallow: /private/\n")
    (capsules / "late.test" / "new.gmi").write_text("# New\n\nwombat\n")
    served: list[tuple[float, str]] = []  # (trio time, host and path), as the server ends each

    def log(record: AccessRecord) -> None:
        served.append((trio.current_time(), f"{record.host}{record.path}"))

    def when(path: str) -> float | None:
        return next((at for at, p in served if p == path), None)

    db = tmp_path / "f.db"
    argv = [*seeds, "--forever", "--json", "--db", str(db), "--test-range"]
    argv += ["--allow-host", "late.test"]
    done: list[subprocess.CompletedProcess[str]] = []
    async with running_server(
        capsules, tmp_path / "certs", ServerLimits(), log, trio.current_time
    ) as s:
        argv += ["--connect-to", f"*.test:1965:127.0.0.1:{s.port}"]

        async def crawl() -> None:
            done.append(await crawl_in_trio(argv))

        with trio.fail_after(TIMEOUT * DAY):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(crawl)
                while when("host00.test/p1.gmi") is None:  # 20 s into a run of ~3 minutes
                    await trio.sleep(1.0)
                asked = {}
                for url in ("gemini://late.test/new.gmi", seeds[0] + "submitted.gmi"):
                    what = await trio.to_thread.run_sync(submit, str(db), url, time.time)
                    assert what == "queued"
                    asked[url] = trio.current_time()
                while (
                    when("late.test/new.gmi") is None or when("host00.test/submitted.gmi") is None
                ):
                    await trio.sleep(1.0)
                await wait_for(db, "SELECT 1 FROM settings WHERE key = 'run_open' AND value = '0'")
                os.kill(os.getpid(), signal.SIGTERM)
    (proc,) = done
    assert proc.returncode == 0, proc.stderr
    runs = [json.loads(line) for line in proc.stdout.splitlines()]
    assert runs[0]["pages"] == 8 + 2  # the first run took both
    late = when("late.test/new.gmi")
    assert late is not None and late - asked["gemini://late.test/new.gmi"] <= DUE_POLL + 5
    policy_files = ["robots.txt", "robots2.txt", "agents.txt"]
    assert [p for _, p in served if p.startswith("late.test")] == [
        *(f"late.test/{name}" for name in policy_files),
        "late.test/new.gmi",
    ]
    slow_pages = [
        at
        for at, p in served
        if p.startswith("host00.test") and p.split("/", 1)[1] not in policy_files
    ]
    assert len(slow_pages) == 8 + 1  # the pages, and the one submitted
    assert all(b - a >= 20.0 for a, b in itertools.pairwise(slow_pages))  # its pace held
    submitted_at = asked[seeds[0] + "submitted.gmi"]
    after = [p for at, p in served if p.startswith("host00.test/") and at > submitted_at]
    assert after[0] == "host00.test/submitted.gmi" and len(after) > 1, after  # first
