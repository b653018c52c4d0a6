"""How soon a changed or removed page shows in search, with ``geminibot serve`` running.

    .venv/bin/python bench/freshness.py --hosts 20 --urls 2000 --out /tmp/freshness.json

1. Serves the synthetic Geminispace (``bench/geminispace``, day 0; ``--change-rate`` of its
   ``/p/`` pages change on day 1, ``--remove-rate`` answer 51 from then) and starts
   ``geminibot serve`` on it (crawl that keeps going, index updater, search capsule).
2. Once the first crawl is done and the index has caught up, picks the changed pages and
   the removed pages the crawl indexed, each with a phrase of its first paragraph as it
   was (old words) and, for a changed page, as it is on day 1 (new words); checks each old
   phrase finds its page.
3. Moves the server to day 1, makes every finished URL due (as a day would) and restarts
   the crawl component (SIGTERM to it: the service starts it again; its first run
   revisits what is due).
4. Polls: for each page, once the store shows its re-fetch (``pages.fetched_at``), searches
   (``geminibot.index.search``, the capsule's code, on a connection of its own) until the
   page is found by its new phrase and not its old one (changed), or no longer found
   (removed). Its latency: that moment minus the re-fetch. Also counts searches that did
   not use the tantivy index (FTS5's full scan).

Meanwhile a client thread asks the service's search capsule (a real Gemini client,
ignition) ``--rate`` queries a second, the pages' phrases and words in turn, and times
each answer: the search latency while the crawl and the index updates run.

Prints one JSON object (median and worst latencies, counts). Loopback only, bounded by
``--deadline`` seconds per phase.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from geminispace.space import DOMAIN, Space

from geminibot.index import connect, search
from geminibot.index.tantivy_index import open_current

ROOT = Path(__file__).resolve().parent.parent
#: Seconds between two looks at the store and the index.
POLL = 0.25
#: Words of a page's first paragraph searched as a phrase.
PHRASE_WORDS = 4


def first_paragraph(gemtext: str) -> list[str]:
    lines = gemtext.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("## "))
    return lines[start + 2].split()


def phrase(words: list[str], at: int = 0) -> str:
    return '"' + " ".join(words[at : at + PHRASE_WORDS]) + '"'


def start_space(args: argparse.Namespace) -> tuple[subprocess.Popen[str], int]:
    argv = [sys.executable, str(ROOT / "bench" / "geminispace"), "serve"]
    argv += ["--hosts", str(args.hosts), "--urls", str(args.urls), "--seed", str(args.seed)]
    argv += ["--change-rate", str(args.change_rate), "--remove-rate", str(args.remove_rate)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    proc.stdout.readline()  # the crawl hint
    return proc, int(first.rsplit(":", 1)[1])


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class CapsuleLoad:
    """A thread asking the search capsule ``rate`` queries a second until stopped."""

    def __init__(self, port: int, queries: list[str], rate: float, work: Path) -> None:
        self.port, self.queries, self.rate, self.work = port, queries, rate, work
        self.seconds: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import cryptography.hazmat.primitives.serialization  # noqa: F401  (before ignition)
        import ignition

        ignition.set_default_hosts_file(str(self.work / "known_hosts"))
        n = 0
        while not self._stop.wait(1.0 / self.rate):
            query = urllib.parse.quote(self.queries[n % len(self.queries)])
            n += 1
            started = time.perf_counter()
            try:
                answer = ignition.request(
                    f"gemini://localhost:{self.port}/search?{query}", timeout=30
                )
                ok = answer.status == "20"
            except Exception:
                ok = False
            if ok:
                self.seconds.append(time.perf_counter() - started)
            else:
                self.failures += 1

    def __enter__(self) -> CapsuleLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def summary(self) -> dict[str, object]:
        values = sorted(self.seconds)
        if not values:
            return {"queries": 0, "failures": self.failures}
        return {
            "queries": len(values),
            "failures": self.failures,
            "median_ms": round(1000 * statistics.median(values), 1),
            "p95_ms": round(1000 * values[int(0.95 * (len(values) - 1))], 1),
            "max_ms": round(1000 * values[-1], 1),
        }


def start_service(work: Path, space: Space, port: int, search_port: int) -> subprocess.Popen[str]:
    config = work / "engine.toml"
    config.write_text(
        f'[service]\ndb = "{work / "engine.db"}"\nrestart_delay = 0.2\n'
        f"[crawl]\nseeds = {json.dumps(space.seeds())}\ntest_range = true\n"
        f'min_delay = 0.0\nallow_hosts = ["*.{DOMAIN}"]\n'
        f'connect_to = ["*.{DOMAIN}:1965:127.0.0.1:{port}"]\n'
        f'[search]\nport = {search_port}\ncerts = "{work / "certs"}"\n'
        f"[metrics]\nport = {free_port()}\n"
    )
    log = (work / "service.log").open("a")
    return subprocess.Popen(
        [sys.executable, "-m", "geminibot", "serve", "--config", str(config)],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait(check: object, what: str, deadline: float) -> None:
    end = time.monotonic() + deadline
    while not check():  # type: ignore[operator]
        if time.monotonic() > end:
            raise SystemExit(f"freshness: gave up waiting for {what}")
        time.sleep(1.0)


def settled(work: Path) -> bool:
    """The crawl's first run has ended (its summary is in the service's log) and the
    index holds every change of the store."""
    log = (work / "service.log").read_text() if (work / "service.log").exists() else ""
    if '"pages_per_second"' not in log:
        return False
    conn = sqlite3.connect(work / "engine.db")
    try:
        return open_current(conn) is not None and _lag(conn) == 0
    finally:
        conn.close()


def _lag(conn: sqlite3.Connection) -> int:
    from geminibot.index.tantivy_index import index_lag

    lag = index_lag(conn)
    return -1 if lag is None else lag


def targets(conn: sqlite3.Connection, space: Space) -> dict[str, dict[str, object]]:
    """Changed and removed ``/p/`` pages the crawl indexed, of hosts that still answer on
    day 1, with their phrases."""
    out: dict[str, dict[str, object]] = {}
    for (url,) in conn.execute("SELECT url FROM pages WHERE text_indexed AND url LIKE '%/p/%'"):
        host, path = url.split("/")[2], url.split("/", 3)[3]
        i, j = space.index_of(host), int(path[2:-4])
        assert i is not None
        if not space.answers(i, 1):
            continue  # a host that vanishes on day 1: not re-fetched, nothing to see
        old = first_paragraph(space.tree_page(i, j, 0))
        if space.removed(i, j, 1):
            out[url] = {"kind": "removed", "old": phrase(old)}
        elif space.changed(i, j, 1):
            new = first_paragraph(space.tree_page(i, j, 1))
            out[url] = {"kind": "changed", "old": phrase(old), "new": phrase(new)}
    return out


def found(conn: sqlite3.Connection, query: str, url: str) -> bool:
    return url in {r.url for r in search(conn, query, limit=50)}


def crawl_pid(work: Path) -> int:
    started = [
        json.loads(line)
        for line in (work / "service.log").read_text().splitlines()
        if line.startswith("{")
    ]
    return int(
        next(
            r["pid"]
            for r in reversed(started)
            if r["component"] == "crawl" and r.get("message") == "started"
        )
    )


def measure(
    work: Path,
    space_proc: subprocess.Popen[str],
    pages: dict[str, dict[str, object]],
    deadline: float,
) -> dict[str, object]:
    db = work / "engine.db"
    space_proc.send_signal(signal.SIGUSR1)  # day 1
    day1 = time.time()
    conn = connect(db)
    with conn:
        conn.execute(
            "UPDATE urls SET next_visit = ? WHERE state IN ('done', 'refused', 'failed')", (day1,)
        )
    os.kill(crawl_pid(work), signal.SIGTERM)  # the service starts it again: it revisits
    latency: dict[str, float] = {}
    fallbacks = searches = 0
    end = time.monotonic() + deadline
    while len(latency) < len(pages) and time.monotonic() < end:
        fetched = dict(
            conn.execute(
                "SELECT url, fetched_at FROM pages WHERE fetched_at >= ? AND url LIKE '%/p/%'",
                (day1,),
            ).fetchall()
        )
        for url, page in pages.items():
            if url in latency or url not in fetched:
                continue
            searches += 1
            fallbacks += open_current(conn) is None
            if page["kind"] == "changed":
                seen = found(conn, str(page["new"]), url) and not found(conn, str(page["old"]), url)
            else:
                seen = not found(conn, str(page["old"]), url)
            if seen:
                latency[url] = time.time() - float(fetched[url])
        time.sleep(POLL)
    conn.close()

    def summary(kind: str) -> dict[str, object]:
        values = sorted(v for u, v in latency.items() if pages[u]["kind"] == kind)
        total = sum(1 for p in pages.values() if p["kind"] == kind)
        return {
            "pages": total,
            "seen": len(values),
            "median_s": round(statistics.median(values), 2) if values else None,
            "worst_s": round(values[-1], 2) if values else None,
        }

    return {
        "changed": summary("changed"),
        "removed": summary("removed"),
        "searches": searches,
        "fts5_fallbacks": fallbacks,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--urls", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1965)
    parser.add_argument("--change-rate", type=float, default=0.1)
    parser.add_argument("--remove-rate", type=float, default=0.03)
    parser.add_argument("--deadline", type=float, default=900.0, help="seconds per phase")
    parser.add_argument("--rate", type=float, default=5.0, help="capsule queries a second")
    parser.add_argument("--work", type=Path, help="folder for the database (default: a temp one)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    space = Space(
        args.hosts,
        args.urls,
        args.seed,
        change_rate=args.change_rate,
        remove_rate=args.remove_rate,
    )
    work = args.work or Path(tempfile.mkdtemp(prefix="freshness-"))
    work.mkdir(parents=True, exist_ok=True)
    space_proc, port = start_space(args)
    search_port = free_port()
    service = start_service(work, space, port, search_port)
    try:
        started = time.monotonic()
        wait(lambda: settled(work), "the first crawl and index", args.deadline)
        first = time.monotonic() - started
        conn = connect(work / "engine.db")
        pages = targets(conn, space)
        for url, page in list(pages.items()):  # each old phrase finds its page on day 0
            if not found(conn, str(page["old"]), url):
                del pages[url]
        conn.close()
        queries = [str(p["old"]) for p in pages.values()] + [
            str(p["old"]).strip('"').split()[0] for p in pages.values()
        ]
        with CapsuleLoad(search_port, queries, args.rate, work) as load:
            result = measure(work, space_proc, pages, args.deadline)
        result["capsule_search"] = load.summary()
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=120)
        space_proc.send_signal(signal.SIGINT)
        space_proc.wait(timeout=30)
    result |= {
        "hosts": args.hosts,
        "urls": args.urls,
        "first_crawl_s": round(first, 1),
        "service_exit": service.returncode,
        "work": str(work),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
