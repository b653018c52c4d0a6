"""The crawl's progress display: fits 60, 80 and 160 columns, says what it
waits for, prints waits for people, rates over a recent window; and the loop feeds it from
counters in memory (no count of the queue per repaint). Also the attempts bound in the
loop: a URL whose processing keeps raising is given up, not retried forever."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import sqlite3
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from crawl_fakes import FakeSite, generated_site, gmi
from crawlers import sqlite_crawler

from geminibot.cliutil import human_duration
from geminibot.crawl.adapters import FetchResult
from geminibot.crawl.display import RATE_WINDOW, Display
from geminibot.crawl.progress import Progress, summary_lines
from geminibot.crawl.settings import CrawlOptions
from geminibot.store.db import connect
from geminibot.store.frontier import MAX_URL_ATTEMPTS


def busy(**kw: object) -> Progress:
    p = Progress(
        started=0.0,
        pages=123456,
        requests=234567,
        errors=3456,
        refused=4567,
        slow_downs=56,
        queued=987654,
        hosts_active=16,
        hosts_seen=12345,
        elapsed=27360.0,
        next_request=("a-very-long-capsule-name-for-testing.example.org", 27360.0),
    )
    for k, v in kw.items():
        setattr(p, k, v)
    return p


def painted(width: int, progress: Progress) -> list[str]:
    out = io.StringIO()
    display = Display(out, width=lambda: width, tty=True)
    display(progress)
    display.end()
    painting, clearing = (c for c in out.getvalue().split("\r") if c)
    assert painting.startswith("\x1b[K") and clearing == "\x1b[K"
    return [painting.removeprefix("\x1b[K"), clearing]


@pytest.mark.parametrize("width", [60, 80, 160])
def test_the_line_fits_the_terminal(width: int) -> None:
    for progress in (busy(), busy(in_flight=16), Progress(started=0.0)):
        line, cleared = painted(width, progress)
        assert len(line) < width  # the last column stays free: no wrap
        assert cleared == "\x1b[K"
    line, _ = painted(width, busy())
    assert line.startswith("123456 pages  0.0/s  next a-very-long-")
    assert "… in 7 h 36 min" in line


def test_what_it_waits_for() -> None:
    line, _ = painted(80, busy(next_request=("va.test", 8.0)))
    assert "next va.test in 8 s" in line
    line, _ = painted(80, busy(in_flight=3))
    assert "3 in flight" in line and "next" not in line


def test_the_host_name_is_escaped() -> None:
    line, _ = painted(80, busy(next_request=("evil\x1b]0;owned\x07.test", 1.0)))
    assert "\x1b]" not in line and "\x07" not in line


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.4, "0.4 s"),
        (8, "8 s"),
        (59.6, "1 min"),
        (90, "1 min 30 s"),
        (3600, "1 h"),
        (27360, "7 h 36 min"),
        (2 * 86400 + 3 * 3600 + 59, "2 d 3 h"),
    ],
)
def test_human_durations(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_pages_per_second_over_a_recent_window() -> None:
    out = io.StringIO()
    display = Display(out, width=lambda: 200, tty=True)
    # a fast first hour, then nothing: the whole-run average would still say 2.8/s
    display(busy(pages=0, elapsed=0.0, next_request=None))
    display(busy(pages=10000, elapsed=3600.0, next_request=None))
    display(busy(pages=10000, elapsed=3600.0 + RATE_WINDOW + 1, next_request=None))
    display(busy(pages=10000, elapsed=3600.0 + 2 * RATE_WINDOW, next_request=None))
    last = out.getvalue().split("\r")[-1]
    assert "10000 pages  0.0/s" in last


def test_a_real_terminal_of_60_columns(tmp_path: Path) -> None:
    """The command under a pseudo-terminal 60 columns wide: no painted line is wider."""
    program = (
        "import sys, time\n"
        "from geminibot.crawl.progress import Progress\n"
        "from geminibot.crawl.display import Display\n"
        "d = Display(sys.stderr)\n"
        "d(Progress(started=0, pages=99999, requests=99999, queued=999999, hosts_seen=9999,"
        " errors=999, refused=999, slow_downs=99, elapsed=27360,"
        " next_request=('capsule.example.org', 27360)))\n"
        "d.end()\n"
    )
    leader, follower = pty.openpty()
    os.set_blocking(leader, True)
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 60, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run(
        [sys.executable, "-c", program],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=follower,
        env=env,
        timeout=60,
        check=False,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.returncode == 0
    text = b"".join(chunks).decode()
    lines = [c.removeprefix("\x1b[K") for c in text.split("\r") if c.strip("\x1b[K\n")]
    assert lines and all(len(line) < 60 for line in lines)
    assert lines[0].startswith("99999 pages  ")


async def test_the_loop_counts_in_memory(tmp_path: Path, autojump_clock: object) -> None:
    """Progress is reported every half second; the queue is counted once at the start and
    once at the end, whatever the number of repaints."""
    conn = connect(tmp_path / "c.db")
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    reports: list[Progress] = []
    site = FakeSite(generated_site(3, 20), latency=0.3)
    crawler = sqlite_crawler(conn, site.fetch, CrawlOptions(), on_progress=reports.append)
    crawler.seed([f"gemini://h{h}.test/" for h in range(3)])
    progress = await crawler.run()
    assert len(reports) > 100 and progress.pages > 50
    counts = [
        s for s in statements if s.startswith("SELECT count(*) FROM urls WHERE state = 'queued'")
    ]
    assert len(counts) == 2
    assert (
        progress.queued
        == conn.execute("SELECT count(*) FROM urls WHERE state = 'queued'").fetchone()[0]
    )


class Exploding:
    """An archive that fails on one URL (a bug, a full WARC disk): the crawl ends."""

    def __init__(self, bad: str) -> None:
        self.bad = bad

    def write(self, url: str, response: FetchResult, fetched_at: float) -> None:
        if url == self.bad:
            raise RuntimeError("cannot archive this one")


async def test_a_url_that_keeps_raising_is_given_up(tmp_path: Path, autojump_clock: object) -> None:
    bad = "gemini://a.test/bad.gmi"
    site = FakeSite(
        {
            "gemini://a.test/": gmi("# home\n=> /bad.gmi\n=> /good.gmi\n"),
            bad: gmi("# bad\n"),
            "gemini://a.test/good.gmi": gmi("# good\n"),
        }
    )
    db = tmp_path / "c.db"
    for run in range(1, MAX_URL_ATTEMPTS + 2):
        conn = connect(db)
        crawler = sqlite_crawler(
            conn, site.fetch, CrawlOptions(test_range=True), archive=Exploding(bad)
        )
        crawler.seed(["gemini://a.test/"])
        if run <= MAX_URL_ATTEMPTS:
            with pytest.raises(BaseExceptionGroup) as caught:
                await crawler.run()
            assert caught.group_contains(RuntimeError, match="cannot archive this one")
            assert conn.execute("SELECT state FROM urls WHERE url = ?", (bad,)).fetchone() == (
                "leased",
            )
        else:
            await crawler.run()
        conn.close()
    conn = sqlite3.connect(db)
    state, reason = conn.execute("SELECT state, reason FROM urls WHERE url = ?", (bad,)).fetchone()
    assert state == "failed" and reason == f"given up: {MAX_URL_ATTEMPTS} attempts ended abnormally"
    assert site.urls().count(bad) == MAX_URL_ATTEMPTS
    assert conn.execute(
        "SELECT state FROM urls WHERE url = 'gemini://a.test/good.gmi'"
    ).fetchone() == ("done",)


def test_the_closing_summary_fits_80_columns() -> None:
    """A whole-space run's counts, every optional line, and a server's long reason with a
    control character: no line past 80 columns, the reason escaped and wrapped whole."""
    reason = "44 slow down: " + "\x1b[2J" + "please come back much later " * 5
    p = busy(
        revisits=600_000,
        unchanged=540_000,
        gone=1_234,
        vanished=4_321,
        excluded=99,
        hosts_skipped={"h0001.example.test": reason},
        limit="--max-time",
    )
    lines = summary_lines(p, "/tmp/space.db", False, None)
    assert all(len(line) <= 80 for line in lines), [ln for ln in lines if len(ln) > 80]
    (at,) = [i for i, ln in enumerate(lines) if ln.startswith("skipped for now: h0001")]
    shown = [lines[at]] + [ln for ln in lines[at + 1 : at + 4] if ln.startswith("  ")]
    assert len(shown) == 3 and "\x1b" not in "".join(lines)
    wanted = "skipped for now: h0001.example.test: " + reason.replace("\x1b", "\\x1b")
    assert " ".join(" ".join(shown).split()) == " ".join(wanted.split())
    assert len(lines) == 11


def test_the_summary_counts_right_for_one_and_for_many() -> None:
    one = Progress(started=0.0, pages=1, requests=1, errors=1, slow_downs=1, queued=1)
    one.revisits, one.unchanged, one.gone, one.excluded = 1, 1, 1, 1
    one.not_found = 1
    text = "\n".join(summary_lines(one, "c.db", True, None))
    for words in (
        "crawled 1 page (1 request)",
        "1 error, 1 slow-down obeyed",
        "revisited: 1 URL due again, 1 page unchanged",
        "not found (51/404): 1 URL, asked again later; gone (52/410): 1 URL",
        "excluded by --exclude: 1 URL",
        "stopped: 1 URL queued",
    ):
        assert words in text
    many = busy(revisits=2, unchanged=2, gone=2, excluded=2, not_found=966)
    text = "\n".join(summary_lines(many, "c.db", False, None))
    for words in (
        "crawled 123456 pages (234567 requests)",
        "3456 errors, 56 slow-downs",
        "not found (51/404): 966 URLs, asked again later; gone (52/410): 2 URLs",
    ):
        assert words in text
    assert "1 pages" not in "\n".join(summary_lines(one, "c.db", False, None))
