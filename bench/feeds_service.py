"""Seconds from a post added to a gemlog's index to the post in ``/new`` and searchable,
with ``geminibot serve`` running on real capsules or on the synthetic Geminispace and the
index ``/submit``-ted (issue 57, "Done when", second point, and item 2).

    .venv/bin/python bench/feeds_service.py /work/shared/real-capsules [--posts 3] [--skip 0]
        [--new-during-run 0] [--capsules 29] [--deadline 900] [--work DIR]
    .venv/bin/python bench/feeds_service.py --space [--hosts 300] [--urls 6000] [--posts 3]
        [--skip 0] [--addresses 100] [--deadline 900] [--work DIR]

1. ``geminibot serve`` on a copy of the capsules, with its search capsule on loopback
   (``service_bench.real_service``: the copy in a temporary folder, never the
   repository), once its first crawl sleeps and the index has caught up.
2. The gemsub feeds it found (``geminibot feeds --db DB --json``); for ``--posts`` of them,
   one capsule each, in turn: a new page with a word found nowhere else is written beside
   the index and a dated link to it (``=> post.gmi YYYY-MM-DD Title``, today) appended to
   the index; the index URL is sent to the search capsule's ``/submit`` (a Gemini request
   over TLS on loopback); then timed:
   (a) submit -> the index re-fetched (``pages.fetched_at``, the crawler's clock);
   (b) re-fetch -> the post listed by the capsule's ``/new`` (polled over Gemini, every
   second once the re-fetch is seen);
   (c) re-fetch -> the post's page searchable (``geminibot.index.search``, the capsule's
   code, polled every 0.25 s).
3. ``--new-during-run N``: N times, a page the crawl never met (linked from nowhere) is
   written on a capsule, a crawl run is started (the other capsules rechecked, the
   store's ``recheck``: thousands of URLs due; every other time that capsule too, so that
   the run is working it, its URLs queued ahead of the new one), and once the run is
   under way (a page fetched after the recheck) the new page's URL is ``/submit``-ted;
   then timed:
   (d) submit -> the new page fetched (``pages.fetched_at``, the crawler's clock);
   (e) fetch -> the page searchable;
   with what shows the run was under way: the URLs queued at the submission and once the
   page is fetched (as committed: the crawl commits every 2 s), and how long the crawl
   went on fetching after it.
   A client may submit ``PER_CLIENT`` = 3 URLs an hour: ``--posts`` and
   ``--new-during-run`` together at most that.

``--space``: the same on the synthetic space (``bench/geminispace``, served in its own
process; ``freshness.start_space``/``start_service``: the crawl at ``min_delay = 0``),
its day 0 dated yesterday. Once the first crawl sleeps and the index has caught up, the
space moves to day 1 (``SIGUSR1``): the gemlogs the space says post that day (one host in
ten keeps one, ``geminispace.gemlog``) gain a post dated today, saying a word of its own.
``--posts`` of their indexes (after the first ``--skip``) are submitted and timed as
above; the others are left to the service, whose own re-fetch is when the store has
scheduled it (``urls.next_visit``, reported, not waited for: hours), as is the interval
each submitted index has once its new entry was seen (halved: a feed that showed new
entries is read sooner, down to ``FEED_MIN_REVISIT``).

Prints one JSON object. Loopback only; every wait is bounded (``--deadline`` seconds).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import freshness
import trio
from geminispace.gemlog import INDEX
from geminispace.space import CHANGE_RATE, Space
from machine import cpu_model
from real_search import BIN, free_port
from service_bench import (
    RealService,
    fetched_at,
    file_of,
    one,
    real_service,
    searchable,
    wait,
    work_folder,
)
from space_crawl import next_day

from geminibot.gemini.client import GeminiClient
from geminibot.searchcap.submit import PER_CLIENT
from geminibot.store.database import open_database
from geminibot.store.freshness import FEED_MIN_REVISIT
from geminibot.store.recheck import recheck

#: Seconds between two requests for ``/new``.
NEW_POLL = 1.0
#: The search capsule's rate limit, out of the way of the polls of ``/new``.
SEARCH_ARGS = ("--rate", "1000", "--rate-burst", "1000")
#: The figures timed for each post, and for each page submitted during a run.
POST_STEPS = ("submit_to_refetched", "refetched_to_new", "refetched_to_searchable")
NEW_STEPS = ("submit_to_fetched", "fetched_to_searchable")


def gemini(port: int, path_query: str) -> tuple[int, str]:
    """Status and body of ``gemini://localhost/PATH_QUERY`` asked of the search capsule."""

    async def ask() -> tuple[int, str]:
        client = GeminiClient(connect_to=lambda _host, _port: ("127.0.0.1", port))
        with trio.fail_after(30):
            response = await client.fetch(f"gemini://localhost:{port}{path_query}")
        return response.status, response.body.decode("utf-8", "replace")

    return trio.run(ask)


