"""Today's crawler (``geminibot crawl``) over a small synthetic Geminispace served in the
same process: policies obeyed, traps stopped, duplicates collapsed, non-text kept as
metadata, 44s met, vanished hosts failing, a gemlog read as a feed, and a second day's
crawl changing exactly the pages the space says changed. The crawl runs in the test's trio run on a mock clock: the
pacing and the 44 answers' waits take no real time, and the rate-limited host sees the
same request times however loaded the machine is."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trio
import trio.testing
from commands import crawl_in_trio
from geminispace import Space, SpaceServer, serving
from geminispace.gemlog import INDEX
from geminispace.space import DOMAIN

#: Bound on one crawl (seconds on the mock clock): far more than it needs, far less than
#: a hang.
CRAWL_LIMIT = 240.0
MAX_HOST_URLS = 25


async def crawl(server: SpaceServer, db: Path) -> sqlite3.Connection:
    space = server.space
    seeds = [f"gemini://{space.host(i)}/" for i in range(space.hosts)]  # gone ones too
    argv = [*seeds, "--db", str(db), "--test-range", "--allow-host", f"*.{DOMAIN}", "--json"]
    argv += ["--connect-to", f"*.{DOMAIN}:1965:127.0.0.1:{server.port}"]
    argv += ["--max-host-urls", str(MAX_HOST_URLS)]
    with trio.fail_after(CRAWL_LIMIT):
        done = await crawl_in_trio(argv)
    assert done.returncode in (0, 1), done.stderr
    return sqlite3.connect(db)


def pages(conn: sqlite3.Connection, host: str) -> dict[str, tuple[int, str | None]]:
    rows = conn.execute("SELECT url, status, content_hash FROM pages WHERE host = ?", (host,))
    return {url.split(host, 1)[1]: (status, digest) for url, status, digest in rows}


async def test_crawl_of_a_small_space_day_0_then_day_1(
    tmp_path: Path, in_process_clock: trio.testing.MockClock
) -> None:
    space = Space(12, 300, slow_seconds=0.05)
    kind = {space.behaviour(i): i for i in range(space.hosts)}
    server = SpaceServer(space, rate_interval=0.2, record=True)
    async with serving(server):
        day0 = await crawl(server, tmp_path / "day0.db")
        served = list(server.log)
        server.day = 1
        day1 = await crawl(server, tmp_path / "day1.db")

    asked = {(host, path) for host, path, _ in served}
    for i in range(space.hosts):
        host = space.host(i)
        if not space.answers(i, 0):
            assert not pages(day0, host)
            continue
        # Every policy kind refuses /private/ to the indexer; with no policy it is fetched.
        refused = space.robots_kind(i) != "none"
        assert ((host, "/private/secret.gmi") in asked) is not refused, host
        assert pages(day0, host)["/"][0] == 20

    # Traps: the maze and the calendar end at the per-host bound; the crawl ends.
    for trap, prefix in (("maze", "/maze/"), ("calendar", "/calendar/")):
        host = space.host(kind[trap])
        trapped = [p for h, p in asked if h == host and p.startswith(prefix)]
        assert 0 < len(trapped) <= MAX_HOST_URLS
    assert day0.execute("SELECT count(*) FROM urls WHERE state = 'trapped'").fetchone()[0]

    # The same body at three URLs: indexed once.
    host = space.host(0)
    dups = day0.execute(
        "SELECT count(*), sum(duplicate_of IS NOT NULL) FROM pages WHERE host = ?"
        " AND url LIKE '%/dup/%'",
        (host,),
    ).fetchone()
    assert dups == (3, 2)
    # Non-text files: searchable by the words of their links and path (issue 58), no body.
    png = day0.execute(
        "SELECT mime, text_indexed FROM pages WHERE url = ?", (f"gemini://{host}/files/photo.png",)
    ).fetchone()
    assert png == ("image/png", 1)
    # The rate-limited host answered 44 and was still crawled.
    limited = space.host(kind["rate-limited"])
    assert any(h == limited and s == 44 for h, _, s in served)
    assert pages(day0, limited)["/"][0] == 20

    # The gemlog: its index read as a gemsub feed with every post of the day, the posts
    # fetched (the newest first: the host's last URLs may be past MAX_HOST_URLS).
    blog = next(i for i in range(space.hosts) if space.gemlogs.has(i))
    assert space.gemlogs.posts(blog, 1) > space.gemlogs.posts(blog, 0)
    for conn, day in ((day0, 0), (day1, 1)):
        index = f"gemini://{space.host(blog)}{INDEX}"
        feed = conn.execute("SELECT format, entries FROM feeds WHERE url = ?", (index,))
        assert feed.fetchone() == ("gemsub", space.gemlogs.posts(blog, day))
        posts = {p for p in pages(conn, space.host(blog)) if p.startswith(INDEX)}
        assert posts <= set(space.gemlogs.paths(blog, day))
        assert f"{INDEX}{space.gemlogs.posts(blog, day) - 1}.gmi" in posts

    # Day 1: the vanished host is gone; changed pages, and only they, have a new hash.
    assert not pages(day1, space.host(kind["vanishes"]))
    assert pages(day0, space.host(kind["vanishes"]))
    compared = changed = 0
    for i in range(space.hosts):
        before, after = pages(day0, space.host(i)), pages(day1, space.host(i))
        for path, (status, digest) in before.items():
            if path not in after or not path.startswith("/p/") or status != 20:
                continue
            j = int(path[3:-4])
            compared += 1
            changed += space.changed(i, j, 1)
            assert (after[path][1] != digest) == space.changed(i, j, 1), path
    assert compared > 100 and changed > 0
