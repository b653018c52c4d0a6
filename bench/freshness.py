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

``--from-store DB`` starts instead from a store filled as a perfect crawl of day 0 would
(``bench/search_engines.py --build-only``, same ``--urls``; the hosts and seed are the
fill's): the search latency while a crawl and the index updates run on a store of that
size, without a first crawl of it.

1. Copies DB (never writes it), records its pages as fetched a revisit interval ago, so
   every URL is due (:func:`geminispace.store.crawl_ready`), and builds the tantivy index
   (``geminibot index rebuild``).
2. Serves the space on day 1 (``--change-rate`` of the ``/p/`` pages changed,
   ``--remove-rate`` gone) and starts ``geminibot serve`` on the copy: its crawl revisits
   what is due, the updater applies the pages it re-fetches, the capsule answers.
3. Once the capsule answers each query of the mix (``search_engines.queries``: common,
   rare, a phrase, a prefix, OR), asks it ``--rate`` queries a second for ``--seconds``.

Reports the capsule's median, p95 and worst answer (as the client waited for it, and the
capsule's own time from its access log), the searches that found the derived index
behind (the capsule would take FTS5's full scan: must be 0), the pages re-fetched and the
index changes applied meanwhile, and the index's lag at the end::

    .venv/bin/python bench/freshness.py --from-store /work/bench600k/space-600000.db \
        --urls 600000 --addresses 10 --seconds 300 --work /tmp/fresh600k \
        --out /tmp/fresh600k.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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

from geminispace.server import address_rules
from geminispace.space import DOMAIN, Space
from geminispace.store import crawl_ready
from search_engines import queries as query_mix
from search_engines import space_of

from geminibot.index import search
from geminibot.index.tantivy_index import index_dir, last_change, open_current, read_manifest
from geminibot.store.db import connect
from geminibot.store.freshness import INITIAL_REVISIT

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


def start_space(
    args: argparse.Namespace, day: int = 0, *extra: str
) -> tuple[subprocess.Popen[str], int]:
    """The space's server (``extra`` added to its options) and its port."""
    argv = [sys.executable, str(ROOT / "bench" / "geminispace"), "serve", "--day", str(day)]
    argv += ["--hosts", str(args.hosts), "--urls", str(args.urls), "--seed", str(args.seed)]
    argv += ["--change-rate", str(args.change_rate), "--remove-rate", str(args.remove_rate)]
    argv += ["--addresses", str(args.addresses), *extra]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    proc.stdout.readline()  # the crawl hint
    return proc, int(first.rsplit(":", 1)[1])


def stop(space_proc: subprocess.Popen[str]) -> None:
    """Stop the space's server: SIGINT, and SIGKILL if it has not ended within 30 s (a
    whole space's server may take longer to close its connections)."""
    space_proc.send_signal(signal.SIGINT)
    try:
        space_proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        space_proc.kill()
        space_proc.wait()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ask_capsule(port: int, query: str, work: Path) -> bool:
    """Whether the search capsule answers ``query`` with results (a real Gemini client,
    ignition)."""
    import cryptography.hazmat.primitives.serialization  # noqa: F401  (before ignition)
    import ignition

    ignition.set_default_hosts_file(str(work / "known_hosts"))
    quoted = urllib.parse.quote(query)
    try:
        answer = ignition.request(f"gemini://localhost:{port}/search?{quoted}", timeout=30)
    except Exception:
        return False
    return bool(answer.status == "20")


class CapsuleLoad:
    """A thread asking the search capsule ``rate`` queries a second until stopped: one at a
    time, each at its turn of a fixed schedule, or at once when the answer before it came
    after that turn. After each answer, looks (on a connection of its own to the store)
    whether the derived index was current: when not, the capsule searched with FTS5's
    full scan."""

    def __init__(self, port: int, queries: list[str], rate: float, work: Path) -> None:
        self.port, self.queries, self.rate, self.work = port, queries, rate, work
        self.seconds: list[float] = []
        self.failures = 0
        self.behind = 0  # answers given while the derived index was not current
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        conn = sqlite3.connect(self.work / "engine.db")
        n = 0
        start = time.monotonic()
        while not self._stop.wait(max(0.0, start + n / self.rate - time.monotonic())):
            query = self.queries[n % len(self.queries)]
            n += 1
            started = time.perf_counter()
            if ask_capsule(self.port, query, self.work):
                self.seconds.append(time.perf_counter() - started)
            else:
                self.failures += 1
            self.behind += open_current(conn) is None
        conn.close()

    def __enter__(self) -> CapsuleLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def summary(self) -> dict[str, object]:
        values = sorted(self.seconds)
        if not values:
            return {"queries": 0, "failures": self.failures, "fts5_fallbacks": self.behind}
        return {
            "queries": len(values),
            "failures": self.failures,
            "fts5_fallbacks": self.behind,
            "median_ms": round(1000 * statistics.median(values), 1),
            "p95_ms": round(1000 * values[int(0.95 * (len(values) - 1))], 1),
            "max_ms": round(1000 * values[-1], 1),
        }


def start_service(
    work: Path,
    space: Space,
    port: int,
    search_port: int,
    addresses: int = 0,
    search_args: tuple[str, ...] = (),
) -> subprocess.Popen[str]:
    """``geminibot serve`` on the space (its search capsule's command line given
    ``search_args``), its output in ``work/service.log``."""
    config = work / "engine.toml"
    config.write_text(
        f'[service]\ndb = "{work / "engine.db"}"\nrestart_delay = 0.2\n'
        f"[crawl]\nseeds = {json.dumps(space.seeds())}\ntest_range = true\n"
        f'min_delay = 0.0\nallow_hosts = ["*.{DOMAIN}"]\n'
        f"connect_to = {json.dumps(address_rules(port, addresses))}\n"
        f'[search]\nport = {search_port}\ncerts = "{work / "certs"}"\n'
        f"args = {json.dumps(list(search_args))}\n"
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
        return open_current(conn) is not None and _lag(work / "engine.db") == 0
    finally:
        conn.close()


def _lag(db: Path) -> int:
    from geminibot.index.tantivy_index import index_lag
    from geminibot.store.database import open_database

    with open_database(str(db)) as database:
        lag = index_lag(database)
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


def take_over(store: Path, work: Path) -> dict[str, object]:
    """Copy the filled ``store`` into ``work``, every URL due now, and build its index."""
    db = work / "engine.db"
    started = time.monotonic()
    shutil.copyfile(store, db)
    conn = connect(db)
    fetched = time.time() - INITIAL_REVISIT
    recorded = crawl_ready(conn, fetched)
    with conn:  # due now, also in a store made crawl-ready when it was filled
        conn.execute("UPDATE urls SET next_visit = ? WHERE state = 'done'", (fetched,))
    conn.close()
    copied = time.monotonic() - started
    subprocess.run(
        [sys.executable, "-m", "geminibot", "index", "rebuild", "--db", str(db)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return {
        "urls_recorded": recorded,
        "copy_s": round(copied, 1),
        "rebuild_s": round(time.monotonic() - started - copied, 1),
    }


def revisits(db: Path, since: float) -> dict[str, int]:
    """Pages re-fetched since ``since``; changes the store logged, applied to the index
    and still pending."""
    conn = sqlite3.connect(db)
    try:
        manifest = read_manifest(index_dir(db)) or {}
        applied = int(str(manifest.get("applied", 0)))
        fetched = conn.execute("SELECT count(*) FROM pages WHERE fetched_at >= ?", (since,))
        return {
            "refetched": int(fetched.fetchone()[0]),
            "logged": last_change(conn),
            "applied": applied,
        }
    finally:
        conn.close()


def served(work: Path, since: float, until: float) -> dict[str, object]:
    """The capsule's own time for the searches it answered between ``since`` and
    ``until`` (its access log's ``duration``: from the connection's accept to its close,
    the TLS handshake included), from the service's log."""
    durations = []
    for line in (work / "service.log").read_text().splitlines():
        if '"component": "search"' not in line or '"event"' not in line:
            continue
        record = json.loads(line)
        event = record["event"]
        if since <= record["time"] <= until and str(event.get("path", "")).startswith("/search"):
            durations.append(float(event["duration"]))
    values = sorted(durations)
    if not values:
        return {"searches": 0}
    return {
        "searches": len(values),
        "median_ms": round(1000 * statistics.median(values), 1),
        "p95_ms": round(1000 * values[int(0.95 * (len(values) - 1))], 1),
        "max_ms": round(1000 * values[-1], 1),
    }


def space_and_work(args: argparse.Namespace) -> tuple[Space, Path]:
    """The space the options describe, and the folder the run works in (made if needed)."""
    space = Space(
        args.hosts, args.urls, args.seed, change_rate=args.change_rate, remove_rate=args.remove_rate
    )
    work = args.work or Path(tempfile.mkdtemp(prefix="freshness-"))
    work.mkdir(parents=True, exist_ok=True)
    return space, work


def under_load(args: argparse.Namespace) -> dict[str, object]:
    """The ``--from-store`` run (see the module docstring)."""
    args.hosts, _ = space_of(args.urls)
    space, work = space_and_work(args)
    result = take_over(args.from_store, work)
    mix = [query for _, query in query_mix(space)]
    space_proc, port = start_space(args, day=1)
    search_port = free_port()
    service = start_service(work, space, port, search_port, args.addresses)
    try:
        for query in mix:  # the capsule is up, its index opened, each query answered once
            wait(lambda q=query: ask_capsule(search_port, q, work), "the capsule", args.deadline)
        before = revisits(work / "engine.db", time.time())
        since = time.time()
        with CapsuleLoad(search_port, mix, args.rate, work) as load:
            time.sleep(args.seconds)
        after = revisits(work / "engine.db", since)
        until = time.time()
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=120)
        stop(space_proc)
    time.sleep(1.0)  # the log's last lines are in
    return result | {
        "capsule_search": load.summary(),
        "capsule_own_time": served(work, since, until),
        "seconds": args.seconds,
        "rate": args.rate,
        "pages_refetched": after["refetched"],
        "index_changes_logged": after["logged"] - before["logged"],
        "index_changes_applied": after["applied"] - before["applied"],
        "index_lag_at_end": after["logged"] - after["applied"],
        "hosts": args.hosts,
        "urls": args.urls,
        "service_exit": service.returncode,
        "work": str(work),
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
    parser.add_argument(
        "--from-store", type=Path, help="start from this filled store (search_engines.py)"
    )
    parser.add_argument(
        "--seconds", type=float, default=300.0, help="with --from-store: seconds of load"
    )
    parser.add_argument(
        "--addresses",
        type=int,
        default=0,
        help="serve the space on 127.0.1.1 ... 127.0.1.K too, its hosts spread over them "
        "(the crawl asks one address at a time per host: more addresses, a faster crawl)",
    )
    args = parser.parse_args()
    if args.from_store is not None:
        report(under_load(args), args.out)
        return
    space, work = space_and_work(args)
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
        stop(space_proc)
    result |= {
        "hosts": args.hosts,
        "urls": args.urls,
        "first_crawl_s": round(first, 1),
        "service_exit": service.returncode,
        "work": str(work),
    }
    report(result, args.out)


def report(result: dict[str, object], out: Path | None) -> None:
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        out.write_text(text + "\n")


if __name__ == "__main__":
    main()
