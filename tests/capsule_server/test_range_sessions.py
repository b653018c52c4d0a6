"""The range's sessions: a client stays one session while the range has told it to wait,
its scorecard is one for the whole run, and it agrees with ``capsule-server report`` on
the same log. The range runs in the test's trio run (the real server, scorecards and idle
watcher) on trio's mock clock: waits of minutes take no real time."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
import trio.testing
from capsule_fixtures import bundled_policies, serving_on_trio_time
from crawlers import sqlite_crawler

from capsule_server.cli import main
from capsule_server.compliance_range import Scorecards, idle_warning, watch_idle
from capsule_server.files import load_capsules
from capsule_server.judge import identities
from capsule_server.sessions import MAX_HELD_WAIT, Session, told_wait
from geminibot.crawl.fetcher import gemini_fetch
from geminibot.crawl.settings import CrawlOptions
from geminibot.gemini.accesslog import AccessRecord, JsonLinesLog
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.server import SMALL_FILE, ServerLimits
from geminibot.net.connect import ConnectRule, Resolver
from geminibot.store.db import connect
from geminibot.store.traps import FrontierLimits

pytestmark = pytest.mark.usefixtures("bundled_policies_read_once")

FAST = ServerLimits(rate_burst=100_000, rate_per_second=100_000.0)
NIGHT = dt.datetime(2026, 11, 23, 23, 0, tzinfo=dt.UTC)  # inside robots-v2's window
ROBOTS_44 = "gemini://robots-44.test/robots.txt"
#: URLs per host the crawler may queue (only the endless maze reaches it).
MAZE_BOUND = 40


@dataclass(frozen=True)
class InProcessRange:
    """The range as ``capsule-server range --idle IDLE --log`` runs it, in the test's trio
    run, writing its log and scorecards in ``out``; and ``report`` of that log."""

    capsules_dir: Path
    cert_dir: Path
    out: Path
    capsys: pytest.CaptureFixture[str]

    @property
    def log(self) -> Path:
        return self.out / "access.jsonl"

    @asynccontextmanager
    async def run(self, idle: float, said: list[str]) -> AsyncIterator[tuple[int, Scorecards]]:
        """The server, the scorecards and the idle watcher on trio's clock, the log's
        times from ``NIGHT``; its port and scorecards."""
        cards = Scorecards(
            dict(bundled_policies()), self.out, "geminibot", None, trio.current_time, said.append
        )
        with self.log.open("w", encoding="utf-8") as fh:
            writer = JsonLinesLog(fh)

            def on_record(record: AccessRecord) -> None:
                writer(record)
                cards.add(record)

            start = NIGHT.timestamp()
            async with (
                serving_on_trio_time(
                    self.capsules_dir,
                    self.cert_dir,
                    FAST,
                    on_record,
                    start,
                    timespec="milliseconds",
                ) as srv,
                trio.open_nursery() as nursery,
            ):
                stopped = trio.Event()
                nursery.start_soon(watch_idle, cards, idle, stopped)
                yield srv.port or 0, cards
                stopped.set()
                cards.wake.set()

    def agrees_with_report(self) -> dict[str, object]:
        """The scorecard of 127.0.0.1, after checking that ``report`` on the log says the
        same in JSON and in text."""
        card = json.loads((self.out / "127.0.0.1.json").read_text())
        main(["report", str(self.log), "--json"])
        assert json.loads(self.capsys.readouterr().out) == card
        main(["report", str(self.log)])
        assert self.capsys.readouterr().out == (self.out / "127.0.0.1.txt").read_text()
        return card  # type: ignore[no-any-return]


@pytest.fixture
def in_process_range(
    capsules_dir: Path, cert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> InProcessRange:
    return InProcessRange(capsules_dir, cert_dir, tmp_path, capsys)


def written(said: list[str]) -> list[str]:
    return [line for line in said if ", scorecard in " in line]


async def test_a_44_wait_broken_after_an_idle_gap_is_not_compliant(
    in_process_range: InProcessRange, in_process_clock: trio.testing.MockClock
) -> None:
    """Two fetches of robots-44.test's robots.txt (``44 60``) 8 s apart, --idle 5: the
    client is still in its session at the second, which is a breach."""
    said: list[str] = []
    async with in_process_range.run(5.0, said) as (port, _):
        resolver = Resolver([ConnectRule("*", 1965, "127.0.0.1", port)], loopback_only=True)
        client = GeminiClient(connect_to=resolver)
        first = await client.fetch(ROBOTS_44)
        assert (first.status, first.meta) == (44, "60")
        await trio.sleep(8.0)  # longer than --idle, shorter than the wait asked
        assert said == []  # still one session: no scorecard yet
        await client.fetch(ROBOTS_44)
        await trio.sleep(60.0 + 5.0 - 1.0)  # the second 44's wait, --idle, less a second
        assert said == []
        await trio.sleep(5.0)
        [line] = written(said)
    assert line.startswith("capsule-server: 127.0.0.1: not compliant, scorecard in ")
    card = in_process_range.agrees_with_report()
    assert not card["compliant"] and card["requests"] == 2
    assert card["scorecard"]["robots-44.test"].startswith(  # type: ignore[index]
        "fail: during 44 wait /robots.txt (44 at 23:00:00 asked for 60 s)"
    )


async def test_a_crawl_that_waits_out_the_44s_gets_one_scorecard(
    in_process_range: InProcessRange, tmp_path: Path, in_process_clock: trio.testing.MockClock
) -> None:
    """geminibot's crawler over every bundled capsule through the range with --idle 10:
    it sits out robots-44.test's 44s (60 s, then doubling, about 73 minutes in all) and is
    scored once, when it is done, as ``report`` scores its log."""
    capsules_dir = in_process_range.capsules_dir
    files = [f for f in capsules_dir.rglob("*") if f.is_file()]
    assert max(f.stat().st_size for f in files) < SMALL_FILE  # no file read on a thread
    said: list[str] = []
    async with in_process_range.run(10.0, said) as (port, _):
        resolver = Resolver([ConnectRule("*", 1965, "127.0.0.1", port)], loopback_only=True)
        t0 = trio.current_time()
        crawler = sqlite_crawler(
            connect(tmp_path / "crawl.db"),
            gemini_fetch(GeminiClient(connect_to=resolver)),
            CrawlOptions(
                role="indexer",
                test_range=True,
                limits=FrontierLimits(max_urls_per_host=MAZE_BOUND),
            ),
            wall_clock=lambda: NIGHT.timestamp() + trio.current_time() - t0,
        )
        crawler.seed([f"gemini://{host}/" for host in sorted(load_capsules(capsules_dir))])
        await crawler.run()
        crawled = trio.current_time() - t0
        assert written(said) == []  # scored once it is done, not before
        await trio.sleep(11.0)
    assert crawled > 60 * 60  # it did sit out the 44s
    [line] = written(said)
    card = in_process_range.agrees_with_report()
    assert card["compliant"] and line.split(": ")[2].startswith("compliant, scorecard in ")
    robots_44 = [r for r in map(json.loads, in_process_range.log.open()) if r["status"] == 44]
    assert len(robots_44) == 12  # 60 s six times, then 64 s ... 2048 s; then skipped
    logged = in_process_range.log.read_text().splitlines()
    assert card["requests"] == sum(1 for r in map(json.loads, logged) if r.get("path"))


def told(record: AccessRecord, since_44: float | None = None) -> float:
    return told_wait(record, bundled_policies().get(record.host or ""), identities(), since_44)


def at(
    moment: dt.datetime, host: str, path: str = "/", status: int = 20, meta: str = ""
) -> AccessRecord:
    iso = moment.isoformat(timespec="milliseconds")
    return AccessRecord("127.0.0.1", host, path, status, meta=meta or None, time=iso)


def test_the_waits_a_client_is_told() -> None:
    # a 44: its seconds (1 without a number), after a 44 twice the time since that one
    # (the spec's doubling back-off)
    assert told(at(NIGHT, "robots-44.test", "/robots.txt", 44, "60")) == 60
    assert told(at(NIGHT, "robots-44.test", "/robots.txt", 44, "60"), 64.0) == 128
    assert told(at(NIGHT, "x.test", "/", 44, "soon")) == 1
    assert told(at(NIGHT, "x.test", "/", 44, "soon"), 3.0) == 6
    # the pace: Crawl-delay 2; Request-rate 6/1m; no file's pace: nothing
    assert told(at(NIGHT, "robots2-ask.test")) == 2
    assert told(at(NIGHT, "robots-v2.test")) == 10
    assert told(at(NIGHT, "honeypot.test")) == 0
    # a Visit-time window (2200-0600) that opens in half an hour; one that opens in ten
    # hours is longer than MAX_HELD_WAIT: the bot is expected to skip the host for now
    assert told(at(NIGHT.replace(hour=21, minute=30), "robots-v2.test")) == 30 * 60
    assert told(at(NIGHT.replace(hour=12), "robots-v2.test")) == 10


def test_the_longest_wait_held_edge() -> None:
    assert MAX_HELD_WAIT == 3600
    edge = at(NIGHT, "robots-44.test", "/robots.txt", 44, str(int(MAX_HELD_WAIT)))
    assert told(edge) == MAX_HELD_WAIT
    assert told(at(NIGHT, "robots-44.test", "/robots.txt", 44, str(int(MAX_HELD_WAIT) + 1))) == 0
    assert told(edge, MAX_HELD_WAIT / 2) == MAX_HELD_WAIT
    assert told(edge, MAX_HELD_WAIT / 2 + 0.5) == 0  # back-off past it: skip the host


def test_a_session_is_over_once_every_wait_and_the_idle_margin_passed() -> None:
    session = Session(0.0)
    policies, idents = bundled_policies(), identities()
    session.saw(at(NIGHT, "robots-44.test", "/robots.txt", 44, "60"), 0.0, policies, idents)
    session.saw(at(NIGHT, "honeypot.test", "/robots.txt"), 30.0, policies, idents)
    assert not session.over(64.9, 5.0) and session.over(65.0, 5.0)
    session.saw(at(NIGHT, "robots-44.test", "/robots.txt"), 70.0, policies, idents)
    assert session.slow_downs == {}  # another answer ends the 44s in a row
    session.saw(at(NIGHT, "robots-44.test", "/robots.txt", 44, "60"), 80.0, policies, idents)
    session.saw(at(NIGHT, "robots-44.test", "/robots.txt", 44, "60"), 180.0, policies, idents)
    assert not session.over(384.9, 5.0) and session.over(385.0, 5.0)  # 180 + 2 x 100 + 5


def test_an_idle_shorter_than_the_longest_wait_is_warned_about(capsules_dir: Path) -> None:
    capsules = load_capsules(capsules_dir)
    cards = Scorecards(dict(bundled_policies()), Path("."), "geminibot", None)
    lines = idle_warning(10.0, capsules, cards)
    text = " ".join(line.strip() for line in lines)
    assert text.startswith("capsule-server: warning: --idle 10 is shorter than the longest")
    assert "60 s (robots-44.test answers 44 60 on /robots.txt)" in text
    assert text.endswith("--idle 60 or more avoids that")
    assert max(len(line) for line in lines) <= 80
    assert idle_warning(60.0, capsules, cards) == []
