"""The options that go with a shared database are checked before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from store_helpers import LIMITS, Clock
from test_store import A, B, claim, decision, fetch, page

from geminibot.cli import main
from geminibot.crawl.pgstore import PgStore
from geminibot.crawl.store import CrawlStore, FetchedPage


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--max-hosts", "0"], "--max-hosts must be at least 1"),
        (["--lease-seconds", "30"], "--lease-seconds is for a postgresql:// --db"),
    ],
)
def test_bad_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], says: str
) -> None:
    db = str(tmp_path / "c.db")
    assert main(["crawl", "gemini://a.test/", "--db", db, *extra]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "c.db").exists()


def test_lease_seconds_must_be_positive(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crawl", "gemini://a.test/", "--db", pg_url, "--lease-seconds", "0"]) == 2
    assert "more than 0" in capsys.readouterr().err


def test_archiver_on_postgres_needs_a_warc_dir(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["crawl", "gemini://a.test/", "--db", pg_url, "--as", "archiver"]) == 2
    assert "needs --warc-dir" in capsys.readouterr().err


def test_role_mismatch_on_postgres_is_one_line(pg_url: str) -> None:
    """A refused resume exits at once (the connection pool does not keep it alive)."""
    store = PgStore(pg_url, Clock(), LIMITS)
    assert store.check_settings({"role": "indexer", "agent": "geminibot"}) is None
    store.close()
    argv = [sys.executable, "-m", "geminibot", "crawl", "gemini://a.test/", "--db", pg_url]
    argv += ["--as", "researcher"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "crawled with role 'indexer'" in done.stderr


def test_stats_urls_alike_on_both_stores(
    store: CrawlStore, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``stats --urls`` lists the same rows, filtered the same way, on either store."""
    long = A + "x" * LIMITS.max_url_length
    store.seed([A, A + "1", B, long])
    assert claim(store).url == A
    store.fetched(FetchedPage(decision(A), fetch(A), page(A, "Home", "hi"), "indexer", []))
    assert store.lease_host("b.test", "me") is not None
    assert store.claim("b.test", "me") is not None
    store.refused(decision(B, allowed=False, host="b.test"))

    def listed(*extra: str) -> list[str]:
        code = main(["stats", "--db", db, "--urls", *extra])
        out = capsys.readouterr().out.splitlines()
        assert code == (0 if out else 1)
        return out

    trapped = f"trapped    -  {long}  URL longer than {LIMITS.max_url_length} bytes"
    assert listed() == [
        f"done      20  {A}",
        f"queued     -  {A}1",
        f"refused    -  {B}  because",
        trapped,
    ]
    assert listed("--status", "2x") == [f"done      20  {A}"]
    assert listed("--status", "trapped") == [trapped]
    assert listed("--host", "b.*") == [f"refused    -  {B}  because"]
    assert listed("--host", "a.test", "--limit", "1") == [f"done      20  {A}"]
    assert listed("--status", "59") == []
    assert listed("--json", "--status", "queued") == [
        '{"url": "gemini://a.test/1", "host": "a.test", "state": "queued", "status": null,'
        ' "reason": null}'
    ]
