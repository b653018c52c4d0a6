"""``geminibot serve`` on a writable copy of the real capsules, for the benchmarks that
change a capsule and time the running service (bench/recheck.py, bench/feeds_service.py).

:func:`real_service` copies the capsules into a work folder (never the repository),
serves them with ``capsule-server`` on loopback, starts ``geminibot serve`` on them and
waits until its first crawl sleeps and the index has caught up. The rest are the waits
and store reads those benchmarks share. Every wait is bounded.
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from real_search import BIN, serve

from geminibot.index import search
from geminibot.index.tantivy_index import index_lag
from geminibot.store.database import open_database

#: Seconds between two looks at what is awaited.
POLL = 0.25

#: ``geminibot serve`` options when only the crawl and the index are measured.
CRAWL_AND_INDEX = ("--no-search-enabled", "--no-metrics-enabled", "--index-authority-every", "0")


class Served:
    """``geminibot serve`` in a child process; its JSON log lines collected by a thread."""

    def __init__(self, config: Path, options: tuple[str, ...] = CRAWL_AND_INDEX) -> None:
        argv = [str(BIN / "geminibot"), "serve", "--config", str(config), *options]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        self.records: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.records.append(json.loads(line))

    def said(self, component: str, start: str) -> bool:
        return any(
            r["component"] == component and str(r.get("message", "")).startswith(start)
            for r in list(self.records)
        )

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)


@contextmanager
def work_folder(kept: Path | None, prefix: str) -> Iterator[Path]:
    """``kept`` (created if need be), else a temporary folder removed on leaving."""
    work = kept or Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    try:
        yield work
    finally:
        if kept is None:
            shutil.rmtree(work, ignore_errors=True)


@dataclass
class RealService:
    """The running service and where its pieces are."""

    service: Served
    db: Path
    capsules: Path
    hosts: list[str]
    first_crawl_seconds: float


@contextmanager
def real_service(
    corpus: Path,
    count: int,
    work: Path,
    deadline: float,
    config: str = "",
    options: tuple[str, ...] = CRAWL_AND_INDEX,
) -> Iterator[RealService]:
    """The first ``count`` capsules of ``corpus`` copied into ``work``, served, and
    ``geminibot serve`` (``options``, ``config`` added to its configuration file) on them,
    its first crawl done and indexed; both stopped on leaving."""
    capsules = work / "capsules"
    names = sorted(p.name for p in (corpus / "capsules").iterdir() if p.is_dir())
    for name in names[:count]:
        shutil.copytree(corpus / "capsules" / name, capsules / name, dirs_exist_ok=True)
    hosts = sorted(p.name for p in capsules.iterdir())
    db = work / "engine.db"
    server, port = serve(capsules, work)
    (work / "engine.toml").write_text(
        f'[service]\ndb = "{db}"\n\n[crawl]\nseeds = {json.dumps([f"gemini://{h}/" for h in hosts])}\n'
        "test_range = true\n"
        f'connect_to = ["*.capsule.test:1965:127.0.0.1:{port}"]\n' + config
    )
    service = Served(work / "engine.toml", options)
    try:
        first = wait(
            lambda: service.said("crawl", "geminibot crawl: sleeping"), "first crawl", deadline
        )
        wait(lambda: index_caught_up(db), "the index caught up", deadline, every=2.0)
        yield RealService(service, db, capsules, hosts, first)
    finally:
        service.stop()
        server.terminate()
        server.wait(timeout=30)


def wait(found: Callable[[], object], what: str, deadline: float, every: float = POLL) -> float:
    """Seconds until ``found()`` is true (SystemExit after ``deadline`` seconds)."""
    started = time.monotonic()
    while time.monotonic() - started < deadline:
        if found():
            return time.monotonic() - started
        time.sleep(every)
    raise SystemExit(f"never within {deadline:g} s: {what}")


def searchable(db: Path, word: str, url: str) -> bool:
    """Whether searching ``word`` finds ``url`` (the search capsule's code)."""
    try:
        with open_database(str(db)) as database:
            assert database.sqlite is not None
            return url in {r.url for r in search(database.sqlite, word, limit=10)}
    except sqlite3.OperationalError:  # the store busy for longer than its timeout
        return False


def one(db: Path, sql: str, *params: object) -> Any:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return conn.execute(sql, params).fetchone()
    finally:
        conn.close()


def index_caught_up(db: Path) -> bool:
    """Whether the search index holds every change of the store."""
    try:
        with open_database(str(db)) as database:
            return index_lag(database) == 0
    except sqlite3.OperationalError:
        return False


def fetched_at(db: Path, url: str) -> float:
    """When ``url`` was last fetched (0 if never)."""
    row = one(db, "SELECT fetched_at FROM pages WHERE url = ?", url)
    return 0.0 if row is None else float(row[0])


def file_of(capsules: Path, url: str) -> Path:
    """The file of the copy that ``url`` serves."""
    host, _, path = url.removeprefix("gemini://").partition("/")
    file = capsules / host / path
    return file / "index.gmi" if url.endswith("/") else file
