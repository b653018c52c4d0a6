"""``geminibot crawl --forever``: runs, sleeps until the next URL is due, runs again (a
changed page re-indexed, a new link followed), stops on SIGTERM with exit 0, resumes."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import trio
import trio.testing
from commands import crawl_in_trio
from db_rows import rows
from served_capsules import generate

from capsule_server.testing import running_server
from geminibot.crawl.continuous import (
    MAX_SLEEP,
    MIN_PAUSE,
    QUEUE_POLL,
    Stopper,
    keep_going,
    pause,
)
from geminibot.gemini.server import ServerLimits
from geminibot.store.freshness import DAY

TIMEOUT = 120.0


async def wait_for(db: Path, sql: str, step: float = 600.0, most: int = 1000) -> None:
    """Sleep (trio's clock: mock time) until ``sql`` finds a row, ``most`` steps at most."""
    for _ in range(most):
        if rows(db, sql):
            return
        await trio.sleep(step)
    raise AssertionError(f"never: {sql}")


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
                await wait_for(db, "SELECT 1 FROM pages WHERE url LIKE '%/new.gmi'")
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


async def test_a_url_queued_during_the_sleep_wakes_it_within_a_poll(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A URL submitted (queued by another process) while the loop sleeps a day is taken
    at the next look at the queue, QUEUE_POLL seconds at most."""
    stopper = Stopper()
    starts: list[float] = []
    queue = [0]

    async def run_once(clock: object) -> None:
        starts.append(trio.current_time())
        if len(starts) == 2:
            stopper.stop()

    async def submit_later() -> None:
        await trio.sleep(100.0)
        queue[0] += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(submit_later)
        runs = await keep_going(run_once, lambda now: now + DAY, stopper, queued=lambda: queue[0])
    assert runs == 2
    assert 100.0 < starts[1] - starts[0] <= 100.0 + QUEUE_POLL