def gemsub_indexes(db: Path, capsules: Path, count: int, skip: int) -> list[str]:
    """``count`` gemsub feeds whose file is in the copy, one capsule each, the ones with the
    most entries first (the gemlogs' indexes), after the first ``skip``."""
    out = subprocess.run(
        [str(BIN / "geminibot"), "feeds", "--db", str(db), "--json", "--limit", "1000"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    feeds = [json.loads(line) for line in out.splitlines() if line.strip()]
    feeds.sort(key=lambda f: (-int(f["entries"]), f["url"]))
    chosen: dict[str, str] = {}
    for feed in feeds:
        url = str(feed["url"])
        host = url.removeprefix("gemini://").partition("/")[0]
        fits = feed["format"] == "gemsub" and "?" not in url and host not in chosen
        if fits and file_of(capsules, url).is_file():
            chosen[host] = url
    return list(chosen.values())[skip : skip + count]


def post(capsules: Path, index: str, n: int, word: str) -> str:
    """A new page beside ``index`` and a dated link to it appended to the index; its URL."""
    name = f"feedsbench-{n}.gmi"
    file = file_of(capsules, index)
    (file.parent / name).write_text(f"# Post {n}\n\n{word} is said in this post only.\n")
    today = datetime.now(UTC).date().isoformat()
    with file.open("a", encoding="utf-8") as f:
        f.write(f"\n=> {name} {today} Feeds benchmark post {n}\n")
    return index.rsplit("/", 1)[0] + "/" + name


def in_new(port: int, url: str) -> bool:
    status, body = gemini(port, "/new")
    return status == 20 and f"=> {url} " in body


def said(answer: str) -> str:
    """The first line of a ``/submit`` answer that is neither a heading nor a link."""
    lines = [line for line in answer.splitlines() if line.strip()]
    text = [line for line in lines if not line.startswith(("#", "=>"))]
    return (text or lines or [""])[0][:120]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, nargs="?", help="the real-capsules folder")
    parser.add_argument("--capsules", type=int, default=29, help="how many (first by name)")
    parser.add_argument("--posts", type=int, default=PER_CLIENT, help="posts, one by one")
    parser.add_argument("--skip", type=int, default=0, help="take the feeds after the first N")
    parser.add_argument(
        "--new-during-run",
        type=int,
        default=0,
        metavar="N",
        help="also N pages never met, each submitted during a crawl run (real capsules)",
    )
    parser.add_argument("--deadline", type=float, default=900.0, help="bound on each wait (s)")
    parser.add_argument("--work", type=Path, help="keep the work here (else a temporary one)")
    space = parser.add_argument_group("the synthetic space (instead of the real capsules)")
    space.add_argument("--space", action="store_true", help="run on bench/geminispace")
    space.add_argument("--hosts", type=int, default=300)
    space.add_argument("--urls", type=int, default=6000)
    space.add_argument(
        "--addresses",
        type=int,
        default=100,
        help="spread the hosts over 127.0.1.1 ... 127.0.1.K (0: all on 127.0.0.1, which the"
        " crawl then asks one request at a time)",
    )
    parser.set_defaults(seed=1965, change_rate=CHANGE_RATE, remove_rate=0.0)
    args = parser.parse_args()
    if not 0 <= args.posts <= PER_CLIENT or not 0 <= args.new_during_run <= PER_CLIENT:
        parser.error(f"--posts, --new-during-run: 0 to {PER_CLIENT}")
    if not 1 <= args.posts + args.new_during_run <= PER_CLIENT:
        parser.error(f"--posts and --new-during-run: 1 to {PER_CLIENT} in all (a client's an hour)")
    if (args.corpus is None) is not args.space:
        parser.error("give the real-capsules folder, or --space")
    if args.space and args.new_during_run:
        parser.error("--new-during-run writes pages on the real capsules: not with --space")
    with work_folder(args.work, "feeds-bench-") as work:
        result = run_space(args, work) if args.space else run(args, work)
        print(json.dumps(result, indent=2))


def time_post(
    db: Path, port: int, index: str, url: str, word: str, deadline: float
) -> dict[str, Any]:
    """``/submit`` ``index`` (which now links to the post ``url``, saying ``word``) to the
    search capsule on ``port``, and time (a), (b), (c)."""
    before = fetched_at(db, index)
    submitted = time.time()
    status, answer = gemini(port, "/submit?" + quote(index, safe=""))
    if status != 20:
        raise SystemExit(f"/submit {index}: {status} {answer[:200]}")
    wait(lambda: fetched_at(db, index) > before, index, deadline)
    refetched = fetched_at(db, index)  # the crawler's clock, not the poll's
    wait(lambda: in_new(port, url), f"{url} in /new", deadline, NEW_POLL)
    listed = time.time()
    wait(lambda: searchable(db, word, url), url, deadline)
    found = time.time()
    return {
        "index": index,
        "submit_answer": said(answer),
        "submit_to_refetched": round(refetched - submitted, 2),
        "refetched_to_new": round(listed - refetched, 2),
        "refetched_to_searchable": round(found - refetched, 2),
    }


def spread(rows: list[dict[str, Any]], steps: tuple[str, ...]) -> dict[str, list[float]]:
    """Min, median and max of each of ``steps`` over ``rows`` (none when no rows)."""
    out = {}
    for key in steps:
        values = [r[key] for r in rows]
        if values:
            out[key] = [min(values), statistics.median(values), max(values)]
    return out


def machine() -> str:
    return f"nproc {os.cpu_count()}, {cpu_model()}, load {os.getloadavg()[0]:.1f}"


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    port = free_port()
    search = (
        f'\n[search]\nport = {port}\ncerts = "{work / "search-certs"}"\n'
        f"args = {json.dumps(list(SEARCH_ARGS))}\n"
    )
    options = ("--no-metrics-enabled", "--index-authority-every", "0")
    with real_service(args.corpus, args.capsules, work, args.deadline, search, options) as real:
        result: dict[str, Any] = {
            "machine": machine(),
            "capsules": len(real.hosts),
            "first_crawl_seconds": round(real.first_crawl_seconds, 1),
            "pages": one(real.db, "SELECT count(*) FROM pages")[0],
            "gemsub_feeds": one(real.db, "SELECT count(*) FROM feeds WHERE format = 'gemsub'")[0],
        }
        rows = []
        for n, index in enumerate(gemsub_indexes(real.db, real.capsules, args.posts, args.skip)):
            word = f"zqfeedpost{n}x"
            (next_visit,) = one(real.db, "SELECT next_visit FROM urls WHERE url = ?", index)
            without = round((next_visit - time.time()) / 3600, 1)
            url = post(real.capsules, index, n, word)
            row = time_post(real.db, port, index, url, word, args.deadline)
            rows.append(row | {"without_submit_hours": without})
        result["posts"] = rows
        new = [new_during_run(real, port, n, args.deadline) for n in range(args.new_during_run)]
        if new:
            result["new_during_run"] = new
        result |= spread(rows, POST_STEPS) | spread(new, NEW_STEPS)
        result["load_at_end"] = round(os.getloadavg()[0], 1)
        return result


def new_during_run(real: RealService, port: int, n: int, deadline: float) -> dict[str, Any]:
    """A page the crawl never met, submitted while a run re-fetches every capsule: the
    seconds to its fetch and to searchable, and what shows the run was under way."""
    host = real.hosts[n % len(real.hosts)]
    worked = n % 2 == 1  # the run works the page's capsule too (its URLs queued first)
    word = f"zqnewpage{n}x"
    (real.capsules / host / f"feedsbench-new-{n}.gmi").write_text(
        f"# A page never linked\n\n{word} is said on this page only.\n"
    )
    url = f"gemini://{host}/feedsbench-new-{n}.gmi"
    started = time.time()
    with open_database(str(real.db)) as database:  # a run: every capsule due now
        for h in real.hosts:
            if h != host or worked:
                recheck(database, h, h, is_url=False, now=started)
    wait(lambda: last_fetch(real.db) > started, "a run under way", deadline)
    submitted = time.time()
    status, answer = gemini(port, "/submit?" + quote(url, safe=""))
    if status != 20 or not said(answer).startswith("Queued"):
        raise SystemExit(f"/submit {url}: {status} {said(answer)}")
    (queued,) = one(real.db, "SELECT count(*) FROM urls WHERE state = 'queued'")
    wait(lambda: fetched_at(real.db, url) > 0, url, deadline)
    fetched = fetched_at(real.db, url)  # the crawler's clock
    (left,) = one(real.db, "SELECT count(*) FROM urls WHERE state = 'queued'")
    wait(lambda: searchable(real.db, word, url), f"{url} searchable", deadline)
    found = time.time()
    return {
        "url": url,
        "its_capsule_in_the_run": worked,
        "submit_answer": said(answer),
        "queued_at_submit": queued,
        "queued_once_fetched": left,
        "submit_to_fetched": round(fetched - submitted, 2),
        "fetched_to_searchable": round(found - fetched, 2),
        "run_went_on_after": round(last_fetch(real.db) - fetched, 2),
    }


def last_fetch(db: Path) -> float:
    """When the crawl last fetched a page (0 if never)."""
    (at,) = one(db, "SELECT max(fetched_at) FROM pages")
    return 0.0 if at is None else float(at)


def revisit(db: Path, url: str) -> tuple[float, float]:
    """``url``'s revisit interval and when it is next due (seconds since the epoch)."""
    interval, due = one(db, "SELECT revisit_interval, next_visit FROM urls WHERE url = ?", url)
    return float(interval), float(due)


def run_space(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The ``--space`` run (see the module docstring)."""
    start = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    space = Space(args.hosts, args.urls, args.seed, start=start)
    db = work / "engine.db"
    server, port = freshness.start_space(args, 0, "--start", start.isoformat())
    search_port = free_port()
    service = freshness.start_service(work, space, port, search_port, args.addresses, SEARCH_ARGS)
    try:
        first = wait(lambda: freshness.settled(work), "the first crawl and index", args.deadline)
        blogs = [i for i in range(space.hosts) if space.gemlogs.has(i)]
        indexes = {i: f"gemini://{space.host(i)}{INDEX}" for i in blogs}
        read = {i for i in blogs if one(db, "SELECT 1 FROM feeds WHERE url = ?", indexes[i])}
        posting = [i for i in blogs if i in read and space.gemlogs.posted(i, 1)]
        result: dict[str, Any] = {
            "machine": machine(),
            "hosts": args.hosts,
            "urls": args.urls,
            "first_crawl_seconds": round(first, 1),
            "pages": one(db, "SELECT count(*) FROM pages")[0],
            "gemlogs": len(blogs),
            "gemsub_feeds": one(db, "SELECT count(*) FROM feeds WHERE format = 'gemsub'")[0],
            "gemlogs_posting_on_day_1": len(posting),
        }
        chosen = posting[args.skip : args.skip + args.posts]
        if len(chosen) < args.posts:
            raise SystemExit(f"{len(posting)} gemlogs post on day 1: a bigger --hosts")
        scheduled = {i: revisit(db, indexes[i]) for i in posting}
        if next_day(server) != 1:
            raise SystemExit("the space's server did not move to day 1")
        day1 = time.time()
        rows = []
        for i in chosen:
            n = space.gemlogs.posts(i, 1) - 1
            url = f"{indexes[i]}{n}.gmi"
            row = time_post(
                db, search_port, indexes[i], url, space.gemlogs.word(i, n), args.deadline
            )
            interval, due = revisit(db, indexes[i])
            row["interval_before_hours"] = round(scheduled[i][0] / 3600, 1)
            row["interval_after_hours"] = round(interval / 3600, 1)
            row["next_visit_after_hours"] = round((due - time.time()) / 3600, 1)
            rows.append(row)
        result["posts"] = rows
        result |= spread(rows, POST_STEPS)
        result["left_to_the_service"] = [
            {
                "index": indexes[i],
                "interval_hours": round(scheduled[i][0] / 3600, 1),
                "refetch_due_after_post_hours": round((scheduled[i][1] - day1) / 3600, 1),
            }
            for i in posting
            if i not in chosen
        ]
        result["feed_min_revisit_hours"] = FEED_MIN_REVISIT / 3600
        result["load_at_end"] = round(os.getloadavg()[0], 1)
        return result
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=120)
        freshness.stop(server)


if __name__ == "__main__":
    sys.exit(main())
