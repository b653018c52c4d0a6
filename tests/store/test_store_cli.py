"""The options that go with a shared database are checked before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from store_helpers import LIMITS, Clock

from geminibot.cli import main
from geminibot.crawl.pgstore import PgStore


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
