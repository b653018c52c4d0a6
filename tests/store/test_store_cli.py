"""The options that go with a shared database are checked before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from store_helpers import LIMITS, Clock
from test_store import A, B, claim, decision, fetch, page

from geminibot.cli import build_parser, main
from geminibot.index.search import MAX_LIMIT, MAX_OFFSET
from geminibot.store.crawlstore import CrawlStore, FetchedPage
from geminibot.store.pgstore import PgStore

#: Every numeric option of crawl, search and stats: (command, option, the first value
#: refused, the shared wording of cliutil.bounded_number, the value at the edge accepted).
NUMERIC_OPTIONS = [
    ("crawl", "--max-hosts", "0", "0 must be 1 or more", "1"),
    ("crawl", "--lease-seconds", "0", "0 must be a number above 0", "0.001"),
    ("crawl", "--max-pages", "0", "0 must be 1 or more", "1"),
    ("crawl", "--max-depth", "-1", "-1 must be 0 or more", "0"),
    ("crawl", "--max-host-urls", "0", "0 must be 1 or more", "1"),
    ("crawl", "--concurrency", "0", "0 must be 1 or more", "1"),
    ("crawl", "--concurrency", "x", "'x' is not a whole number", "1"),
    ("search", "--limit", "0", f"0 must be 1 to {MAX_LIMIT}", "1"),
    (
        "search",
        "--limit",
        str(MAX_LIMIT + 1),
        f"{MAX_LIMIT + 1} must be 1 to {MAX_LIMIT}",
        str(MAX_LIMIT),
    ),
    ("search", "--offset", "-1", f"-1 must be 0 to {MAX_OFFSET}", "0"),
    (
        "search",
        "--offset",
        str(MAX_OFFSET + 1),
        f"{MAX_OFFSET + 1} must be 0 to {MAX_OFFSET}",
        str(MAX_OFFSET),
    ),
    ("stats", "--limit", "0", "0 must be 1 or more", "1"),
]


def _argv(command: str, *extra: str, db: str = "c.db") -> list[str]:
    first = {"crawl": ["gemini://a.test/"], "search": ["q"], "stats": ["--urls"]}[command]
    return [command, *first, "--db", db, *extra]


@pytest.mark.parametrize(("command", "option", "refused", "says", "edge"), NUMERIC_OPTIONS)
def test_numeric_options_bounded_at_their_edges(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    option: str,
    refused: str,
    says: str,
    edge: str,
) -> None:
    """Checked as every command's numeric options are (cliutil.bounded_number): a usage
    error naming the option, before any database is touched; the edge is accepted."""
    db = str(tmp_path / "c.db")
    with pytest.raises(SystemExit) as exited:
        main(_argv(command, option, refused, db=db))
    assert exited.value.code == 2
    assert capsys.readouterr().err == f"geminibot {command}: argument {option}: {says}\n"
    assert not (tmp_path / "c.db").exists()
    args = build_parser().parse_args(_argv(command, option, edge))
    assert getattr(args, option[2:].replace("-", "_")) == float(edge)


def test_lease_seconds_needs_a_shared_db(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "c.db")
    assert main(_argv("crawl", "--lease-seconds", "30", db=db)) == 2
    assert "--lease-seconds is for a postgresql:// --db" in capsys.readouterr().err
    assert not (tmp_path / "c.db").exists()


def test_lease_seconds_must_be_positive(pg_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(_argv("crawl", "--lease-seconds", "0", db=pg_db))
    assert exited.value.code == 2
    assert "argument --lease-seconds: 0 must be a number above 0" in capsys.readouterr().err


def test_archiver_on_postgres_needs_a_warc_dir(
    pg_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["crawl", "gemini://a.test/", "--db", pg_db, "--as", "archiver"]) == 2
    assert "needs --warc-dir" in capsys.readouterr().err


def test_role_mismatch_on_postgres_is_one_line(pg_db: str) -> None:
    """A refused resume exits at once (the connection pool does not keep it alive)."""
    store = PgStore(pg_db, Clock(), LIMITS)
    assert store.check_settings({"role": "indexer", "agent": "geminibot"}) is None
    store.close()
    argv = [sys.executable, "-m", "geminibot", "crawl", "gemini://a.test/", "--db", pg_db]
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
