"""Capsules generated on disk and ``capsule-server serve`` in a subprocess, for the crawl
tests that run commands end to end and for ``bench/crawl_speed.py``; or the same server in
a thread of this process, for the tests about the crawl rather than the server's process;
and what the server's access log says was asked."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from db_rows import rows
from loopback import free_port, served_on_a_thread, wait_listening

from capsule_server.testing import running_server
from geminibot.gemini.accesslog import AccessRecord, JsonLinesLog
from geminibot.gemini.server import ServerLimits

#: Seconds to wait for the server to listen.
STARTUP_TIMEOUT = 60.0
ROBOTS = b"User-agent: *\nDisallow: /private/\n"
WORDS = [
    "gemini",
    "capsule",
    "crawler",
    "index",
    "search",
    "polite",
    "robots",
    "agent",
    "archive",
    "text",
]


def generate(root: Path, hosts: int, pages: int) -> list[str]:
    """``hosts`` capsules ``host00.test``... with ``pages`` pages in all (home pages
    included): each page links to three pages of its host, the same page on the next host
    and a page robots.txt disallows. Returns the seeds (the home pages)."""
    per_host = max(2, -(-pages // hosts))
    for h in range(hosts):
        host = root / f"host{h:02d}.test"
        (host / "private").mkdir(parents=True)
        (host / "robots.txt").write_bytes(ROBOTS)
        (host / "private" / "x.gmi").write_text("# not for bots\n")
        links = "\n".join(f"=> /p{i}.gmi page {i}" for i in range(min(per_host - 1, 5)))
        (host / "index.gmi").write_text(f"# host {h}\n{links}\n=> /private/x.gmi private\n")
        for i in range(per_host - 1):
            text = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(60))
            nxt = f"gemini://host{(h + 1) % hosts:02d}.test/p{i}.gmi"
            body = (
                f"# Page {i} of host {h}\n\nword{i} {text}\n\n"
                + "".join(f"=> /p{(i * 3 + k) % (per_host - 1)}.gmi more\n" for k in (1, 2, 3))
                + f"=> {nxt} elsewhere\n=> /private/x.gmi private\n"
            )
            (host / f"p{i}.gmi").write_text(body)
    return [f"gemini://host{h:02d}.test/" for h in range(hosts)]


@contextmanager
def capsule_server(
    root: Path, certs: Path, log: Path | None = None, rate: float = 1e6
) -> Iterator[int]:
    """``capsule-server serve ROOT`` on 127.0.0.1 (rate limit ``rate`` per second, burst
    the same); yields the port."""
    port = free_port()
    argv = [str(Path(sys.executable).with_name("capsule-server")), "serve", str(root)]
    argv += ["--port", str(port), "--certs", str(certs)]
    argv += ["--rate", str(rate), "--rate-burst", str(int(rate))]
    if log is not None:
        argv += ["--log", str(log)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc, "capsule-server", STARTUP_TIMEOUT)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


@contextmanager
def capsule_server_thread(
    root: Path,
    certs: Path,
    rate: float = 1e6,
    host: str = "127.0.0.1",
    log: Path | None = None,
    access: Callable[[AccessRecord], None] | None = None,
) -> Iterator[int]:
    """What :func:`capsule_server` serves (``ROOT``, certificates made in ``certs``, the
    same limits, the access log appended to ``log`` as ``--log`` does: a JSON line per
    request, flushed; or each request's record given to ``access``, a
    :class:`RequestCount`), from a trio run on a thread of this process
    (``running_server`` in ``loopback.served_on_a_thread``) on ``host`` and a free port;
    yields the port. A real TLS server on loopback without the half second of CPU a new
    interpreter spends importing it: for tests about the crawl, not about the server's
    process."""
    limits = ServerLimits(rate_burst=int(rate), rate_per_second=rate)
    with ExitStack() as stack:
        if log is not None:
            assert access is None, "a log or an access function, not both"
            access = JsonLinesLog(stack.enter_context(log.open("a", encoding="utf-8")))
        with served_on_a_thread(
            lambda: running_server(root, certs, limits, access, hosts=(host,))
        ) as server:
            assert server.port is not None
            yield server.port


class RequestCount:
    """The requests a server on a thread has logged (its ``access`` function), counted as
    they come: a test waits for the next ones without reading a log again and again."""

    def __init__(self) -> None:
        self.count = 0
        self._changed = threading.Condition()

    def __call__(self, record: AccessRecord) -> None:
        with self._changed:
            self.count += 1
            self._changed.notify_all()

    def wait_for(self, count: int, within: float) -> bool:
        """Whether ``count`` requests in all have been logged, within ``within`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: self.count >= count, within)


def log_records(log: Path, since: int = 0, until: int | None = None) -> list[dict[str, Any]]:
    """The requests of the access log's lines ``since`` to ``until`` (a line without a host
    and path is a connection that asked nothing)."""
    if not log.exists():
        return []
    records = (json.loads(line) for line in log.read_text().splitlines()[since:until])
    return [r for r in records if r.get("host") and r.get("path")]


def requested_urls(log: Path, since: int = 0, until: int | None = None) -> list[str]:
    """The URLs of :func:`log_records`, in the log's order."""
    return [f"gemini://{r['host']}{r['path']}" for r in log_records(log, since, until)]


def logged_in_full(log: Path, db: Path, within: float) -> int:
    """Wait until the server has logged every request of the finished crawl whose SQLite
    store is ``db`` (a committed fetch each; the server logs a request once it has closed
    it), at most ``within`` seconds; returns the number of the log's lines then."""
    [(fetches,)] = rows(db, "SELECT count(*) FROM fetches")
    deadline = time.monotonic() + within
    while len(log_records(log)) < int(str(fetches)):
        assert time.monotonic() < deadline, f"the server never logged the crawl of {db}"
        time.sleep(0.01)
    return len(log.read_text().splitlines())
