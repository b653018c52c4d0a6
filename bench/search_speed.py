"""Search latency on an index the size of a full crawl.

Builds a geminibot index of PAGES generated text/gemini pages (a vocabulary of common and
rare words, Zipf-like, ~300 words a page) in a temporary SQLite file, then times
``geminibot.index.search`` for single words, several words, a phrase, a prefix and a word
that matches nothing; then the same with query operators (issue 58: ``site:``,
``-site:``, a ``site:*.`` pattern, ``intitle:``, ``inurl:``, ``mime:``, ``size:``, alone
and with words), side by side in one run; then ``geminibot search`` as a command (wall
time, start-up included). Issue 6 asks for results "in well under a second"; issue 58
for a p95 with operators under 100 ms and the command's median at most 150 ms at
600,000 URLs.

    .venv/bin/python bench/search_speed.py [--pages N] [--tantivy] [--repeats N]
        [--keep DIR] [--cli-runs N] [--tree DIR]

The command runs as an installed geminibot does, from compiled bytecode: the package's
``__pycache__`` is brought up to date first (pip compiles it at install; a checkout
whose bytecode is older than its sources, under ``PYTHONDONTWRITEBYTECODE=1``, compiles
every module it imports on every run: a search on 20,000 pages took 124 ms of CPU
instead of 90). ``--tree DIR`` times the command of another checkout too (the
code before a change: ``git worktree add --detach DIR main``), run by run in turn with
this one's, through this one's console script, so that both meet the same load.

``--keep DIR`` keeps the generated store (and index) in DIR and reuses it when it is
there with the same number of pages. The pages are on 40 hosts (ten of them subdomains,
``blog.hN.example``), one in ten ``text/plain``, of 50 to 600 words.

With ``--tantivy``, link authority is computed (plain PageRank over the pages' 40 hosts)
and the tantivy index built before timing, so that the times are the tantivy search with
its re-rank by authority; the table then also shows the 95th percentile.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from geminibot.index import search
from geminibot.store.db import connect, transaction
from geminibot.store.pages import Page, store_page

QUERIES = (
    "gemini",
    "capsule protocol",
    '"tiny internet"',
    "astro*",
    "zyxwvutsrq",
    "garden OR orbit",
)
#: Queries with operators (issue 58), timed beside QUERIES.
OPERATOR_QUERIES = (
    "site:h3.example",
    "gemini site:h3.example",
    "gemini -site:h3.example",
    "capsule site:*.h3.example",
    "gemini intitle:page",
    "inurl:page gemini",
    "mime:text/plain",
    "orbit mime:text/plain",
    "size:>3k",
    "gemini size:<1k",
    "garden intitle:orbit site:h7.example size:<4k",
)
#: Each query is run this many times; the table shows the median and the worst.
REPEATS = 20


def vocabulary(rng: random.Random) -> list[str]:
    common = ["gemini", "capsule", "protocol", "server", "client", "page", "link", "text"]
    common += ["tiny", "internet", "astronomy", "astrolabe", "garden", "orbit"]
    rare = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 9)))
        for _ in range(20_000)
    ]
    return [*common, *rare]


def build(path: Path, pages: int) -> float:
    rng = random.Random(1965)
    words = vocabulary(rng)
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    conn = connect(path)
    started = time.perf_counter()
    batch = 500
    for start in range(0, pages, batch):
        with transaction(conn):
            for i in range(start, min(start + batch, pages)):
                body = " ".join(rng.choices(words, weights, k=rng.randint(50, 600)))
                n = i % 40
                host = f"h{n}.example" if n < 30 else f"blog.h{n - 30}.example"
                mime = "text/plain" if i % 10 == 9 else "text/gemini"
                store_page(
                    conn,
                    Page(
                        url=f"gemini://{host}/page/{i}.gmi",
                        host=host,
                        status=20,
                        meta=mime,
                        fetched_at=1.8e9 + i,
                        size=len(body),
                        mime=mime,
                        title=f"Page {i} {rng.choice(words)}",
                        headings=(rng.choice(words),),
                        text=body,
                    ),
                    "indexer",
                )
    conn.close()
    return time.perf_counter() - started


def p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20, method="inclusive")[-1] if len(times) > 1 else times[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000, help="pages in the index")
    parser.add_argument(
        "--tantivy", action="store_true", help="time the tantivy index, authority applied"
    )
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs of each query")
    parser.add_argument("--keep", type=Path, help="keep (and reuse) the store in this folder")
    parser.add_argument(
        "--cli-runs", type=int, default=11, help="runs of the geminibot search command"
    )
    parser.add_argument(
        "--tree", type=Path, help="also time the command of the checkout in this folder"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        db = folder / f"index-{args.pages}.sqlite"
        seconds = 0.0
        if not db.exists():
            seconds = build(db, args.pages)
        size = db.stat().st_size + sum(p.stat().st_size for p in folder.glob("*-wal"))
        conn = connect(db, create=False)
        if args.tantivy:
            from geminibot.index.authority import compute_authority
            from geminibot.index.tantivy_index import open_current, rebuild

            if open_current(conn) is None:
                started = time.perf_counter()
                compute_authority(conn, [])
                rebuild(conn)
                print(f"tantivy index built in {time.perf_counter() - started:.0f} s")
        built = f"built in {seconds:.1f} s" if seconds else "reused"
        print(
            f"Index: {args.pages:,} pages, {size / 2**20:.0f} MiB, {built}. "
            f"Machine: nproc {os.cpu_count()}, Python {platform.python_version()}, "
            f"load {os.getloadavg()[0]:.1f}."
        )
        engine = "tantivy" if args.tantivy else "fts5"
        for title, queries in (("words", QUERIES), ("operators", OPERATOR_QUERIES)):
            every = time_queries(conn, engine, queries, args.repeats)
            print(
                f"| all {title} | | {statistics.median(every):.1f} | {p95(every):.1f}"
                f" | {max(every):.1f} |"
            )
        conn.close()
        if args.cli_runs:
            time_command(db, args.cli_runs, args.tree)


def time_queries(conn: object, engine: str, queries: tuple[str, ...], repeats: int) -> list[float]:
    """Time each query ``repeats`` times (a table row each); every time, in ms."""
    print(f"\n| query | results (limit 10) | median ms | p95 ms | worst ms (of {repeats}) |")
    print("|---|---:|---:|---:|---:|")
    every: list[float] = []
    for query in queries:
        times = []
        found = 0
        for _ in range(repeats):
            t0 = time.perf_counter()
            found = len(search(conn, query, limit=10, engine=engine))  # type: ignore[arg-type]
            times.append((time.perf_counter() - t0) * 1000)
        every += times
        print(
            f"| `{query}` | {found} | {statistics.median(times):.1f} | {p95(times):.1f}"
            f" | {max(times):.1f} |"
        )
    return every


#: This checkout: the folder that holds the ``geminibot`` package these benchmarks run.
THIS_TREE = Path(__file__).resolve().parents[1]


def time_command(db: Path, runs: int, other: Path | None = None) -> None:
    """``geminibot search`` as a person runs it: wall time, start-up included (and
    ``--help``, ``stats`` and ``why``, the other commands that read a crawl); with
    ``other``, the command of that checkout too, in turn with this one's run by run."""
    trees = [THIS_TREE] + ([other.resolve()] if other else [])
    for tree in trees:  # (as installed: pip compiles the bytecode)
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(tree / "geminibot")],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    script = str(Path(sys.executable).parent / "geminibot")
    commands = [
        ("geminibot search gemini", [script, "search", "gemini", "--db", str(db)], trees),
        (
            "geminibot search capsule protocol site:h3.example",
            [script, "search", "capsule", "protocol", "site:h3.example", "--db", str(db)],
            trees,
        ),
        ("geminibot --help", [script, "--help"], trees),
        ("geminibot stats", [script, "stats", "--db", str(db)], trees),
        (
            "geminibot why URL",
            [script, "why", "gemini://h3.example/page/3.gmi", "--db", str(db)],
            trees,
        ),
        ("python -c pass", [sys.executable, "-c", "pass"], trees[:1]),  # Python alone
    ]
    print(f"\n| command | tree | wall median ms | wall worst ms (of {runs}) | CPU median ms |")
    print("|---|---|---:|---:|---:|")
    started = os.getloadavg()[0]
    for name, line, which in commands:
        walls: dict[Path, list[float]] = {tree: [] for tree in which}
        cpus: dict[Path, list[float]] = {tree: [] for tree in which}
        for _ in range(runs):
            for tree in which:
                env = {**os.environ, "PYTHONPATH": str(tree)}
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                done = subprocess.run(line, check=False, capture_output=True, text=True, env=env)
                if done.returncode > 1:  # (1: an answer, "not in the index")
                    raise SystemExit(f"{name} ({tree}) failed: {done.stderr}")
                walls[tree].append((time.perf_counter() - t0) * 1000)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                cpus[tree].append(used * 1000)
        for tree in which:
            print(
                f"| `{name}` | {tree.name} | {statistics.median(walls[tree]):.0f}"
                f" | {max(walls[tree]):.0f} | {statistics.median(cpus[tree]):.0f} |"
            )
    print(
        f"\nLoad average (1 min): {started:.1f} before the commands, {os.getloadavg()[0]:.1f} after."
    )


if __name__ == "__main__":
    main()
