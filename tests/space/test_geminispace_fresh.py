"""A revisit of the synthetic Geminispace on the same database (``geminibot crawl
--refresh``, run in the test's trio run on a mock clock, beside the space's server): on
day 1 exactly the pages the space says changed are re-indexed; the others are recognised
by their hash and left as they were; a gemlog's new post is found through its feed."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import space_crawl
import trio
import trio.testing
from commands import crawl_in_trio
from geminispace import Space, SpaceServer, serving
from geminispace.gemlog import INDEX
from geminispace.space import DOMAIN

from geminibot.store.freshness import INITIAL_REVISIT

#: Bound on one crawl (seconds on the mock clock): far more than it needs, far less than
#: a hang.
CRAWL_LIMIT = 240.0


async def crawl(server: SpaceServer, db: Path, *extra: str) -> dict[str, Any]:
    space = server.space
    seeds = [f"gemini://{space.host(i)}/" for i in range(space.hosts)]
    argv = [*seeds, "--db", str(db), *extra]
    argv += ["--test-range", "--allow-host", f"*.{DOMAIN}", "--json", "--max-host-urls", "25"]
    argv += ["--connect-to", f"*.{DOMAIN}:1965:127.0.0.1:{server.port}"]
    with trio.fail_after(CRAWL_LIMIT):
        done = await crawl_in_trio(argv)
    assert done.returncode in (0, 1), done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def tree_pages(conn: sqlite3.Connection) -> dict[tuple[str, int], tuple[int, str]]:
    """(host, j) -> (row id, content hash) of every /p/j page fetched with 20."""
    rows = conn.execute("SELECT url, id, content_hash FROM pages WHERE status = 20")
    out = {}
    for url, row_id, digest in rows:
        host, _, path = url.removeprefix("gemini://").partition("/")
        if path.startswith("p/") and path.endswith(".gmi"):
            out[host, int(path[2:-4])] = (row_id, digest)
    return out


async def test_a_second_day_reindexes_only_what_changed(
    tmp_path: Path, in_process_clock: trio.testing.MockClock
) -> None:
    space = Space(8, 120, slow_seconds=0.05, change_rate=0.3)
    server = SpaceServer(space, rate_interval=0.2)
    db = tmp_path / "space.db"
    async with serving(server):
        await crawl(server, db)
        before = tree_pages(sqlite3.connect(db))
        server.day = 1
        summary = await crawl(server, db, "--refresh")
    after = tree_pages(sqlite3.connect(db))
    changed = unchanged = 0
    for (host, j), (row_id, digest) in before.items():
        i = space.index_of(host)
        assert i is not None
        if not space.answers(i, 1):
            # a vanished host's pages fail: the last copy stays indexed (for VANISHED_AFTER)
            assert after[host, j] == (row_id, digest)
            continue
        new_id, new_digest = after[host, j]
        if space.changed(i, j, 1):
            changed += 1
            assert new_digest != digest and new_id != row_id, (host, j)
        else:
            unchanged += 1
            assert (new_id, new_digest) == (row_id, digest), (host, j)  # not re-indexed
    assert changed > 5 and unchanged > 5
    assert summary["revisits"] > 0 and summary["unchanged"] >= unchanged
    # The gemlog's post of day 1: its index re-read, the new post fetched, and the index,
    # a feed that showed a new entry, due again sooner than a page seen once.
    blog = next(i for i in range(space.hosts) if space.gemlogs.has(i))
    assert space.gemlogs.posted(blog, 1)
    index = f"gemini://{space.host(blog)}{INDEX}"
    new = f"{index}{space.gemlogs.posts(blog, 1) - 1}.gmi"
    with closing(sqlite3.connect(db)) as conn:
        entries = conn.execute("SELECT entries FROM feeds WHERE url = ?", (index,)).fetchone()
        assert entries == (space.gemlogs.posts(blog, 1),)
        assert conn.execute("SELECT status FROM pages WHERE url = ?", (new,)).fetchone() == (20,)
        interval = conn.execute("SELECT revisit_interval FROM urls WHERE url = ?", (index,))
        assert interval.fetchone() == (INITIAL_REVISIT / 2,)


#: Pages the day-1 revisit of the test below fetches before it stops (--max-pages).
DAY1_PAGES = 20


async def test_a_day_cut_short_leaves_its_changes_to_the_next(
    tmp_path: Path, in_process_clock: trio.testing.MockClock
) -> None:
    """Day 1's revisit stops early (as a run cut by --max-time does), so the pages it did
    not reach keep their day-0 copies; day 2 re-indexes those the space changed on day 1.
    The benchmark's comparison (``compare_days``) counts them as changed since the
    database's copy, not as pages re-indexed unchanged: every page day 2 re-indexed had
    another body than its copy."""
    space = Space(8, 120, slow_seconds=0.05, change_rate=0.3)
    server = SpaceServer(space, rate_interval=0.2)
    db = tmp_path / "space.db"
    async with serving(server):
        await crawl(server, db)
        with sqlite3.connect(db) as conn:
            held = conn.execute("SELECT count(*) FROM pages").fetchone()[0]
        conn.close()
        server.day = 1
        await crawl(server, db, "--refresh", "--max-pages", str(held + DAY1_PAGES))
        day1 = space_crawl.pages_of(db)
        server.day = 2
        await crawl(server, db, "--refresh")
    figures = space_crawl.compare_days(space, 2, day1, space_crawl.pages_of(db))
    unexplained = [k for k in figures["reindexed_not_changed"] if not k.startswith("new URL")]
    assert unexplained == [], figures["reindexed_not_changed"]
    assert figures["changed_before_today"] > 0  # day 1 left changed pages unreached
    assert figures["copies_of_no_revision"] == 0
    assert figures["changed_and_reindexed"] > figures["changed_before_today"]
    assert set(figures["changed_not_reindexed"]) <= {space_crawl.VANISHED}
