"""``geminibot recheck URL|HOST --db`` and ``geminibot why`` on not-found and gone pages, in
this process, on both stores: what each says (text, ``--json``), its exit status, and
one line for a URL or host the database does not hold or a bad ``--db``."""

from __future__ import annotations

import json
from pathlib import Path

from commands import run_main
from store_helpers import LIMITS, Clock
from test_store_not_found import answer

from geminibot.store.crawlstore import CrawlStore, Revisit
from geminibot.store.freshness import DAY

A = "gemini://a.test/"
MISSING, GONE = A + "missing.gmi", A + "gone.gmi"
TRAPPED = A + "x" * (LIMITS.max_url_length - len(A) + 1)


def crawled(store: CrawlStore, clock: Clock) -> None:
    """A capsule whose home links to a page, a page not found, a page gone and a URL a
    trap bound keeps out."""
    store.seed([A])
    answer(store, A, 20, clock, links=(A + "p.gmi", MISSING, GONE, TRAPPED))
    answer(store, A + "p.gmi", 20, clock)
    answer(store, MISSING, 51, clock, not_found=True, revisit=Revisit(clock.now + DAY, None))
    answer(store, GONE, 52, clock, gone=True, revisit=Revisit(None, None))


def test_recheck_a_url_and_a_host(store: CrawlStore, db: str, clock: Clock) -> None:
    crawled(store, clock)
    done = run_main(["recheck", A, "--db", db])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == [
        f"queued {A} for a fetch at its capsule's pace,",
        "before the capsule's other queued URLs",
    ]
    assert "a running crawl (geminibot serve, crawl --forever) takes it within 15 s" in (
        done.stdout.replace("\n", " ")
    )
    assert all(len(line) <= 80 for line in lines)

    host = run_main(["recheck", "a.test", "--db", db])
    assert host.returncode == 0, host.stderr
    assert host.stdout.splitlines()[:2] == [
        "queued 4 pages of a.test for a fetch at its pace",
        "(0 URLs already queued, 1 URL kept out by trap bounds)",
    ]
    data = json.loads(run_main(["recheck", "a.test", "--db", db, "--json"]).stdout)
    assert data == {
        "target": "a.test",
        "kind": "host",
        "known": True,
        "due_now": 4,
        "already_queued": 0,
        "kept_out": 1,
    }
    store.revisit(clock.now + 10 * DAY)  # (the crawl queued them)
    queued = run_main(["recheck", MISSING, "--db", db])
    assert queued.returncode == 0
    assert queued.stdout.splitlines() == [
        f"{MISSING} is already queued (or being fetched): it goes first",
        "among the capsule's queued URLs",
    ]


def test_recheck_says_no_in_one_line(
    store: CrawlStore, db: str, clock: Clock, tmp_path: Path
) -> None:
    crawled(store, clock)
    trapped = run_main(["recheck", TRAPPED, "--db", db])
    assert trapped.returncode == 1 and "kept out by a trap bound" in trapped.stdout
    for argv, words in (
        (["recheck", A + "never.gmi", "--db", db], "no such URL"),
        (["recheck", "b.test", "--db", db], "b.test: no such host"),
        (["recheck", "a.test", "--db", str(tmp_path / "none.db")], "no such database"),
        (["recheck", "gemini://", "--db", db], "not a URL this crawler follows"),
    ):
        done = run_main(argv)
        assert done.returncode == 2, (argv, done.stdout)
        assert words in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
        assert done.stdout == ""


def test_why_says_not_found_or_gone_and_when_it_asks_again(
    store: CrawlStore, db: str, clock: Clock
) -> None:
    crawled(store, clock)
    missing = run_main(["why", MISSING, "--db", db, "--json"])
    assert missing.returncode == 1
    data = json.loads(missing.stdout)
    assert data["code"] == "not_found" and data["next_visit"] is not None
    assert "(not found) once since" in data["reason"] and "asks again on" in data["reason"]
    text = run_main(["why", MISSING, "--db", db]).stdout
    assert "not found" in text and all(len(line) <= 80 for line in text.splitlines())
    gone = json.loads(run_main(["why", GONE, "--db", db, "--json"]).stdout)
    assert gone["code"] == "gone" and gone["next_visit"] is None
    assert "52 (gone)" in gone["reason"] and "does not ask again" in gone["reason"]


def test_stats_lists_the_urls_not_found_apart_from_those_gone(
    store: CrawlStore, db: str, clock: Clock
) -> None:
    crawled(store, clock)
    listed = run_main(["stats", "--db", db, "--urls", "--status", "not_found"])
    assert listed.returncode == 0, listed.stderr
    assert MISSING in listed.stdout and GONE not in listed.stdout
    frontier = json.loads(run_main(["stats", "--db", db, "--json"]).stdout)["frontier"]
    assert (frontier["not_found"], frontier["gone"]) == (1, 1)
