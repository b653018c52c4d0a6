"""Whole-Geminispace crawl on one machine: the synthetic space crawled from scratch.

    nice -n 10 .venv/bin/python bench/space_crawl.py [--hosts 4400] [--urls 600000]
        [--addresses 10] [--concurrency 128] [--naive-seconds 20] [--frontier 600000]
        [--no-profile] [--json] [--max-time SECONDS]

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
  in-memory ready-host queue, then the host's oldest URL by the ``(host, state, id)``
  index), median and 99th percentile over :data:`CHOICES` choices.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from geminispace.server import address_rules  # noqa: E402
from geminispace.space import DOMAIN, Space  # noqa: E402
from machine import cpu_model  # noqa: E402

#: py-spy samples per second of the crawler.
SAMPLE_RATE = 100
#: Next-host choices timed at ``--frontier`` queued URLs.
CHOICES = 2000
#: Longest a crawl may take (seconds); it stops there (resumable) and the figures say so.
CRAWL_LIMIT = 3 * 3600.0
#: Where a py-spy frame puts its sample (the innermost frame that matches wins). py-spy
#: names a frame ``function (file:line)``, the file relative to its ``sys.path`` entry
#: (``ssl.py``, ``trio/_ssl.py``, ``geminibot/crawl/store.py``); a C function (OpenSSL,
#: SQLite) counts for the Python frame that called it.
CATEGORIES = (
    ("TLS", ("(ssl.py:", "trio/_ssl.py")),
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
    ("SQLite", ("crawl/store.py", "crawl/frontier.py", "geminibot/index/", "sqlite3/")),
    ("TCP", ("trio/_socket.py", "trio/_highlevel_open_tcp_stream.py")),
)
#: A sample whose innermost frame is one of these is the loop waiting, not CPU: dropped
#: (py-spy's own idle test is not reliable with ``--nonblocking``).
IDLE = ("get_events (trio/_core/_io_epoll.py",)


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


def crawl(
    space: Space,
    port: int,
    addresses: int,
    db: Path,
    concurrency: int,
    profile: Path | None,
    max_time: float = CRAWL_LIMIT,
) -> dict[str, Any]:
    """Run ``geminibot crawl`` over the space; its summary, CPU seconds and peak RSS."""
    seeds = [f"gemini://{space.host(i)}/" for i in range(space.hosts)]
    argv = [sys.executable, "-m", "geminibot", "crawl", *seeds, "--db", str(db)]
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
    summary["peak_rss_mib"] = usage.ru_maxrss / 1024
    return summary


def naive(space: Space, port: int, seconds: float, tmp: Path) -> tuple[int, float]:
    from crawl_speed import crawl_naive

    seeds = [f"gemini://{space.host(i)}/" for i in range(space.hosts)]
    return crawl_naive(seeds, port, seconds, tmp)


def fill_frontier(db: Path, hosts: int, queued: int) -> None:
    """A crawl database with ``queued`` queued URLs over ``hosts`` hosts (bulk inserts)."""
    from geminibot.index import connect

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
    from geminibot.crawl.scheduler import Scheduler
    from geminibot.crawl.store import SqliteStore
    from geminibot.index import connect

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
    new = []
    ready: list[str] = []
    for _ in range(CHOICES):
        t = time.perf_counter()
        if not ready:
            ready = scheduler.take_ready()
        host = ready.pop(0)
        claim = store.claim(host, "bench")
        new.append((time.perf_counter() - t) * 1000)
        assert claim is not None
        store.release(claim.url)
        scheduler.drop_work(host)
        scheduler.add_work([host])  # its worker ended with work left: ready again
    conn.close()
    new.sort()
    return {
        "queued": queued,
        "group_by_ms_median": statistics.median(old),
        "start_ms": start_ms,
        "choice_ms_median": statistics.median(new),
        "choice_ms_p99": new[int(len(new) * 0.99)],
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
                space, port, args.addresses, db, args.concurrency, profile, args.max_time
            )
            if args.naive_seconds > 0:
                pages, seconds = naive(space, port, args.naive_seconds, tmp)
                out["naive_pages_per_second"] = pages / seconds
        finally:
            server.kill()
            server.wait()
        with sqlite3.connect(db) as conn:
            fetched = conn.execute("SELECT url, fetched_at FROM pages").fetchall()
        times = [float(t) for _, t in fetched]
        pages = len(times)
        rates = tenths(times)
        steady = [float(t) for url, t in fetched if normal_host(space, url)]
        out["tenths_normal_hosts"] = tenths(steady)
        out.update(
            pages=pages,
            requests=summary.get("requests"),
            wall_seconds=summary["wall_seconds"],
            pages_per_second=pages / summary["wall_seconds"],
            tenths=rates,
            last_vs_first=rates[-1] / rates[0] if rates else None,
            cpu_ms_per_page=1000 * summary["cpu_seconds"] / max(pages, 1),
            peak_rss_mib=summary["peak_rss_mib"],
            db_bytes_per_page=db_bytes(db) / max(pages, 1),
            stopped_by=summary.get("stopped_at"),
        )
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
    parser.add_argument(
        "--max-time", type=float, default=CRAWL_LIMIT, help="seconds, then the crawl stops"
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep-profile", type=Path, help="copy py-spy's raw samples here")
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
