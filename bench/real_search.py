"""Known-item search on real capsules: geminibot's two engines against plain FTS5 bm25.

Serves a corpus of real capsules (``CORPUS/capsules/HOST/``, as in the shared
real-capsules folder: its README) with ``capsule-server`` on loopback, crawls every
capsule with ``geminibot crawl --test-range``, builds the index (``geminibot index
rebuild``), then searches for a sample of the crawled gemtext pages the way a person
remembering one would, two ways:

- **heading**: the words of the page's first heading, its first 12 (pages without one,
  or whose heading another page shares word for word, are not known items that way);
- **rare**: the page's three rarest words (fewest pages of the corpus hold them, ties
  broken by the seed), from the file's own text (letters and digits, 3 characters or
  more, not only digits).

Engines: geminibot's tantivy index (what ``geminibot search`` uses after ``index
rebuild``), geminibot's FTS5 path (``engine="fts5"``), and a plain SQLite FTS5 table of
each page's file as served, ranked by its default ``bm25()``. For each: MRR (reciprocal
rank of the page in the top 10, else 0), the share found first and in the top 10, and
the search's latency in process. Then the titles of every result shown (blank, longest)
and ``geminibot search``'s wall time as a command (start-up included).

    .venv/bin/python bench/real_search.py /work/shared/real-capsules [--work DIR]
        [--sample 200] [--seed 37] [--runs 21]

``--work DIR`` keeps the crawl there and reuses it on the next run (the index is rebuilt
each time); without it, a temporary folder. Traffic stays on 127.0.0.1; the crawl is
bounded by ``--max-time``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from geminibot.index import search
from geminibot.index.authority import compute_authority
from geminibot.index.search import to_fts_query
from geminibot.index.tantivy_index import rebuild
from geminibot.index.text import MAX_TITLE_LENGTH
from geminibot.store.authority import crawl_seeds

BIN = Path(sys.executable).parent
#: The server's rate limits, raised: this measures search, not the crawl's pacing.
SERVER_RATE = "1000"
#: Longest the crawl may take.
CRAWL_MAX_TIME = "15m"
#: Words of a heading a person types at most (a few "headings" are whole paragraphs).
HEADING_WORDS = 12
#: Results looked at per query.
TOP = 10
_WORD = re.compile(r"[^\W_]+")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(
    capsules: Path, work: Path, rate: str | None = SERVER_RATE
) -> tuple[subprocess.Popen[bytes], int]:
    """``capsule-server serve CAPSULES`` on loopback, its access log in ``work``: its
    rate limit per client ``rate`` requests/s and burst (None: the server's defaults)."""
    port = free_port()
    argv = [str(BIN / "capsule-server"), "serve", str(capsules), "--port", str(port)]
    argv += ["--certs", str(work / "certs"), "--log", str(work / "access.log")]
    if rate is not None:
        argv += ["--rate", rate, "--rate-burst", rate]
    server = subprocess.Popen(argv)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, port
        except OSError:
            time.sleep(0.2)
    server.terminate()
    raise SystemExit("capsule-server did not start")


def crawl(capsules: Path, db: Path, work: Path) -> None:
    hosts = sorted(p.name for p in capsules.iterdir() if p.is_dir())
    server, port = serve(capsules, work)
    try:
        started = time.monotonic()
        subprocess.run(
            [
                str(BIN / "geminibot"),
                "crawl",
                *(f"gemini://{h}/" for h in hosts),
                "--db",
                str(db),
                "--test-range",
                "--connect-to",
                f"*.{hosts[0].split('.', 1)[1]}:1965:127.0.0.1:{port}",
                "--max-time",
                CRAWL_MAX_TIME,
                "--json",
            ],
            check=False,
            stdout=subprocess.DEVNULL,
        )
        print(f"crawled {len(hosts)} capsules in {time.monotonic() - started:.0f} s")
    finally:
        server.terminate()
        server.wait(timeout=30)


def file_of(capsules: Path, url: str) -> Path | None:
    """The corpus file a crawled URL was served from."""
    parts = urlsplit(url)
    path = capsules / (parts.hostname or "") / unquote(parts.path).lstrip("/")
    if path.is_dir():
        path = path / "index.gmi"
    return path if path.is_file() else None


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def first_heading(text: str) -> str:
    pre = False
    for line in text.splitlines():
        if line.startswith("```"):
            pre = not pre
        elif not pre and line.startswith("#"):
            return " ".join(words(line)[:HEADING_WORDS])
    return ""


def make_queries(pages: dict[str, str], sample: int, seed: int) -> dict[str, list[tuple[str, str]]]:
    """(query, the page's URL) of each kind, for ``sample`` pages chosen with ``seed``."""
    rng = random.Random(seed)
    frequency: Counter[str] = Counter()
    for text in pages.values():
        frequency.update(set(words(text)))
    headings = {url: first_heading(text) for url, text in pages.items()}
    shared = Counter(h for h in headings.values() if h)
    chosen = rng.sample(sorted(pages), min(sample, len(pages)))
    kinds: dict[str, list[tuple[str, str]]] = {"heading": [], "rare": []}
    for url in chosen:
        heading = headings[url]
        if heading and shared[heading] == 1:
            kinds["heading"].append((heading, url))
        candidates = sorted({w for w in words(pages[url]) if len(w) >= 3 and not w.isdigit()})
        rng.shuffle(candidates)
        rare = sorted(candidates, key=lambda w: frequency[w])[:3]
        if len(rare) >= 2:
            kinds["rare"].append((" ".join(rare), url))
    return kinds


def plain_table(pages: dict[str, str]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE plain USING fts5(url UNINDEXED, text)")
    conn.executemany("INSERT INTO plain VALUES (?, ?)", sorted(pages.items()))
    return conn


Engine = Callable[[str], list[str]]


def engines(conn: sqlite3.Connection, plain: sqlite3.Connection) -> dict[str, Engine]:
    def plain_bm25(query: str) -> list[str]:
        rows = plain.execute(
            "SELECT url FROM plain WHERE plain MATCH ? ORDER BY bm25(plain) LIMIT ?",
            (to_fts_query(query), TOP),
        )
        return [r[0] for r in rows]

    return {
        "geminibot (tantivy)": lambda q: [r.url for r in search(conn, q, TOP, engine="tantivy")],
        "geminibot (FTS5)": lambda q: [r.url for r in search(conn, q, TOP, engine="fts5")],
        "plain FTS5 bm25": plain_bm25,
    }


def measure(engine: Engine, queries: list[tuple[str, str]]) -> dict[str, float]:
    ranks: list[int | None] = []
    seconds: list[float] = []
    for query, url in queries:
        started = time.perf_counter()
        found = engine(query)
        seconds.append(time.perf_counter() - started)
        ranks.append(found.index(url) + 1 if url in found else None)
    n = len(queries)
    return {
        "queries": n,
        "mrr": sum(1 / r for r in ranks if r) / n,
        "first": sum(r == 1 for r in ranks) / n,
        "top10": sum(r is not None for r in ranks) / n,
        "median_ms": statistics.median(seconds) * 1000,
        "p95_ms": statistics.quantiles(seconds, n=20)[18] * 1000,
    }


def titles(conn: sqlite3.Connection, queries: list[tuple[str, str]]) -> dict[str, int]:
    shown = [r for q, _ in queries for r in search(conn, q, TOP)]
    return {
        "results": len(shown),
        "blank": sum(not r.title.strip() for r in shown),
        "over_120": sum(len(r.title) > MAX_TITLE_LENGTH for r in shown),
        "longest": max((len(r.title) for r in shown), default=0),
    }


def command_wall(db: Path, query: str, runs: int) -> dict[str, dict[str, float]]:
    """Wall time of ``geminibot search QUERY --db DB`` as a person runs it (start-up
    included), beside Python starting and doing nothing, and importing the modules the
    command used to load (the crawl's command module, with the policy engine), run in
    turn so that the machine's load falls on all three alike."""
    commands = {
        "geminibot search": [str(BIN / "geminibot"), "search", query, "--db", str(db)],
        "python -c pass": [sys.executable, "-c", "pass"],
        "import geminibot.crawl.cli": [sys.executable, "-c", "import geminibot.crawl.cli"],
    }
    seconds: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run(argv, check=False, stdout=subprocess.DEVNULL)
            seconds[name].append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return {
        name: {
            "runs": runs,
            "median_ms": statistics.median(times) * 1000,
            "p95_ms": statistics.quantiles(times, n=20)[18] * 1000,
            "cpu_median_ms": statistics.median(cpu[name]) * 1000,
        }
        for name, times in seconds.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="the corpus folder (holding capsules/)")
    parser.add_argument("--work", type=Path, help="keep the crawl here (reused when present)")
    parser.add_argument("--sample", type=int, default=200, help="pages searched for")
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--runs", type=int, default=21, help="runs of the search command")
    parser.add_argument("--json", action="store_true", help="the figures as one JSON object")
    args = parser.parse_args()
    capsules = args.corpus / "capsules"
    if not capsules.is_dir():
        raise SystemExit(f"{capsules}: not a folder of capsules")
    with tempfile.TemporaryDirectory() as temp:
        work = args.work or Path(temp)
        work.mkdir(parents=True, exist_ok=True)
        db = work / "crawl.db"
        if not db.exists():
            crawl(capsules, db, work)
        conn = sqlite3.connect(db, isolation_level=None)  # the store's transactions are its own
        compute_authority(conn, crawl_seeds(conn))  # as geminibot index rebuild does
        built = rebuild(conn)
        print(f"index: {built['pages']} pages in {built['seconds']} s", file=sys.stderr)
        report = run(conn, capsules, db, args)
    if args.json:
        print(json.dumps(report))


def run(
    conn: sqlite3.Connection, capsules: Path, db: Path, args: argparse.Namespace
) -> dict[str, object]:
    pages: dict[str, str] = {}
    for (url,) in conn.execute(
        "SELECT url FROM pages WHERE text_indexed AND mime = 'text/gemini' ORDER BY url"
    ):
        path = file_of(capsules, url)
        if path is not None:
            pages[url] = path.read_text(encoding="utf-8", errors="replace")
    kinds = make_queries(pages, args.sample, args.seed)
    print(
        f"{len(pages)} gemtext pages; {len(kinds['heading'])} heading and "
        f"{len(kinds['rare'])} rare-word queries (sample {args.sample}, seed {args.seed})"
    )
    figures: dict[str, dict[str, dict[str, float]]] = {}
    print(f"{'engine':<22}{'query':<9}{'MRR':>7}{'first':>7}{'top 10':>8}{'median':>9}{'p95':>8}")
    for name, engine in engines(conn, plain_table(pages)).items():
        figures[name] = {}
        for kind, queries in kinds.items():
            f = figures[name][kind] = measure(engine, queries)
            print(
                f"{name:<22}{kind:<9}{f['mrr']:>7.3f}{f['first']:>7.3f}{f['top10']:>8.3f}"
                f"{f['median_ms']:>7.1f}ms{f['p95_ms']:>6.1f}ms"
            )
    shown = titles(conn, kinds["heading"] + kinds["rare"])
    print(
        f"titles of {shown['results']} results shown: {shown['blank']} blank, "
        f"{shown['over_120']} over {MAX_TITLE_LENGTH} characters, longest {shown['longest']}"
    )
    wall = command_wall(db, kinds["rare"][0][0], args.runs)
    for name, w in wall.items():
        print(
            f"{name} ({w['runs']:.0f} runs): median {w['median_ms']:.0f} ms, "
            f"p95 {w['p95_ms']:.0f} ms wall; median {w['cpu_median_ms']:.0f} ms CPU"
        )
    return {"figures": figures, "titles": shown, "command": wall}


if __name__ == "__main__":
    main()
