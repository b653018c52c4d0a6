"""``census --keep`` and ``--history``, "changed since the last census", and the command's
refusals: a database that does not exist is never created."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from census_report_store import TLS
from commands import run_main

from geminibot.census.figures import take_census
from geminibot.census.render import as_text, history_text
from geminibot.store.crawlstore import SqliteStore
from geminibot.store.database import Database
from geminibot.store.db import connect
from geminibot.store.traps import FrontierLimits

#: A self-signed certificate of a.test, seen at 1,000 s.
SEEN = replace(
    TLS, host="a.test", subject="CN=a.test", issuer="CN=a.test", sans=("a.test",), seen=1_000.0
)


def test_a_certificate_changed_since_the_last_census_kept(tmp_path: Path) -> None:
    db = tmp_path / "crawl.db"
    conn = connect(db)
    store = SqliteStore(conn, lambda: 0.0, FrontierLimits())
    conn.execute("INSERT INTO hosts (host, first_seen) VALUES ('a.test', 0), ('b.test', 0)")
    store.saw_tls(SEEN)
    store.saw_tls(replace(SEEN, host="b.test"))
    store.flush()
    first = take_census(Database("crawl.db", conn, path=db), 2_000.0)
    assert first.value("certs.changed") is None  # no census before it
    assert "not known" in as_text(first)
    store.saw_tls(replace(SEEN, sha256="CC", seen=3_000.0))  # a.test renewed
    store.saw_tls(replace(SEEN, host="c.test", seen=3_000.0))  # a new capsule: no change
    store.flush()
    second = take_census(Database("crawl.db", conn, path=db), 4_000.0, previous=first)
    assert second.value("certs.changed") == 1
    text = history_text([first, second])
    assert "capsules.known" in text and text.count("1970-01-01") >= 2
    conn.close()


def test_keep_then_history(tmp_path: Path) -> None:
    db = str(tmp_path / "crawl.db")
    connect(db).close()
    for _ in range(2):
        kept = run_main(["census", "--db", db, "--keep", "--json"])
        assert kept.returncode == 0, kept.stderr
    history = run_main(["census", "--db", db, "--history"])
    assert history.returncode == 0
    assert history.stdout.startswith("2 censuses kept")
    assert all(len(line) <= 80 for line in history.stdout.splitlines())
    series = json.loads(run_main(["census", "--db", db, "--history", "--json"]).stdout)
    assert [c["figures"]["capsules.known"]["value"] for c in series] == [0, 0]


def test_refusals(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    result = run_main(["census", "--db", str(missing)])
    assert result.returncode == 2 and "no such database" in result.stderr
    assert not missing.exists()
    db = str(tmp_path / "crawl.db")
    connect(db).close()
    both = run_main(["census", "--db", db, "--history", "--host", "a.test"])
    assert both.returncode == 2 and "--history" in both.stderr
    unknown = run_main(["census", "--db", db, "--host", "nowhere.test"])
    assert unknown.returncode == 2 and "no host nowhere.test" in unknown.stderr


def test_crawl_refuses_a_trust_ca_it_cannot_read(tmp_path: Path) -> None:
    db = tmp_path / "crawl.db"
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    for path, says in ((tmp_path / "none.pem", "cannot read it"), (bad, "not a PEM")):
        argv = ["crawl", "--db", str(db), "--test-range", "--trust-ca", str(path)]
        result = run_main([*argv, "gemini://127.0.0.1/"])
        assert result.returncode == 2 and says in result.stderr
    assert not db.exists()


def test_errors_are_grouped_by_kind() -> None:
    from geminibot.census.host import error_kind

    assert (
        error_kind(
            "ConnectionFailed: cannot connect to x.test port 1965: [Errno -2]"
            " Name or service not known"
        )
        == "DNS"
    )
    eai_again = (
        "cannot connect to x.test port 1965: [Errno -3] Temporary failure in name resolution"
    )
    assert error_kind(eai_again) == "DNS"
    assert error_kind("TLSFailure: TLS handshake with x.test failed: ...") == "TLS"
    assert error_kind("HeaderTimeout: no header from x.test within 30 s") == "timeout"
    assert error_kind("ConnectTimeout: no TLS connection to x.test within 30 s") == "timeout"
    assert error_kind("ConnectionFailed: cannot connect to x.test port 1965: refused") == (
        "other (connection)"
    )
