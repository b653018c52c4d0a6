"""Feeds found while crawling, end to end: ``geminibot crawl`` of capsules/feeds.test on
loopback (SQLite and PostgreSQL), then ``geminibot feeds --json`` lists its four feeds
(gemsub, Atom, RSS, twtxt) with their formats, titles, entry counts and dates, and the
pages reachable only through the Atom and RSS feeds were fetched. On a copy of the
capsule, an entry added to the gemlog and the feed fetched again is the first that
``geminibot feeds --new`` shows, once though two feeds list it."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import trio
import trio.testing
from commands import crawl_in_trio, run_main
from postgres_cluster import new_database

from capsule_server.testing import running_server

CAPSULES = Path(__file__).resolve().parents[2] / "capsules"
HOST = "feeds.test"
HOME = f"gemini://{HOST}/"
TIMEOUT = 120.0

EXPECTED = {
    f"{HOME}log/index.gmi": ("gemsub", "Feed test gemlog", None, 3, "2024-05-03T12:00:00+00:00"),
    f"{HOME}atom.xml": ("atom", "Feed test Atom", "Ada Atom", 2, "2024-05-06T09:30:00+00:00"),
    f"{HOME}rss.xml": ("rss", "Feed test RSS", None, 1, "2024-05-07T10:00:00+00:00"),
    f"{HOME}twtxt.txt": ("twtxt", "feedtester", "feedtester", 2, "2024-05-05T12:00:00+00:00"),
}


def crawl(root: Path, tmp: Path, db: str, *extra: str) -> None:
    """``geminibot crawl`` of the capsules in ``root`` from feeds.test's home page."""

    async def main() -> None:
        async with running_server(root, tmp / "certs", clock=trio.current_time) as server:
            argv = [HOME, "--db", db, "--test-range", "--json", *extra]
            argv += ["--connect-to", f"*.test:1965:127.0.0.1:{server.port}"]
            with trio.fail_after(TIMEOUT):
                proc = await crawl_in_trio(argv)
            assert proc.returncode == 0, proc.stderr

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0.005))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def crawled(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """feeds.test crawled into an SQLite file or a PostgreSQL database: what --db says."""
    tmp = tmp_path_factory.mktemp("feeds")
    root = tmp / "capsules"
    root.mkdir()
    (root / HOST).symlink_to(CAPSULES / HOST, target_is_directory=True)
    db = str(tmp / "crawl.db")
    if request.param == "postgresql":
        db = new_database(request.getfixturevalue("pg_cluster"))
    crawl(root, tmp, db)
    return db


def test_feeds_json_lists_the_four_feeds(crawled: str) -> None:
    proc = run_main(["feeds", "--db", crawled, "--json"])
    assert proc.returncode == 0, proc.stderr
    feeds = [json.loads(line) for line in proc.stdout.splitlines()]
    found = {
        f["url"]: (f["format"], f["title"], f["author"], f["entries"], f["last_entry"])
        for f in feeds
    }
    assert found == EXPECTED
    assert [f["format"] for f in feeds] == ["rss", "atom", "twtxt", "gemsub"]  # latest entry first


def test_feeds_text_fits_80_columns(crawled: str) -> None:
    proc = run_main(["feeds", "--db", crawled])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 + 2 * len(EXPECTED) and all(len(line) <= 80 for line in lines)
    assert lines[1].split()[:3] == ["rss", "1", "2024-05-07"]


def test_entries_only_a_feed_links_to_were_fetched(crawled: str) -> None:
    for url in (f"{HOME}atom/one.gmi", f"{HOME}atom/two.gmi", f"{HOME}rss/one.gmi"):
        proc = run_main(["why", url, "--db", crawled, "--json"])
        assert json.loads(proc.stdout)["searchable"] is True, (url, proc.stdout)


def test_the_gemsub_rules_hold(crawled: str) -> None:
    proc = run_main(["feeds", "--new", "--db", crawled, "--json", "--since", "366d"])
    assert proc.returncode == 1 and proc.stdout == ""  # every entry is from 2024
    if crawled.startswith("postgresql"):
        return
    with closing(sqlite3.connect(crawled)) as conn:
        rows = conn.execute(
            "SELECT e.url, e.title, e.published FROM feed_entries e JOIN feeds f"
            " ON f.id = e.feed_id WHERE f.format = 'gemsub' ORDER BY e.published"
        ).fetchall()
    noon = lambda text: datetime.fromisoformat(f"{text}T12:00:00+00:00").timestamp()  # noqa: E731
    assert rows == [
        (f"{HOME}log/untitled.gmi", "", noon("2024-04-20")),
        (f"{HOME}log/first.gmi", "First post", noon("2024-05-01")),
        (f"{HOME}log/second.gmi", "A second post", noon("2024-05-03")),
    ]


def test_an_entry_added_and_fetched_again_is_shown_first(tmp_path: Path) -> None:
    root = tmp_path / "capsules"
    shutil.copytree(CAPSULES / HOST, root / HOST)
    log = root / HOST / "log" / "index.gmi"
    today = datetime.now(UTC).date()
    older = today - timedelta(days=2)
    log.write_text(log.read_text() + f"=> older.gmi {older} An older post\n")
    db = str(tmp_path / "crawl.db")
    crawl(root, tmp_path, db)
    before = run_main(["feeds", "--new", "--db", db, "--json"])
    assert [json.loads(line)["title"] for line in before.stdout.splitlines()] == ["An older post"]
    log.write_text(log.read_text() + f"=> fresh.gmi {today} A \x1b[31mfresh\x1b[0m post\n")
    twtxt = root / HOST / "twtxt.txt"
    twtxt.write_text(twtxt.read_text() + f"{today}T00:00:00Z\tsee {HOME}log/fresh.gmi\n")
    crawl(root, tmp_path, db, "--refresh")
    after = run_main(["feeds", "--new", "--db", db, "--json"])
    entries = [json.loads(line) for line in after.stdout.splitlines()]
    assert [e["url"] for e in entries] == [f"{HOME}log/fresh.gmi", f"{HOME}log/older.gmi"]
    assert entries[0]["capsule"] == HOST and entries[0]["date"].startswith(str(today))
    text = run_main(["feeds", "--new", "--db", db])
    first = text.stdout.splitlines()[0]
    assert first.startswith(f"{today}  {HOST}") and first.endswith(f"{HOME}log/fresh.gmi")
    assert "\x1b" not in text.stdout and "A \\x1b[31m" in first and len(first) <= 80


def test_feeds_never_creates_a_database(tmp_path: Path) -> None:
    proc = run_main(["feeds", "--db", str(tmp_path / "none.db")])
    assert proc.returncode == 2 and "no such database" in proc.stderr
    assert not (tmp_path / "none.db").exists()
    assert run_main(["feeds", "--db", str(tmp_path / "x.db"), "--since", "1d"]).returncode == 2


def test_stats_count_the_feeds_by_format(crawled: str) -> None:
    data = json.loads(run_main(["stats", "--db", crawled, "--json"]).stdout)
    assert data["feeds"] == {"atom": 1, "gemsub": 1, "rss": 1, "twtxt": 1}
    text = run_main(["stats", "--db", crawled]).stdout
    assert "feeds by format:\n  atom    1\n  gemsub  1\n" in text
