"""Seconds from a post added to a gemlog's index to the post in ``/new`` and searchable,
with ``geminibot serve`` running on real capsules and the index ``/submit``-ted (issue
57, "Done when", second point).

    .venv/bin/python bench/feeds_service.py /work/shared/real-capsules [--posts 3] [--skip 0]
        [--new-during-run 0] [--capsules 29] [--deadline 600] [--work DIR]

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

Prints one JSON object. Loopback only; every wait is bounded (``--deadline`` seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import trio
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

from geminibot.gemini.client import GeminiClient
from geminibot.searchcap.submit import PER_CLIENT
from geminibot.store.database import open_database
from geminibot.store.recheck import recheck

#: Seconds between two requests for ``/new``.
NEW_POLL = 1.0


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
    parser.add_argument("corpus", type=Path, help="the real-capsules folder")
    parser.add_argument("--capsules", type=int, default=29, help="how many (first by name)")
    parser.add_argument("--posts", type=int, default=PER_CLIENT, help="posts, one by one")
    parser.add_argument("--skip", type=int, default=0, help="take the feeds after the first N")
    parser.add_argument(
        "--new-during-run",
        type=int,
        default=0,
        metavar="N",
        help="also N pages never met, each submitted during a crawl run",
    )
    parser.add_argument("--deadline", type=float, default=600.0, help="bound on each wait (s)")
    parser.add_argument("--work", type=Path, help="keep the work here (else a temporary one)")
    args = parser.parse_args()
    if not 0 <= args.posts <= PER_CLIENT or not 0 <= args.new_during_run <= PER_CLIENT:
        parser.error(f"--posts, --new-during-run: 0 to {PER_CLIENT}")
    if not 1 <= args.posts + args.new_during_run <= PER_CLIENT:
        parser.error(f"--posts and --new-during-run: 1 to {PER_CLIENT} in all (a client's an hour)")
    with work_folder(args.work, "feeds-bench-") as work:
        print(json.dumps(run(args, work), indent=2))


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    port = free_port()
    search = (
        f'\n[search]\nport = {port}\ncerts = "{work / "search-certs"}"\n'
        'args = ["--rate", "1000", "--rate-burst", "1000"]\n'
    )
    options = ("--no-metrics-enabled", "--index-authority-every", "0")
    with real_service(args.corpus, args.capsules, work, args.deadline, search, options) as real:
        result: dict[str, Any] = {
            "machine": f"nproc {os.cpu_count()}, {cpu_model()}, load {os.getloadavg()[0]:.1f}",
            "capsules": len(real.hosts),
            "first_crawl_seconds": round(real.first_crawl_seconds, 1),
            "pages": one(real.db, "SELECT count(*) FROM pages")[0],
            "gemsub_feeds": one(real.db, "SELECT count(*) FROM feeds WHERE format = 'gemsub'")[0],
        }
        rows = []
        for n, index in enumerate(gemsub_indexes(real.db, real.capsules, args.posts, args.skip)):
            word = f"zqfeedpost{n}x"
            before = fetched_at(real.db, index)
            (next_visit,) = one(real.db, "SELECT next_visit FROM urls WHERE url = ?", index)
            url = post(real.capsules, index, n, word)
            submitted = time.time()
            status, answer = gemini(port, "/submit?" + quote(index, safe=""))
            if status != 20:
                raise SystemExit(f"/submit {index}: {status} {answer[:200]}")
            wait(lambda i=index, b=before: fetched_at(real.db, i) > b, index, args.deadline)
            refetched = fetched_at(real.db, index)  # the crawler's clock, not the poll's
            wait(lambda u=url: in_new(port, u), f"{url} in /new", args.deadline, NEW_POLL)
            listed = time.time()
            wait(lambda u=url, w=word: searchable(real.db, w, u), url, args.deadline)
            found = time.time()
            rows.append(
                {
                    "index": index,
                    "submit_answer": said(answer),
                    "submit_to_refetched": round(refetched - submitted, 2),
                    "refetched_to_new": round(listed - refetched, 2),
                    "refetched_to_searchable": round(found - refetched, 2),
                    "without_submit_hours": round((next_visit - submitted) / 3600, 1),
                }
            )
        result["posts"] = rows
        new = [new_during_run(real, port, n, args.deadline) for n in range(args.new_during_run)]
        if new:
            result["new_during_run"] = new
        for key, found in (
            ("submit_to_refetched", rows),
            ("refetched_to_new", rows),
            ("refetched_to_searchable", rows),
            ("submit_to_fetched", new),
            ("fetched_to_searchable", new),
        ):
            values = [r[key] for r in found]
            if values:
                result[key] = [min(values), statistics.median(values), max(values)]
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


if __name__ == "__main__":
    sys.exit(main())
