"""The options that go with a shared database are checked before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from geminibot.cli import main


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
