"""Search latency through the Gemini search capsule, beside ``geminibot search``.

Builds the index of ``bench/search_speed.py`` (PAGES generated text/gemini pages), starts
``geminibot serve-search`` on it as a separate process on 127.0.0.1 (rate limit lifted),
and times, for the same queries:

- ``search()``: :func:`geminibot.index.search`, in process (what ``geminibot search`` does
  once Python has started);
- ``handler``: the capsule's handler in process (search plus the gemtext page, on one of
  its worker threads), no network;
- ``capsule``: a whole Gemini request to ``serve-search`` with geminibot's client, a new
  TLS connection each time as Gemini clients make them: what a Gemini user waits for;
- ``geminibot search``: the command as a process, Python's start-up included (fewer runs).

Median and p95 over every query's runs; the first three ways are timed in turn within
each run. All of it twice: on FTS5 alone, then after ``geminibot index rebuild`` (the
tantivy top-k index that search uses while it is current). Only loopback traffic; every
loop is bounded.

    .venv/bin/python bench/searchcap_speed.py [--pages N] [--repeats N]

At Geminispace scale, on the synthetic space's store of ``bench/search_engines.py``
(filled there, or here when missing, and kept in ``--store-dir``) with its query mix,
tantivy only (FTS5 takes seconds a query there, see docs/benchmarks.md), reusing the
tantivy index when it is current:

    .venv/bin/python bench/searchcap_speed.py --space 600000 --store-dir /tmp/search600k \
        --engines tantivy
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from commands import start_serve_search
from search_engines import filled_store, queries, space_of
from search_speed import QUERIES, build

from geminibot.gemini.client import GeminiClient
from geminibot.gemini.server import Resolution
from geminibot.gemini.urls import parse_request
from geminibot.index import search
from geminibot.index.tantivy_index import open_current, rebuild, status
from geminibot.searchcap import SearchCapsule
from geminibot.store.db import connect

#: Runs of each query per way (the command as a process: CLI_REPEATS).
REPEATS = 20
CLI_REPEATS = 3
#: Longest the server may take to start or stop, and all the capsule's runs (bounds).
START_SECONDS = 60
CAPSULE_SECONDS = 600


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def percentile(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(run: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append((time.perf_counter() - t0) * 1000)
    return times


def start_server(db: Path, tmp: Path) -> tuple[subprocess.Popen[str], int]:
    unlimited = ("--rate", "1000000", "--rate-burst", "1000000")
    try:
        proc, port, _ = start_serve_search(db, tmp / "certs", "--log", os.devnull, *unlimited)
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None
    return proc, port


async def interleaved(
    conn: sqlite3.Connection, db: Path, port: int, repeats: int, mix: list[str]
) -> dict[str, dict[str, list[float]]]:
    """Each run times the three in-process and networked ways one after the other, so a
    load that comes and goes on a shared machine weighs on all of them alike."""
    capsule = SearchCapsule.of(str(db))
    client = GeminiClient(connect_to=lambda _host, _port: ("127.0.0.1", port))
    ways: dict[str, dict[str, list[float]]] = {"search()": {}, "handler": {}, "capsule": {}}
    with trio.fail_after(CAPSULE_SECONDS):
        for query in mix:
            encoded = quote(query, safe="")
            request = parse_request(f"gemini://localhost/search?{encoded}\r\n".encode())
            url = f"gemini://localhost:{port}/search?{encoded}"
            for way in ways.values():
                way[query] = []
            for _ in range(repeats):
                ways["search()"][query] += timed(lambda q=query: search(conn, q, 10), 1)
                t0 = time.perf_counter()
                answer = capsule(request)
                if not isinstance(answer, Resolution):
                    answer = await answer
                ways["handler"][query].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                response = await client.fetch(url)
                ways["capsule"][query].append((time.perf_counter() - t0) * 1000)
                assert response.status == 20, (response.status, response.meta)
    capsule.close()
    return ways


def measure(db: Path, tmp: Path, repeats: int, mix: list[str]) -> dict[str, dict[str, list[float]]]:
    conn = connect(db, create=False)
    proc, port = start_server(db, tmp)
    try:
        ways = trio.run(interleaved, conn, db, port, repeats, mix)
    finally:
        proc.terminate()
        proc.wait(timeout=START_SECONDS)
    conn.close()
    command = [sys.executable, "-m", "geminibot", "search", "--db", str(db)]
    ways["geminibot search"] = {
        query: timed(
            lambda q=query: subprocess.run([*command, q], capture_output=True, check=False),
            CLI_REPEATS,
        )
        for query in mix
    }
    return ways


def report(engine: str, ways: dict[str, dict[str, list[float]]], mix: list[str]) -> None:
    print(f"\n### {engine}: per query, median ms\n")
    print("| query | " + " | ".join(ways) + " |")
    print("|---|" + "---:|" * len(ways))
    for query in mix:
        cells = [f"{statistics.median(ways[w][query]):.1f}" for w in ways]
        print(f"| `{query}` | " + " | ".join(cells) + " |")
    print(f"\n### {engine}: all queries together\n")
    print("| way | runs | median ms | p95 ms |")
    print("|---|---:|---:|---:|")
    for way, per_query in ways.items():
        times = [t for q in mix for t in per_query[q]]
        print(
            f"| {way} | {len(times)} | {statistics.median(times):.1f} | "
            f"{percentile(times, 0.95):.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000, help="pages in the index")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs of each query")
    parser.add_argument("--space", type=int, help="URLs of a synthetic-space store instead")
    parser.add_argument("--store-dir", type=Path, help="where --space's store is kept")
    parser.add_argument("--engines", default="fts5,tantivy", help="fts5, tantivy or both")
    args = parser.parse_args()
    engines = args.engines.split(",")
    if not set(engines) <= {"fts5", "tantivy"}:
        parser.error("--engines: fts5, tantivy or both")
    if args.space is not None and args.store_dir is None:
        parser.error("--space needs --store-dir")
    machine = (
        f"Machine: nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}, "
        f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at the start."
    )
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        if args.space is not None:
            args.store_dir.mkdir(parents=True, exist_ok=True)
            db, made = filled_store(args.space, args.store_dir)
            mix = [query for _, query in queries(space_of(args.space)[1])]
            print(f"Index: the {args.space:,}-URL synthetic space: {made}. {machine}")
        else:
            db = tmp / "index.sqlite"
            seconds = build(db, args.pages)
            mix = list(QUERIES)
            print(f"Index: {args.pages:,} pages, built in {seconds:.1f} s. {machine}")
        conn = connect(db, create=False)
        if "fts5" in engines:
            if open_current(conn) is not None:  # search would use it: set it aside
                raise SystemExit(f"{db} has a current tantivy index: use --engines tantivy")
            report("FTS5 (no tantivy index)", measure(db, tmp, args.repeats, mix), mix)
        if "tantivy" in engines:
            if open_current(conn) is None:
                t0 = time.perf_counter()
                rebuild(conn)
                print(f"\n(tantivy index rebuilt in {time.perf_counter() - t0:.1f} s)")
            else:
                built = status(conn)
                print(f"\n(current tantivy index reused: built in {built['seconds']} s)")
            report("tantivy (geminibot index rebuild)", measure(db, tmp, args.repeats, mix), mix)
        conn.close()


if __name__ == "__main__":
    main()
