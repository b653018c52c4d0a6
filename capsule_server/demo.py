"""``make demo``: the main job on the bundled data.

It lives in capsule_server because it runs the server: capsule_server imports geminibot,
never the reverse (docs/architecture.md).

Serves the bundled test capsules on 127.0.0.1 (capsule_server, in this process), crawls
every one of them as an indexer (``--test-range``: no default delay, but every policy's
delay, 44 and visit window still hold), then shows what the index says: statistics and a
few searches, and serves the index as a Gemini search capsule (``geminibot serve-search``,
on 127.0.0.1 and a free port) that it queries once with a Gemini client. Bounded: at most
:data:`DEMO_SECONDS` of crawling, :data:`DEMO_HOST_URLS` URLs per capsule (the link maze
would take the default 500), and the search capsule up for ``--serve-seconds`` (default
0: just the one query; at most :data:`MAX_DEMO_SECONDS`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import trio

from capsule_server.files import bundled_capsules, load_capsules
from capsule_server.testing import running_server
from geminibot.cliutil import bounded_number, say
from geminibot.crawl.build import Network, build_crawler
from geminibot.crawl.clock import TrioWallClock
from geminibot.crawl.progress import Progress
from geminibot.crawl.settings import CrawlOptions
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.server import GeminiServer, ServerLimits
from geminibot.index import search
from geminibot.index.stats import format_stats, stats
from geminibot.net.connect import ConnectRule, Resolver
from geminibot.searchcap import SearchCapsule
from geminibot.store.database import open_database
from geminibot.store.traps import FrontierLimits

#: Longest the demo crawls (seconds of wall-clock time). Most capsules are done in a few
#: seconds; robots-44.test answers robots.txt with ``44 60`` and is still being waited
#: out when the demo stops (a real crawl would come back to it).
DEMO_SECONDS = 12.0
#: The most ``--seconds`` accepts: the demo is a demonstration, not a crawl.
MAX_DEMO_SECONDS = 600.0
#: The demo server's rate limit per client (requests/s, burst): above the crawl's pace on
#: most capsules, so a few 44s show up without slowing the demo down.
DEMO_RATE = (50.0, 100)
#: URLs taken from one capsule (the maze never ends).
DEMO_HOST_URLS = 40
QUERIES = ("virtual agent", "honeypot", "maze", "robots.txt redirect")
#: What the demo asks its search capsule.
CAPSULE_QUERY = "/search?robots"
#: Result lines of the search capsule's answer shown.
CAPSULE_LINES = 8


async def crawl_capsules(directory: Path, db: Path, certs: Path, seconds: float) -> Progress:
    hosts = sorted(load_capsules(directory))
    limits = ServerLimits(rate_per_second=DEMO_RATE[0], rate_burst=DEMO_RATE[1])
    async with running_server(directory, certs, limits) as server:
        assert server.port is not None
        resolver = Resolver(
            [ConnectRule("*.test", 1965, "127.0.0.1", server.port)], loopback_only=True
        )
        options = CrawlOptions(
            role="indexer",
            test_range=True,
            allow_hosts=("*.test",),
            limits=FrontierLimits(max_urls_per_host=DEMO_HOST_URLS),
        )
        clock = TrioWallClock()
        with (
            open_database(str(db), write=True) as database,
            database.crawl_store(clock.now, options.limits) as store,
        ):
            crawler = build_crawler(store, options, clock, network=Network(resolver))
            crawler.seed([f"gemini://{host}/" for host in hosts])
            print(f"Crawling {len(hosts)} capsules served on 127.0.0.1:{server.port} ...")
            with trio.move_on_after(seconds):
                return await crawler.run()
            crawler.stop()
            return crawler.progress


async def serve_search(db: Path, certs: Path, seconds: float) -> None:
    """Serve the index over Gemini as ``localhost``, ask it once, and keep serving for
    ``seconds`` (0: stop after the one query)."""
    capsule = SearchCapsule.of(str(db))
    server = GeminiServer({"localhost": capsule}, certs)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    base = f"gemini://localhost:{port}"
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve, listeners)
        client = GeminiClient(connect_to=lambda _host, _port: ("127.0.0.1", port))
        response = await client.fetch(base + CAPSULE_QUERY)
        print(f"\n== the index as a Gemini search capsule: {base}/")
        print(f"{base}{CAPSULE_QUERY}  ->  {response.status} {response.meta}")
        lines = [line for line in response.text().splitlines() if line.strip()]
        for line in lines[:CAPSULE_LINES]:  # as a Gemini client shows text: wrapped
            say(sys.stdout, line, "  ", "    ")
        if seconds > 0:
            print(
                f"Serving for {seconds:g} s; try a Gemini client on {base}/search?maze",
                flush=True,
            )
            await trio.sleep(seconds)
        server.shutdown()
    capsule.close()


#: ``--seconds``: a number above 0 and at most :data:`MAX_DEMO_SECONDS`.
demo_seconds = bounded_number(float, 0, MAX_DEMO_SECONDS, above=True)
#: ``--serve-seconds``: 0 or more, at most :data:`MAX_DEMO_SECONDS`.
serve_seconds = bounded_number(float, 0, MAX_DEMO_SECONDS)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m capsule_server.demo",
        description="Serve the bundled capsules on loopback, crawl them as an indexer, "
        "and show stats and searches.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--seconds",
        type=demo_seconds,
        default=DEMO_SECONDS,
        help="longest the crawl may run (wall-clock seconds)",
    )
    parser.add_argument(
        "--serve-seconds",
        type=serve_seconds,
        default=0.0,
        help="keep the search capsule up this long after its first query, to try it",
    )
    args = parser.parse_args(argv)
    seconds: float = args.seconds
    directory = bundled_capsules()
    if directory is None:
        raise SystemExit("demo: the bundled capsules are missing from this installation")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "demo.db"
        started = time.monotonic()
        progress = trio.run(crawl_capsules, directory, db, Path(tmp) / "certs", seconds)
        elapsed = time.monotonic() - started
        print(f"{progress.pages} pages, {progress.requests} requests in {elapsed:.1f} s")
        print(
            f"{progress.refused} URLs refused by policy, {progress.slow_downs} 44 SLOW DOWN obeyed"
        )
        for host, reason in sorted(progress.hosts_skipped.items()):
            say(sys.stdout, f"skipped for now: {host}: {reason}", "  ", "    ")
        if progress.queued:
            say(
                sys.stdout,
                f"stopped after {seconds:g} s with {progress.queued} URLs queued (hosts still "
                "waiting out a 44); a real crawl resumes them next run",
                "  ",
                "  ",
            )
        with open_database(str(db)) as database:
            print("\n== geminibot stats\n" + format_stats(stats(database)))
            for query in QUERIES:
                print(f"\n== geminibot search {query!r}")
                for n, r in enumerate(search(database.connection, query, 3), 1):
                    print(r.as_text(n))
        trio.run(serve_search, db, Path(tmp) / "certs", args.serve_seconds)
    print("\nTry it yourself: .venv/bin/geminibot crawl --help (docs/crawl.md), then")
    print("  .venv/bin/geminibot serve-search --db PATH --port 1965")
    print("  (docs/search_capsule.md)")


if __name__ == "__main__":
    main()
