"""Whole-Geminispace crawl on one machine: the synthetic space crawled from scratch (day 0),
then revisited on days 1 and 2.

    nice -n 10 .venv/bin/python bench/space_crawl.py [--hosts 4400] [--urls 600000]
        [--addresses 10] [--concurrency 128] [--naive-seconds 20] [--frontier 600000]
        [--no-profile] [--no-revisit] [--from-scratch] [--max-host-urls N] [--json]
        [--max-time SECONDS]

Serves ``bench/geminispace`` in its own process on 127.0.0.1 and 127.0.1.1 ...
127.0.1.``addresses`` (each host sent to one of them by ``--connect-to`` rules, so the
crawler's politeness per resolved address is exercised), crawls it with ``geminibot crawl``
(a subprocess, as a user runs it, ``--test-range``: no default delay) and reports:

- pages/s in each tenth of the crawl (by the pages' fetch times), and the last tenth
  against the first;
- the crawler's CPU (user + system, from ``wait4``) per page, split by where py-spy's
  samples of the crawler (attached, non-blocking, :data:`SAMPLE_RATE` per second) fall:
  TLS, policy, parsing, SQLite, the rest (trio, the loop, the client's own code);
- its peak RSS, the database's bytes per page (db, WAL and shared memory);
- a naive sequential crawler (ignition and protego, ``bench/crawl_speed.py``) for
  ``--naive-seconds`` on the same space, and the ratio;
- choosing the next host at ``--frontier`` queued URLs: the GROUP BY over the queue that
  the crawler used to run each time a worker ended, against what it does now (the
  scheduler's heaps of hosts in memory, then the host's oldest URL by the
  ``(host, state, id)`` index), median and 99th percentile over :data:`CHOICES` choices;
- day 1 (the space's ``--day 1``: :data:`~geminispace.space.CHANGE_RATE` of the ``/p/``
  pages changed, a post added to some gemlogs, the hosts that vanish gone), revisited twice from copies of the day-0
  database: ``geminibot crawl`` as a daily run would (only what is due, its wall clock a
  day on: :data:`DAY_LATER`) and ``crawl --refresh`` (every page, now); then day 2 by a
  plain crawl on a copy of the first's database (its clock two days on: what is due now
  follows the intervals day 1 learned). For each: pages/s
  per tenth, CPU ms/page, peak RSS, requests, pages refetched, the database's growth per
  page refetched, and the pages re-indexed against the pages the space changed since the
  database's copy (that day, or an earlier one the copy predates), every difference put in
  a named bucket (:func:`compare_days`); with ``--from-scratch``, day 1
  crawled into a new database too (what a crawler without revisits does).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from geminispace.server import address_rules  # noqa: E402
from geminispace.space import DOMAIN, Space  # noqa: E402
from machine import cpu_model, fresh_peak_file, measured_argv, peak_rss_kib  # noqa: E402

from geminibot.crawl.page import content_hash  # noqa: E402
from geminibot.store.freshness import DAY, VANISHED_AFTER  # noqa: E402

#: py-spy samples per second of the crawler.
SAMPLE_RATE = 100
#: Next-host choices timed at ``--frontier`` queued URLs.
CHOICES = 2000
#: Longest a crawl may take (seconds); it stops there (resumable) and the figures say so.
CRAWL_LIMIT = 3 * 3600.0
#: Where a py-spy frame puts its sample (the innermost frame that matches wins). py-spy
#: names a frame ``function (file:line)``, the file relative to its ``sys.path`` entry
#: (``ssl.py``, ``trio/_ssl.py``, ``geminibot/store/crawlstore.py``); a C function (OpenSSL,
#: SQLite) counts for the Python frame that called it. The client's TCP connect is
#: ``open_tcp`` in ``geminibot/gemini/tls.py`` (before it: trio's ``open_tcp_stream``), so
#: TCP is tried before TLS.
CATEGORIES = (
    (
        "TCP",
        (
            "trio/_socket.py",
            "trio/_highlevel_open_tcp_stream.py",
            "open_tcp (geminibot/gemini/tls.py",
        ),
    ),
    ("TLS", ("(ssl.py:", "trio/_ssl.py", "geminibot/gemini/tls.py")),
    ("policy", ("geminibot/policy/", "crawl/policy_files.py")),
    (
        "parsing",
        (
            "gemini/gemtext.py",
            "crawl/page.py",
            "gemini/response.py",
            "extract (geminibot/crawl/adapters.py",
            "geminibot/urls.py",
        ),
    ),
    ("SQLite", ("store/crawlstore.py", "store/frontier.py", "geminibot/index/", "sqlite3/")),
)
#: A sample whose innermost frame is one of these is the loop waiting, not CPU: dropped
#: (py-spy's own idle test is not reliable with ``--nonblocking``).
IDLE = ("get_events (trio/_core/_io_epoll.py",)
#: How far the plain day-1 revisit's wall clock runs ahead of the machine's: a day, the
#: first revisit interval of every page (``freshness.INITIAL_REVISIT``), so each page
#: fetched on day 0 is due, as in a daily run. The crawl is run with ``time.time``
#: advanced by this much (:data:`machine.MEASURED`); the library has no clock option.
DAY_LATER = DAY
#: A changed page not re-indexed because its host no longer answers: the old copy stays
#: in the index until the host has vanished (geminibot.store.freshness), days after any
#: revisit this benchmark makes.
VANISHED = (
    f"host gone (its requests fail; the old copy stays until the host has been"
    f" unanswered for {VANISHED_AFTER / DAY:g} days)"
)


def classify(stack: str) -> str:
    """A py-spy raw (collapsed) stack's category: frames are ``;``-separated, outermost
    first, each ``function (file:line)``."""
    for frame in reversed(stack.split(";")):
        for name, needles in CATEGORIES:
            if any(n in frame for n in needles):
                return name
    return "other"


def split_samples(lines: Iterable[str]) -> Counter[str]:
    """Samples per category from py-spy's raw output (``stack count`` per line)."""
    out: Counter[str] = Counter()
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if stack.rpartition(";")[2].startswith(IDLE):
            continue
        if stack and count.isdigit():
            out[classify(stack)] += int(count)
    return out


