"""``geminibot serve-search`` as a real process over TLS, with the descriptor limit of a
small service, against what a client can do without asking for anything costly:

- ``/check`` of a capsule whose robots.txt lints on every line: a short answer;
- connections that never send a request: charged to the client's rate (its next
  request gets ``44``), and what they add to the access log bounded per client;
- more idle connections than the process has descriptors (each has sent one byte: one
  that sent none is not even handed to the server): the oldest idle ones are closed for
  newcomers, so a search is answered while they are all still held.

Each attacker and each person has an address of its own (127.0.0.x), so the tests share
one server without sharing a rate. No timed assertion: each wait is a bound."""

from __future__ import annotations

import json
import signal
import ssl
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from commands import start_serve_search
from pages import gemtext_page

from capsule_server.testing import open_stalled, open_tls, raw_request
from geminibot.gemini.accesslog import LOG_BURST, LOG_PER_MINUTE
from geminibot.index.tantivy_index import rebuild
from geminibot.store.db import connect, transaction
from geminibot.store.pages import store_page
from geminibot.why.host import MAX_FINDINGS

HOST = "search.test"
#: The server's descriptor limit: its own files, its reserve (DESCRIPTOR_RESERVE, 128),
#: and room for 128 connections.
NOFILE = 256
#: Idle connections held: 8 addresses of 32 (MAX_PER_ADDRESS), more than the 128 the
#: descriptors leave for connections.
IDLE_ADDRESSES = 8
IDLE_PER_ADDRESS = 32
#: Seconds any one wait may take (a bound on a loaded machine, never a speed test).
BOUND = 60.0
#: The rate allowed per client here: three requests, then (almost) none.
RATE = ("--rate", "0.001", "--rate-burst", "3")
#: Connections that ask nothing, from one client: past what the log's budget could take
#: in a minute (its burst and a minute's refill).
SILENT = LOG_BURST + LOG_PER_MINUTE + 20


@dataclass
class Served:
    proc: subprocess.Popen[str]
    port: int
    log: Path

    def records(self, client: str) -> list[dict[str, object]]:
        lines = self.log.read_text().splitlines()
        return [r for r in map(json.loads, lines) if r["client"] == client]


def robots_that_lint() -> bytes:
    lines = [f"Frobnicate: {i}\nDisallow /nocolon{i}" for i in range(2000)]
    return ("User-agent: *\n" + "\n".join(lines) + "\n").encode()


def make_db(path: Path) -> None:
    conn = connect(path)
    with transaction(conn):
        for n in range(3):
            page = gemtext_page(f"gemini://garden.test/{n}", f"Tomato {n}", f"tomatoes {n}")
            store_page(conn, page, "indexer")
        conn.execute("INSERT INTO hosts (host, first_seen) VALUES ('lint.test', 0)")
        conn.execute(
            "INSERT INTO robots (host, name, fetched_at, expires_at, outcome, reason, status,"
            " body) VALUES ('lint.test', 'robots.txt', 0, 1e12, 'success', '', 20, ?)",
            (robots_that_lint(),),
        )
    rebuild(conn)
    conn.close()


@contextmanager
def serve_search(folder: Path, *options: str) -> Iterator[Served]:
    """serve-search on a fresh database in ``folder``, its descriptor limit NOFILE; on exit
    stopped with SIGTERM, standard error without a traceback."""
    make_db(folder / "crawl.db")
    log = folder / "access.jsonl"
    args = ("--hostname", HOST, "--log", str(log), *options)
    proc, port, _ = start_serve_search(folder / "crawl.db", folder / "certs", *args, nofile=NOFILE)
    try:
        yield Served(proc, port, log)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=BOUND)
        assert "Traceback" not in err, err


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve_search(tmp_path_factory.mktemp("attack"), *RATE) as server:
        yield server


async def gemini(served: Served, path: str, client: str) -> bytes:
    with trio.fail_after(BOUND):
        line = f"gemini://{HOST}{path}\r\n".encode()
        return await raw_request(served.port, line, HOST, local_address=client)


async def silent(port: int, client: str) -> None:
    """A TLS handshake, then closed without a request (or refused before TLS)."""
    with suppress(ssl.SSLError, trio.BrokenResourceError, OSError), trio.fail_after(BOUND):
        tls = await open_tls(port, HOST, local_address=client)
        await tls.aclose()


async def test_check_of_a_capsule_whose_robots_txt_lints_everywhere_is_short(
    served: Served,
) -> None:
    answer = await gemini(served, "/check?lint.test", "127.0.0.2")
    header, _, body = answer.partition(b"\r\n")
    assert header.startswith(b"20 ")
    lints = [line for line in body.decode().splitlines() if line.startswith("lint: ")]
    assert len(lints) == MAX_FINDINGS + 1 and "more findings" in lints[-1]
    assert len(body) < 16 * 1024  # 4,000 findings once made an answer of ~400 KB


async def test_connections_without_a_request_spend_the_clients_rate(served: Served) -> None:
    for _ in range(3):  # the whole burst, spent without asking anything
        await silent(served.port, "127.0.0.3")
    assert (await gemini(served, "/search?tomatoes", "127.0.0.3")).startswith(b"44 ")
    assert (await gemini(served, "/search?tomatoes", "127.0.0.4")).startswith(b"20 ")


async def test_idle_connections_past_the_descriptors_make_room_for_a_search(
    served: Served,
) -> None:
    """256 idle connections held against 128 the descriptors allow: the oldest idle
    ones are closed for newcomers (and their clients' reconnections refused before TLS),
    so a search from elsewhere is answered while every idle one would still be waiting
    for its header timeout (10 s); never a failed ``accept`` logged more than once."""
    held: list[trio.SocketStream] = []

    async def hold(client: str) -> None:
        with suppress(OSError):
            held.append(await open_stalled(served.port, local_address=client))

    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            for a in range(IDLE_ADDRESSES):
                for _ in range(IDLE_PER_ADDRESS):
                    nursery.start_soon(hold, f"127.0.1.{a + 1}")
    try:
        answer = await gemini(served, "/search?tomatoes", "127.0.0.5")
        assert answer.startswith(b"20 ")
        idle = [r for a in range(IDLE_ADDRESSES) for r in served.records(f"127.0.1.{a + 1}")]
        errors = [str(r.get("error")) for r in idle]
        assert "closed to make room (had sent no request)" in errors
        assert "header timeout" not in errors  # answered before any idle one timed out
    finally:
        for stream in held:
            await stream.aclose()
    failed = [r for r in served.records("") if str(r.get("error", "")).startswith("accept")]
    assert len(failed) <= 1


async def test_the_log_grows_by_a_bounded_amount_per_client(tmp_path: Path) -> None:
    """SILENT connections that ask nothing, from one client: LOG_BURST of them logged (and
    one a second after), and at shutdown one record that counts the others."""
    with serve_search(tmp_path, *RATE) as server:
        for _ in range(SILENT):
            await silent(server.port, "127.0.0.6")
        assert (await gemini(server, "/search?tomatoes", "127.0.0.7")).startswith(b"20 ")
    *logged, summary = server.records("127.0.0.6")
    # the burst, and what the budget refilled meanwhile (the test lasts under a minute)
    assert LOG_BURST <= len(logged) <= LOG_BURST + LOG_PER_MINUTE
    not_logged = SILENT - len(logged)
    assert summary["error"] == f"{not_logged} more connections not logged: over the log budget"
