"""``geminibot serve-search`` as a real process, queried by a third-party Gemini client
(``ignition``, blocking) on loopback: results for a query, the right status for bad input,
a clean stop on SIGINT, and one access-log record per request."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cryptography.hazmat.primitives.serialization  # noqa: F401  (before ignition, see PEERS.md)
import ignition
import pytest
from commands import run_main, start_serve_search
from pages import gemtext_page

from geminibot.index.search import MAX_QUERY_LENGTH
from geminibot.store.db import connect, transaction
from geminibot.store.pages import Link, store_page

#: Longest the server may take to start or stop (a bound, not a speed test).
START_STOP_SECONDS = 30
#: The name served. ignition keeps its pins in memory for the whole process, whatever
#: hosts file it is given, so a name no other test serves (with another certificate).
NAME = "searchcap.test"


def make_index(path: Path) -> None:
    conn = connect(path)
    with transaction(conn):
        for n in range(12):
            store_page(
                conn,
                gemtext_page(
                    f"gemini://garden.test/{n}",
                    f"Tomato diary {n}",
                    f"Day {n}: the tomatoes are ripening.",
                    fetched_at=1_700_000_000.0,
                    links=(Link("gemini://hub.test/", "hub"),),
                ),
                "indexer",
            )
        conn.execute(
            "INSERT INTO hosts (host, first_seen, last_fetch_at) VALUES ('garden.test', 1, 2)"
        )
    conn.close()


@pytest.fixture
def names_resolve_to_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """``NAME`` and the names below it resolve to 127.0.0.1 (for ignition, in process)."""
    real = socket.getaddrinfo

    def fake(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.endswith(NAME):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)


@pytest.fixture
def served(
    tmp_path: Path, ignition_hosts: None
) -> Iterator[tuple[subprocess.Popen[str], int, Path]]:
    """``geminibot serve-search`` on 127.0.0.1 and a free port, as ``NAME``."""
    make_index(tmp_path / "idx.db")
    log = tmp_path / "access.jsonl"
    proc, port, banner = start_serve_search(
        tmp_path / "idx.db", tmp_path / "certs", "--log", str(log), "--hostname", NAME
    )
    try:
        assert proc.stderr is not None
        assert f"serving {NAME} on 127.0.0.1:" in banner, banner
        assert f"gemini://{NAME}:{port}/" in proc.stderr.readline()
        yield proc, port, log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.usefixtures("names_resolve_to_loopback")
def test_a_real_client_searches_and_is_refused_bad_input(
    served: tuple[subprocess.Popen[str], int, Path],
) -> None:
    proc, port, log = served
    base = f"gemini://{NAME}:{port}"

    def get(path: str) -> ignition.BaseResponse:
        return ignition.request(base + path, timeout=10)

    answer = get("/search")
    assert (answer.status, answer.meta[:10]) == ("10", "Search for")

    answer = get("/search?tomatoes%20ripening")
    assert (answer.status, answer.meta) == ("20", "text/gemini; charset=utf-8")
    body = answer.raw_body.decode("utf-8")
    assert body.count("=> gemini://garden.test/") == 10
    assert "garden.test · " in body and "⟦tomatoes⟧" in body
    assert "=> /search/2?tomatoes%20ripening Next page" in body

    second = get("/search/2?tomatoes%20ripening").raw_body.decode("utf-8")
    assert second.count("=> gemini://garden.test/") == 2

    backlinks = get("/backlinks?gemini%3A%2F%2Fhub.test%2F").raw_body.decode("utf-8")
    assert backlinks.count("=> gemini://garden.test/") == 12
    assert "garden.test: last seen" in get("/hosts").raw_body.decode("utf-8")
    assert "User-agent: indexer" in get("/about").raw_body.decode("utf-8")

    for path, status in [
        ("/search?%FF", "59"),
        ("/search?" + "a" * (MAX_QUERY_LENGTH + 1), "59"),
        ("/backlinks?no%20url", "59"),
        ("/nowhere", "51"),
        ("/search/0?tomatoes", "51"),
    ]:
        assert get(path).status == status, path
    # served for NAME only: another name is refused
    answer = ignition.request(f"gemini://other.{NAME}:{port}/", timeout=10)
    assert answer.status == "53"

    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=START_STOP_SECONDS) == 0
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 12  # every request above
    assert {r["path"] for r in records} >= {"/search", "/nowhere"}


def serve_search(db: Path) -> subprocess.CompletedProcess[str]:
    """``geminibot serve-search --db DB`` as its script runs it, in this process
    (commands.run_main): a usage error never starts the server."""
    return run_main(["serve-search", "--db", str(db)])


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    run = serve_search(tmp_path / "none.db")
    assert run.returncode == 2
    assert run.stderr == f"geminibot: {tmp_path / 'none.db'}: no such database\n"
    (tmp_path / "junk.db").write_bytes(b"not sqlite at all" * 100)
    run = serve_search(tmp_path / "junk.db")
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr
