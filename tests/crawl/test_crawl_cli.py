"""The commands end to end over loopback: ``geminibot crawl`` against the real
capsule server (on a thread of this process: the tests are about the commands) and
against jetforce (a peer from PyPI, a process) serving a copy of the same capsule, then
``geminibot search`` and ``geminibot stats``; Ctrl-C and resume; the archiver's WARC file;
usage errors. The commands run in this process (``commands.run_main``), except the Ctrl-C
test's crawl, a process to signal."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from capsule_crawl import CAPSULES, POLICY_FILES, SECURITY_TXT, expectation
from commands import run_main
from jetforce_peer import running_jetforce
from warcio.archiveiterator import ArchiveIterator

from geminibot.cli import main
from geminibot.store.db import connect

HOST = "va-groups.test"
#: Bound on any one command.
TIMEOUT = 60.0


def geminibot(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    return run_main(args, limit=timeout)


def crawl(db: Path, port: int, *extra: str) -> subprocess.CompletedProcess[str]:
    return geminibot(
        "crawl",
        f"gemini://{HOST}/",
        "--db",
        str(db),
        "--test-range",
        "--connect-to",
        f"*.test:1965:127.0.0.1:{port}",
        "--json",
        *extra,
    )


def fetched_paths(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    paths = {u.split(HOST, 1)[1] for (u,) in conn.execute("SELECT url FROM fetches")}
    conn.close()
    return paths - {*POLICY_FILES[1:], SECURITY_TXT}


def index(db: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT url, status, size, content_hash, title FROM pages ORDER BY url"
    ).fetchall()
    conn.close()
    return rows


def test_crawl_search_stats(served: int, tmp_path: Path) -> None:
    port = served
    db = tmp_path / "c.db"
    proc = crawl(db, port)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["pages"] == 7 and summary["refused"] == 1 and not summary["interrupted"]
    assert summary["vanished"] == 0  # no host unanswered (docs/crawl.md, vanished hosts)
    assert fetched_paths(db) == set(expectation(HOST)["crawl"]["indexer"]["fetched"])

    found = geminibot("search", "virtual agent", "--db", str(db), "--json")
    assert found.returncode == 0, found.stderr
    results = [json.loads(line) for line in found.stdout.splitlines()]
    assert results and all(r["url"].startswith(f"gemini://{HOST}/") for r in results)
    start, end = results[0]["highlights"][0]
    assert results[0]["snippet"][start:end].lower() in {"virtual", "agent"}
    text = geminibot("search", "virtual", "--db", str(db), "--limit", "1")
    assert text.returncode == 0 and text.stdout.count("gemini://") == 1
    assert geminibot("search", "zzzznothing", "--db", str(db)).returncode == 1
    bad = geminibot("search", "--db", str(db), "--", "-only")
    assert bad.returncode == 2 and "nothing to search for" in bad.stderr

    numbers = geminibot("stats", "--db", str(db), "--json")
    data = json.loads(numbers.stdout)
    assert data["pages"] == 7 and data["refusals"] == 1
    assert data["robots"]["robots.txt success"] == 1
    assert "MIME types" in geminibot("stats", "--db", str(db)).stdout

    again = crawl(db, port)  # resuming a finished crawl fetches nothing
    assert json.loads(again.stdout)["requests"] == 0


def test_jetforce_gives_the_same_result(served: int, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(CAPSULES / HOST, copy, ignore=shutil.ignore_patterns("expect.toml"))
    with running_jetforce(copy, HOST) as jet_port:
        proc = crawl(tmp_path / "jet.db", jet_port)
    assert proc.returncode == 0, proc.stderr
    assert crawl(tmp_path / "ours.db", served).returncode == 0
    assert fetched_paths(tmp_path / "jet.db") == set(
        expectation(HOST)["crawl"]["indexer"]["fetched"]
    )
    assert index(tmp_path / "jet.db") == index(tmp_path / "ours.db")


def test_archiver_writes_warc(served: int, tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    proc = crawl(db, served, "--as", "archiver")
    assert proc.returncode == 0, proc.stderr
    warc = Path(json.loads(proc.stdout)["warc"])
    with warc.open("rb") as fh:
        records = [
            (r.rec_headers.get_header("WARC-Target-URI"), r.content_stream().read())
            for r in ArchiveIterator(fh)
        ]
    urls = {u for u, _ in records}
    assert urls == {
        f"gemini://{HOST}{p}" for p in expectation(HOST)["crawl"]["archiver"]["fetched"]
    } - {f"gemini://{HOST}/robots.txt"}
    assert all(body.startswith(b"20 text/gemini") for _, body in records)


def test_researcher_keeps_no_text(served: int, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    assert crawl(db, served, "--as", "researcher").returncode == 0
    assert fetched_paths(db) == set(expectation(HOST)["crawl"]["researcher"]["fetched"])
    assert geminibot("search", "virtual", "--db", str(db)).returncode == 1
    assert json.loads(geminibot("stats", "--db", str(db), "--json").stdout)["links"] > 0
    mixed = crawl(db, served, "--as", "indexer")
    assert mixed.returncode == 2 and "crawled with role 'researcher'" in mixed.stderr


def test_a_crawl_leaves_no_wal_behind(served: int, tmp_path: Path) -> None:
    """A crawl that ends checkpoints its WAL into the database and truncates it, also
    while another connection (a search, ``serve-search``) keeps the file open: closing the
    last connection would do it otherwise, not then."""
    db = tmp_path / "c.db"
    connect(db).close()
    reader = sqlite3.connect(db)  # as serve-search holds it
    try:
        assert reader.execute("SELECT count(*) FROM pages").fetchone() == (0,)
        assert crawl(db, served).returncode == 0
        wal = db.with_name(db.name + "-wal")
        assert not wal.exists() or wal.stat().st_size == 0
        assert reader.execute("SELECT count(*) FROM pages").fetchone()[0] > 0
    finally:
        reader.close()


def test_ctrl_c_stops_cleanly_and_resumes(served: int, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    port = served
    args = ["gemini://maze.test/", "--db", str(db), "--test-range", "--json"]
    args += ["--connect-to", f"*.test:1965:127.0.0.1:{port}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "geminibot", "crawl", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + TIMEOUT
    while pages_in(db) < 5 and proc.poll() is None:  # the crawl is under way
        assert time.monotonic() < deadline, "the crawl made no progress"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 130, err
    first = json.loads(out)
    assert first["interrupted"] and first["pages"] > 0 and first["queued"] > 0
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM urls WHERE state = 'leased'").fetchone()[0] == 0
    conn.close()
    rest = geminibot("crawl", *args)
    assert rest.returncode == 0, rest.stderr
    conn = sqlite3.connect(db)
    urls = [u for (u,) in conn.execute("SELECT url FROM fetches")]
    assert len(urls) == len(set(urls))  # nothing fetched twice across the stop


def pages_in(db: Path) -> int:
    if not db.exists():
        return 0
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM pages").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet
        return 0
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["crawl", "ftp://x.test/", "--db", "D"], "not a gemini:// or http(s):// URL"),
        (["crawl", "https://example.org/", "--db", "D", "--test-range"], "local test capsules"),
        (["crawl", "gemini://example.org/", "--db", "D", "--test-range"], "local test capsules"),
        (["crawl", "gemini://a.test/", "--db", "D", "--connect-to", "x"], "HOST:PORT:ADDR:PORT2"),
        (["search", "x", "--db", "NOPE"], "no such database"),
        (["stats", "--db", "NOPE"], "no such database"),
        (["crawl", "gemini://a.test/", "--db", "/nonexistent/dir/c.db"], "cannot create"),
    ],
)
def test_usage_errors(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(tmp_path / a) if a in ("D", "NOPE") else a for a in argv]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