def tenths(times: list[float]) -> list[float]:
    """Pages per second in each tenth of the pages (by fetch time); fewer than 20 pages
    give no tenths."""
    times = sorted(times)
    n = len(times)
    if n < 20:
        return []
    edges = [min(n * k // 10, n - 1) for k in range(11)]
    rates = []
    for lo, hi in itertools.pairwise(edges):
        span = times[hi] - times[lo]
        rates.append((hi - lo) / span if span > 0 else float("inf"))
    return rates


def normal_host(space: Space, url: str) -> bool:
    """Whether ``url`` is on a host the space does not make slow, rate-limited, a maze
    or a calendar (those set the pace of a crawl's tail by themselves)."""
    i = space.index_of(url.removeprefix("gemini://").partition("/")[0])
    return i is not None and space.behaviour(i) == "normal"


def db_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


#: Tables whose rows a revisit adds (the logs) or replaces (a re-indexed page).
GROWING = ("pages", "links", "fetches", "decisions")


def checkpointed(db: Path) -> tuple[int, dict[str, int]]:
    """The database's bytes once its WAL is checkpointed into it (and truncated), and the
    rows of :data:`GROWING` tables."""
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in GROWING}
    conn.close()
    return db_bytes(db), rows


def copy_db(db: Path, to: Path) -> None:
    """A copy of a closed crawl database (its WAL and shared memory files with it)."""
    for part in db.parent.glob(db.name + "*"):
        (to.parent / (to.name + part.name.removeprefix(db.name))).write_bytes(part.read_bytes())


class Page(NamedTuple):
    """A ``pages`` row as a revisit sees it: a new ``id`` means the page was re-indexed
    (the index replaces a page's row, FTS5 terms and links), a new ``fetched_at`` that
    it was fetched again; ``content_hash`` says which body the database holds."""

    id: int
    fetched_at: float
    status: int | None
    content_hash: str | None = None


def pages_of(db: Path) -> dict[str, Page]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT url, id, fetched_at, status, content_hash FROM pages"
        ).fetchall()
    return {
        url: Page(row_id, float(at), status, digest) for url, row_id, at, status, digest in rows
    }


#: Policy files a crawl reads (re-read once their copy is a day old).
POLICY_FILES = ("/robots.txt", "/robots2.txt", "/agents.txt")


def requests_by_kind(db: Path, after: int) -> dict[str, int]:
    """The requests logged in ``fetches`` past row ``after``: policy files, answers
    that asked to slow down (``44``), failures (no answer), the rest (pages)."""
    out: Counter[str] = Counter()
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT url, status FROM fetches WHERE id > ?", (after,))
        for url, status in rows:
            if str(url).endswith(POLICY_FILES):
                out["policy files"] += 1
            elif status is None:
                out["failed (no answer)"] += 1
            elif status == 44:
                out["44 slow down"] += 1
            else:
                out["pages"] += 1
    conn.close()
    return dict(out.most_common())


def last_fetch(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        last = conn.execute("SELECT max(id) FROM fetches").fetchone()[0]
    conn.close()
    return int(last or 0)


def space_page(space: Space, url: str) -> tuple[int, str] | None:
    """(host number, path with its query) of a URL of the space; None for another URL."""
    if not url.startswith("gemini://"):
        return None
    host, _, path = url.removeprefix("gemini://").partition("/")
    i = space.index_of(host)
    return None if i is None else (i, "/" + path)


def held_revision(space: Space, i: int, path: str, day: int, digest: str | None) -> int | None:
    """Which revision of the page at ``path`` on host ``i`` a database's copy is
    (``digest``: its body's hash), among those the space served on days 0 ... ``day``;
    None: none of them. A page the space never changed by ``day`` (most are never
    changed: only ``/p/`` pages and gemlog indexes are) is revision 0, taken without
    hashing (a copy can only be older than ``day`` where the page changed)."""
    first_day = {space.revision_of(i, path, d): d for d in range(day, -1, -1)}
    if len(first_day) == 1:
        return 0
    host = space.host(i)
    for revision, first in sorted(first_day.items(), reverse=True):  # the newest first
        if content_hash(space.respond(host, path, first).body) == digest:
            return revision
    return None


def path_kind(url: str) -> str:
    """``/p/``, ``/maze/``, ``/`` ...: a URL's first path segment, for the buckets."""
    path = url.removeprefix("gemini://").partition("/")[2]
    return "/" + (path.split("/")[0] + "/" if "/" in path else path.partition("?")[0])


def changed_since_copy(
    space: Space, day: int, before: dict[str, Page]
) -> tuple[set[str], set[str], int]:
    """The pages of ``before`` (status 20) whose body on ``day`` is not the copy held
    (``/p/`` pages and gemlog indexes: the space changes no other), those of them the
    space did not change on ``day`` itself (changed on an earlier day), and how many
    copies are none of their page's revisions."""
    changed, earlier, unknown = set(), set(), 0
    for url, page in before.items():
        where = space_page(space, url)
        if where is None or page.status != 20:
            continue
        held = held_revision(space, *where, day, page.content_hash)
        if held is None:
            unknown += 1
        elif held != space.revision_of(*where, day):
            changed.add(url)
            if not space.changed_on(*where, day):
                earlier.add(url)
    return changed, earlier, unknown


def compare_days(
    space: Space, day: int, before: dict[str, Page], after: dict[str, Page]
) -> dict[str, Any]:
    """What a revisit on ``day`` did to the pages ``before`` it (``after``: the pages once
    it ended): pages refetched, re-indexed, and re-indexed against the pages changed since
    the database's copy, each difference counted under its cause.

    "Changed" is a page (status 20: a ``/p/`` page or a gemlog's index, the pages the
    days change) whose body on ``day`` is not the copy in ``before``: changed that day,
    or on an earlier day that copy predates (a revisit that day stopped before it, or it
    was not due); the latter are counted apart (``changed_before_today``). A copy that is none of the page's revisions is counted in
    ``copies_of_no_revision`` (a wrong hash: never expected)."""

    def rewritten(url: str) -> bool:
        """New, or its body differs: fetched and written again, even at the same instant
        (two runs on one mock clock) and under the same row id (SQLite gives a replaced
        last row its id again)."""
        return url not in before or after[url].content_hash != before[url].content_hash

    refetched = [
        u for u, p in after.items() if rewritten(u) or p.fetched_at != before[u].fetched_at
    ]
    reindexed = {u for u in refetched if rewritten(u) or after[u].id != before[u].id}
    changed, earlier, unknown = changed_since_copy(space, day, before)
    missed: Counter[str] = Counter()  # changed, not re-indexed
    for url in changed - reindexed:
        where = space_page(space, url)
        assert where is not None
        if not space.answers(where[0], day):
            missed[VANISHED] += 1
        elif url in refetched:
            missed["refetched, not re-indexed"] += 1
        else:
            missed["not refetched (not due, or the run stopped)"] += 1
    stale: Counter[str] = Counter()  # day-0 pages not fetched again
    for url in before.keys() - set(refetched):
        i = space.index_of(url.removeprefix("gemini://").partition("/")[0])
        gone = i is not None and not space.answers(i, day)
        stale["host gone" if gone else f"other {path_kind(url)}"] += 1
    extra: Counter[str] = Counter()  # re-indexed, not changed
    for url in reindexed - changed:
        page = after[url]
        if url not in before:
            extra[f"new URL {path_kind(url)}"] += 1
        elif page.status != before[url].status:
            extra[f"status {before[url].status} -> {page.status} {path_kind(url)}"] += 1
        else:
            extra[f"same status {page.status}, another row {path_kind(url)}"] += 1
    return {
        "pages_refetched": len(refetched),
        "not_refetched": dict(stale.most_common()),
        "pages_reindexed": len(reindexed),
        "changed_since_copy": len(changed),
        "changed_before_today": len(earlier),
        "copies_of_no_revision": unknown,
        "changed_and_reindexed": len(changed & reindexed),
        "changed_not_reindexed": dict(missed.most_common()),
        "reindexed_not_changed": dict(extra.most_common()),
        "fetch_times": sorted(after[u].fetched_at for u in refetched),
    }


def start_space(hosts: int, urls: int, addresses: int) -> tuple[subprocess.Popen[str], int]:
    argv = [sys.executable, str(BENCH / "geminispace"), "serve", "--hosts", str(hosts)]
    argv += ["--urls", str(urls), "--addresses", str(addresses)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "serving N hosts (...), day D, on 127.0.0.1:PORT"
    if "127.0.0.1:" not in line:
        proc.kill()
        raise SystemExit(f"the space server did not start: {line!r}")
    return proc, int(line.rsplit(":", 1)[1])


def next_day(server: subprocess.Popen[str]) -> int:
    """Move the space's server to its next day (``SIGUSR1``: same port and certificate,
    which the crawl database has pinned); the day it now serves."""
    assert server.stdout is not None
    server.send_signal(signal.SIGUSR1)
    for _ in range(3):  # after the two lines it printed when it started
        line = server.stdout.readline()
        if line.startswith("day "):
            return int(line.split()[1])
    raise SystemExit("the space server did not move to the next day")


def crawl(
    space: Space,
    port: int,
    addresses: int,
    db: Path,
    concurrency: int,
    profile: Path | None,
    max_time: float = CRAWL_LIMIT,
    *extra: str,
    ahead: float = 0.0,
) -> dict[str, Any]:
    """Run ``geminibot crawl`` over the space (``extra`` options added, its wall clock
    ``ahead`` seconds on); its summary, CPU seconds and peak RSS."""
    seeds = [f"gemini://{space.host(i)}/" for i in range(space.hosts)]
    peak_file = fresh_peak_file(db)
    argv = [*measured_argv("geminibot", peak_file, ahead), "crawl", *seeds, "--db", str(db)]
    argv += extra
    argv += ["--test-range", "--allow-host", f"*.{DOMAIN}", "--json"]
    argv += ["--concurrency", str(concurrency), "--max-time", str(max_time)]
    for rule in address_rules(port, addresses):
        argv += ["--connect-to", rule]
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    spy = None
    if profile is not None:
        spy_argv = [str(Path(sys.executable).with_name("py-spy")), "record", "--nonblocking"]
        spy_argv += ["-r", str(SAMPLE_RATE), "-f", "raw", "-o", str(profile)]
        spy_argv += ["--pid", str(proc.pid)]
        spy = subprocess.Popen(spy_argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - started
    if spy is not None:
        spy.wait(timeout=60)
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"geminibot crawl failed ({os.waitstatus_to_exitcode(status)})")
    summary: dict[str, Any] = json.loads(out)
    summary["wall_seconds"] = seconds
    summary["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    summary["peak_rss_mib"] = peak_rss_kib(peak_file) / 1024
    return summary


def naive(space: Space, port: int, seconds: float, tmp: Path) -> tuple[int, float]:
    from crawl_speed import crawl_naive

    seeds = [f"gemini://{space.host(i)}/" for i in range(space.hosts)]
    return crawl_naive(seeds, port, seconds, tmp)


def fill_frontier(db: Path, hosts: int, queued: int) -> None:
    """A crawl database with ``queued`` queued URLs over ``hosts`` hosts (bulk inserts)."""
    from geminibot.store.db import connect

    conn = connect(db)
    names = [f"h{i:04d}.{DOMAIN}" for i in range(hosts)]
    with conn:
        conn.executemany(
            "INSERT INTO hosts (host, first_seen, urls_total) VALUES (?, 0, ?)",
            [(h, queued // hosts) for h in names],
        )
        rows = (
            (f"gemini://{names[k % hosts]}/p/{k}.gmi", names[k % hosts], f"/p/{k}.gmi")
            for k in range(queued)
        )
        conn.executemany(
            "INSERT INTO urls (url, host, path, has_query, depth, state, updated_at)"
            " VALUES (?, ?, ?, 0, 1, 'queued', 0)",
            rows,
        )
    conn.close()


def choice_latency(db: Path, hosts: int, queued: int) -> dict[str, float]:
    """Milliseconds to choose the next host and its URL, the old way and the new."""
    import trio

    from geminibot.crawl.scheduler import Scheduler
    from geminibot.store.crawlstore import SqliteStore
    from geminibot.store.db import connect

    fill_frontier(db, hosts, queued)
    conn = connect(db)
    store = SqliteStore(conn, time.time)
    old = []
    for _ in range(3):
        t = time.perf_counter()
        store.hosts_with_work()  # the GROUP BY over every queued row
        old.append((time.perf_counter() - t) * 1000)

    class Clock:
        def start(self) -> None: ...
        def now(self) -> float:
            return time.time()

        async def sleep_until(self, when: float) -> None: ...

    scheduler = Scheduler(Clock(), test_range=True)
    t = time.perf_counter()
    scheduler.restore({}, store.hosts_with_work())  # once, when a crawl starts
    start_ms = (time.perf_counter() - t) * 1000
    new: list[float] = []

    async def choose() -> None:
        for _ in range(CHOICES):
            t = time.perf_counter()
            host = await scheduler.next_host()
            assert host is not None
            claim = store.claim(host, "bench")
            new.append((time.perf_counter() - t) * 1000)
            assert claim is not None
            store.release(claim.url)
            scheduler.give_back(host, time.time())  # its turn ended with work left

    trio.run(choose)
    conn.close()
    new.sort()
    return {
        "queued": queued,
        "group_by_ms_median": statistics.median(old),
        "start_ms": start_ms,
        "choice_ms_median": statistics.median(new),
        "choice_ms_p99": new[int(len(new) * 0.99)],
    }


def revisit(
    args: argparse.Namespace, space: Space, day: int, source: Path, db: Path, refresh: bool
) -> dict[str, Any]:
    """``day`` revisited in ``db``, a copy of the previous day's database ``source``: a
    plain crawl with the clock ``day`` days on (:data:`DAY_LATER` each), or ``--refresh``
    now. The space's server must be serving ``day``."""
    copy_db(source, db)
    bytes0, rows0 = checkpointed(db)
    before, logged = pages_of(db), last_fetch(db)
    extra = (*args.cap, "--refresh") if refresh else args.cap
    summary = crawl(
        space,
        args.port,
        args.addresses,
        db,
        args.concurrency,
        None,
        args.revisit_max_time,
        *extra,
        ahead=0.0 if refresh else day * DAY_LATER,
    )
    figures = compare_days(space, day, before, pages_of(db))
    left = db_bytes(db)  # the database and its WAL as the crawl left them
    bytes1, rows1 = checkpointed(db)
    times = figures.pop("fetch_times")
    rates = tenths(times)
    refetched = figures["pages_refetched"]
    return {
        "requests": summary.get("requests"),
        "requests_by_kind": requests_by_kind(db, logged),
        "revisits_queued": summary.get("revisits"),
        "unchanged": summary.get("unchanged"),
        **figures,
        "wall_seconds": summary["wall_seconds"],
        "pages_per_second": refetched / summary["wall_seconds"],
        "tenths": rates,
        "last_vs_first": rates[-1] / rates[0] if rates else None,
        "cpu_ms_per_page": 1000 * summary["cpu_seconds"] / max(refetched, 1),
        "peak_rss_mib": summary["peak_rss_mib"],
        "db_bytes_per_page_refetched": (left - bytes0) / max(refetched, 1),
        "checkpointed_db_bytes_per_page_refetched": (bytes1 - bytes0) / max(refetched, 1),
        "rows_added": {t: rows1[t] - rows0[t] for t in GROWING},
        "stopped_by": summary.get("stopped_at"),
    }


def revisits(
    args: argparse.Namespace,
    space: Space,
    server: subprocess.Popen[str],
    port: int,
    db: Path,
    tmp: Path,
) -> dict[str, Any]:
    """Days 1 and 2 after the day-0 crawl into ``db`` (see the module's docstring)."""
    args.port = port
    out: dict[str, Any] = {}
    if next_day(server) != 1:
        raise SystemExit("the space server is not on day 1")
    for name, refresh in (("day1_due", False), ("day1_refresh", True)):
        out[name] = revisit(args, space, 1, db, tmp / f"{name}.db", refresh)
    if args.from_scratch:  # what a crawler without revisits does on day 1
        scratch = tmp / "scratch.db"
        again = crawl(
            space,
            port,
            args.addresses,
            scratch,
            args.concurrency,
            None,
            args.max_time,
            *args.cap,
        )
        out["day1_from_scratch"] = crawl_figures(space, again, scratch)
    if next_day(server) != 2:
        raise SystemExit("the space server is not on day 2")
    # the intervals day 1 learned: changed pages halved, unchanged doubled
    day1 = tmp / "day1_due.db"
    out["day2_due"] = revisit(args, space, 2, day1, tmp / "day2_due.db", False)
    return out


def crawl_figures(space: Space, summary: dict[str, Any], db: Path) -> dict[str, Any]:
    """A crawl from scratch into ``db``: its pages, pages/s per tenth, CPU, memory, bytes."""
    with sqlite3.connect(db) as conn:
        fetched = conn.execute("SELECT url, fetched_at FROM pages").fetchall()
    conn.close()
    times = [float(t) for _, t in fetched]
    pages = len(times)
    rates = tenths(times)
    by_time = sorted(fetched, key=lambda row: float(row[1]))
    return {
        "pages": pages,
        "hosts_reached": len({url.split("/")[2] for url, _ in fetched}),
        "hosts_in_last_tenth": len({url.split("/")[2] for url, _ in by_time[pages * 9 // 10 :]}),
        "requests": summary.get("requests"),
        "wall_seconds": summary["wall_seconds"],
        "pages_per_second": pages / summary["wall_seconds"],
        "tenths": rates,
        "tenths_normal_hosts": tenths([float(t) for u, t in fetched if normal_host(space, u)]),
        "last_vs_first": rates[-1] / rates[0] if rates else None,
        "cpu_ms_per_page": 1000 * summary["cpu_seconds"] / max(pages, 1),
        "peak_rss_mib": summary["peak_rss_mib"],
        "db_bytes_per_page": db_bytes(db) / max(pages, 1),
        "stopped_by": summary.get("stopped_at"),
    }


def report(args: argparse.Namespace) -> dict[str, Any]:
    space = Space(args.hosts, args.urls)
    out: dict[str, Any] = {
        "machine": f"nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}",
        "load_average": os.getloadavg(),
        "hosts": args.hosts,
        "urls": args.urls,
        "addresses": args.addresses,
        "concurrency": args.concurrency,
    }
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        server, port = start_space(args.hosts, args.urls, args.addresses)
        try:
            db = tmp / "crawl.db"
            profile = None if args.no_profile else tmp / "spy.txt"
            summary = crawl(
                space, port, args.addresses, db, args.concurrency, profile, args.max_time, *args.cap
            )
            if args.naive_seconds > 0:
                pages, seconds = naive(space, port, args.naive_seconds, tmp)
                out["naive_pages_per_second"] = pages / seconds
            if not args.no_revisit:
                out.update(revisits(args, space, server, port, db, tmp))
        finally:
            server.kill()
            server.wait()
        out.update(crawl_figures(space, summary, db))
        if "naive_pages_per_second" in out:
            out["speedup"] = out["pages_per_second"] / out["naive_pages_per_second"]
        if profile is not None and profile.exists():
            if args.keep_profile is not None:
                args.keep_profile.write_text(profile.read_text())
            samples = split_samples(profile.read_text().splitlines())
            total = sum(samples.values()) or 1
            out["cpu_ms_per_page_by_part"] = {
                part: out["cpu_ms_per_page"] * n / total for part, n in samples.most_common()
            }
            out["samples"] = total
        if args.frontier > 0:
            out["next_host"] = choice_latency(tmp / "frontier.db", 4400, args.frontier)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=4400)
    parser.add_argument("--urls", type=int, default=600_000)
    parser.add_argument("--addresses", type=int, default=10, help="127.0.1.1 ... 127.0.1.K")
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--naive-seconds", type=float, default=20.0, help="0 skips it")
    parser.add_argument("--frontier", type=int, default=600_000, help="0 skips the choice")
    parser.add_argument("--no-profile", action="store_true", help="no py-spy")
    parser.add_argument("--no-revisit", action="store_true", help="day 0 only")
    parser.add_argument(
        "--from-scratch", action="store_true", help="also crawl day 1 into a new database"
    )
    parser.add_argument("--max-host-urls", type=int, help="the crawl's trap bound per host")
    parser.add_argument(
        "--max-time", type=float, default=CRAWL_LIMIT, help="seconds, then the crawl stops"
    )
    parser.add_argument(
        "--revisit-max-time", type=float, help="seconds each revisit may take (--max-time)"
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep-profile", type=Path, help="copy py-spy's raw samples here")
    args = parser.parse_args()
    if args.revisit_max_time is None:
        args.revisit_max_time = args.max_time
    args.cap = () if args.max_host_urls is None else ("--max-host-urls", str(args.max_host_urls))
    out = report(args)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"machine: {out['machine']}; load average {out['load_average']}")
    print(f"space: {args.hosts} hosts, {args.urls} URLs, {args.addresses} addresses")
    for key in (
        "pages",
        "requests",
        "wall_seconds",
        "pages_per_second",
        "last_vs_first",
        "stopped_by",
    ):
        print(f"{key}: {out[key]}")
    print("pages/s per tenth: " + " ".join(f"{r:.1f}" for r in out["tenths"]))
    normal = out["tenths_normal_hosts"]
    print("... of the normal hosts' pages: " + " ".join(f"{r:.1f}" for r in normal))
    print(f"CPU ms/page: {out['cpu_ms_per_page']:.2f}")
    for part, ms in out.get("cpu_ms_per_page_by_part", {}).items():
        print(f"  {part}: {ms:.2f}")
    print(f"peak RSS MiB: {out['peak_rss_mib']:.0f}; db bytes/page: {out['db_bytes_per_page']:.0f}")
    if "speedup" in out:
        print(f"naive pages/s: {out['naive_pages_per_second']:.1f}; x{out['speedup']:.1f}")
    if "next_host" in out:
        print(f"next host: {out['next_host']}")
    for name in ("day1_due", "day1_refresh", "day1_from_scratch", "day2_due"):
        if name in out:
            day = dict(out[name])
            print(f"{name}: pages/s per tenth " + " ".join(f"{r:.1f}" for r in day.pop("tenths")))
            for key, value in day.items():
                print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
