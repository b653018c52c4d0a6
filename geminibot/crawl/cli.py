"""``geminibot crawl``, ``geminibot search`` and ``geminibot stats``."""

from __future__ import annotations

import argparse
import fcntl
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, TextIO

import trio

from geminibot.cliutil import EXIT_NEGATIVE, EXIT_OK, CommandError, emit_json
from geminibot.crawl.crawler import (
    DEFAULT_AGENT,
    DEFAULT_CONCURRENCY,
    ROLES,
    ConfigMismatch,
    Crawler,
    CrawlOptions,
    Progress,
)
from geminibot.crawl.databases import display as without_password
from geminibot.crawl.databases import is_postgres, open_pg_store, reading
from geminibot.crawl.fetcher import CRAWL_LIMITS, ProtocolFetcher, gemini_fetch
from geminibot.crawl.frontier import DEFAULT_MAX_DEPTH, MAX_URLS_PER_HOST, Limits
from geminibot.crawl.schemes import normalise, parse_any
from geminibot.crawl.warc import WarcArchive
from geminibot.gemini.client import GeminiClient
from geminibot.http.client import DEFAULT_INFO_URL, WebClient, user_agent
from geminibot.index import DatabaseError, QueryError, connect, stats
from geminibot.index.stats import format_stats
from geminibot.net.connect import ConnectToError, Resolver, is_loopback, parse_connect_to
from geminibot.policy.cli import agent_option
from geminibot.urls import SCHEMES

#: Seconds between two progress log lines when standard error is not a terminal.
LOG_INTERVAL = 5.0
#: Exit code of a crawl stopped by Ctrl-C (resumable).
EXIT_INTERRUPTED = 130


def register(commands: Any) -> None:
    crawl = commands.add_parser(
        "crawl",
        help="crawl Gemini capsules (and websites) politely into a searchable SQLite index",
        description=(
            "Crawl from the SEED URLs as the declared virtual agent, obeying robots.txt, "
            "robots2.txt and agents.txt, one request at a time per host. State lives in --db: "
            "run the same command again after a stop or a crash to resume."
        ),
    )
    crawl.add_argument(
        "seeds", nargs="+", metavar="SEED", help="gemini:// or http(s):// URLs to start from"
    )
    crawl.add_argument(
        "--follow",
        action="append",
        choices=SCHEMES,
        default=[],
        help="also follow links to this protocol (the seeds' protocols are always followed): "
        "--follow http lets a Gemini crawl reach the web, --follow gemini the reverse",
    )
    crawl.add_argument(
        "--contact",
        default=DEFAULT_INFO_URL,
        metavar="URL",
        help="where web site owners read about this bot (in the User-Agent)",
    )
    crawl.add_argument(
        "--db",
        required=True,
        metavar="PATH|URL",
        help="crawl database: an SQLite file, or postgresql://USER@HOST/DB (shared by "
        "several crawl processes)",
    )
    crawl.add_argument(
        "--max-hosts",
        type=int,
        metavar="N",
        help="work on at most N hosts at once (default: every host with work); with "
        "several processes on one postgresql:// --db, leaves hosts for the others",
    )
    crawl.add_argument(
        "--lease-seconds",
        type=float,
        metavar="S",
        help="PostgreSQL: how long a host stays leased to this process unless renewed "
        "(default 90; a killed process's hosts go on elsewhere after it)",
    )
    crawl.add_argument(
        "--as", dest="role", choices=ROLES, default="indexer", help="virtual agent (activity)"
    )
    crawl.add_argument(
        "--agent", default=DEFAULT_AGENT, metavar="TOKEN", help="product token (geminibot)"
    )
    crawl.add_argument("--strict", action="store_true", help="strict virtual-agent mode")
    crawl.add_argument("--max-pages", type=int, metavar="N", help="stop after N pages in the db")
    crawl.add_argument(
        "--max-depth", type=int, default=DEFAULT_MAX_DEPTH, metavar="N", help="link depth bound"
    )
    crawl.add_argument(
        "--max-host-urls",
        type=int,
        default=MAX_URLS_PER_HOST,
        metavar="N",
        help=f"URLs taken from one host (trap bound, default {MAX_URLS_PER_HOST})",
    )
    crawl.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="PATTERN",
        help="hosts to crawl (shell pattern, repeatable); default: the seeds' hosts only",
    )
    crawl.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"requests in flight across hosts (default {DEFAULT_CONCURRENCY})",
    )
    crawl.add_argument(
        "--test-range",
        action="store_true",
        help="for local test capsules only (refused for hosts not on loopback): no default "
        "delay between requests when no policy sets one",
    )
    crawl.add_argument(
        "--connect-to",
        action="append",
        default=[],
        metavar="HOST:PORT:ADDR:PORT2",
        help="connect to ADDR:PORT2 for HOST:PORT; HOST may be a shell pattern (*.test); "
        "SNI stays the host name; repeatable",
    )
    crawl.add_argument(
        "--warc-dir", metavar="DIR", help="--as archiver: WARC folder (default: DB.warc/)"
    )
    crawl.add_argument("--json", action="store_true", help="summary as one JSON object")
    crawl.set_defaults(run=run_crawl)

    find = commands.add_parser("search", help="search a crawl's index")
    find.add_argument("query", metavar="QUERY", help='words, "a phrase", prefix*, -excluded, OR')
    find.add_argument(
        "--db", required=True, metavar="PATH|URL", help="crawl database (file or postgresql://)"
    )
    find.add_argument("--limit", type=int, default=10, metavar="N", help="results (default 10)")
    find.add_argument("--json", action="store_true", help="one JSON object per result")
    find.set_defaults(run=run_search)

    numbers = commands.add_parser("stats", help="what a crawl database holds")
    numbers.add_argument(
        "--db", required=True, metavar="PATH|URL", help="crawl database (file or postgresql://)"
    )
    numbers.add_argument("--json", action="store_true", help="one JSON object")
    numbers.set_defaults(run=run_stats)


# --- crawl ---


@contextmanager
def _exclusive(db: Path) -> Iterator[None]:
    """One crawl per database at a time (the lock goes with the process, even on kill -9)."""
    lock_path = db.with_name(db.name + ".lock")
    try:
        lock = lock_path.open("w")
    except OSError as exc:
        raise CommandError(f"{db}: cannot create the database there: {exc.strerror}") from None
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CommandError(f"{db}: another crawl is using this database") from None
        yield


def _options(args: argparse.Namespace) -> tuple[list[str], CrawlOptions, Resolver]:
    seeds = []
    for seed in args.seeds:
        try:
            seeds.append(normalise(seed))
        except ValueError as exc:
            raise CommandError(f"seed {seed!r}: {exc}") from None
    for name, value in (
        ("--max-pages", args.max_pages),
        ("--concurrency", args.concurrency),
        ("--max-host-urls", args.max_host_urls),
        ("--max-hosts", args.max_hosts),
    ):
        if value is not None and value < 1:
            raise CommandError(f"{name} must be at least 1")
    if args.max_depth < 0:
        raise CommandError("--max-depth must be 0 or more")
    try:
        rules = [parse_connect_to(r) for r in args.connect_to]
    except ConnectToError as exc:
        raise CommandError(str(exc)) from None
    resolver = Resolver(rules, loopback_only=args.test_range)
    if args.test_range:
        for seed in seeds:
            url = parse_any(seed)
            address, _ = resolver.address(url.host, url.port)
            if not is_loopback(address):
                raise CommandError(
                    f"--test-range is for local test capsules only: {url.host} is not on this "
                    "machine (use --connect-to to point test host names at 127.0.0.1)"
                )
    options = CrawlOptions(
        role=args.role,
        agent=agent_option(args.agent),
        strict=args.strict,
        max_pages=args.max_pages,
        limits=Limits(max_depth=args.max_depth, max_urls_per_host=args.max_host_urls),
        allow_hosts=tuple(args.allow_host),
        concurrency=args.concurrency,
        test_range=args.test_range,
        max_hosts=args.max_hosts,
        follow=tuple(args.follow),
    )
    return seeds, options, resolver


class Display:
    """A live status line on a terminal; a log line every LOG_INTERVAL otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self._last_log = time.monotonic()

    @staticmethod
    def line(p: Progress) -> str:
        return (
            f"pages {p.pages}  requests {p.requests}  hosts {p.hosts_active}/{p.hosts_seen}  "
            f"queue {p.queued}  refused {p.refused}  errors {p.errors}  "
            f"44s {p.slow_downs}  {p.rate:.1f} pages/s"
        )

    def __call__(self, p: Progress) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K" + self.line(p))
            self.stream.flush()
        elif time.monotonic() - self._last_log >= LOG_INTERVAL:
            self._last_log = time.monotonic()
            print(f"crawl: {self.line(p)}", file=self.stream, flush=True)

    def end(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


async def _crawl(crawler: Crawler, web: WebClient) -> tuple[Progress, bool]:
    interrupted = False

    async def on_signal() -> None:
        nonlocal interrupted
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                interrupted = True
                crawler.stop()
                return

    async with web, trio.open_nursery() as nursery:
        nursery.start_soon(on_signal)
        progress = await crawler.run()
        nursery.cancel_scope.cancel()
    return progress, interrupted


def run_crawl(args: argparse.Namespace) -> int:
    seeds, options, resolver = _options(args)
    shared = is_postgres(args.db)
    if args.lease_seconds is not None and (not shared or args.lease_seconds <= 0):
        raise CommandError("--lease-seconds is for a postgresql:// --db, more than 0")
    if shared and options.role == "archiver" and not args.warc_dir:
        raise CommandError("--as archiver with a postgresql:// --db needs --warc-dir")
    db = Path(args.db)
    with nullcontext() if shared else _exclusive(db):
        if shared:
            conn = open_pg_store(args.db, options.limits, args.lease_seconds)
        else:
            try:
                conn = connect(db)
            except DatabaseError as exc:
                raise CommandError(str(exc)) from None
        display = Display(sys.stderr)
        web = WebClient(
            user_agent=user_agent(options.agent, info_url=args.contact),
            connect_to=resolver,
            limits=CRAWL_LIMITS,
        )
        gemini = GeminiClient(connect_to=resolver, limits=CRAWL_LIMITS)
        fetch = ProtocolFetcher(gemini=gemini_fetch(gemini), web=web)
        crawler = Crawler(conn, fetch, options)
        try:
            crawler.check_settings()
        except ConfigMismatch as exc:
            raise CommandError(f"{without_password(args.db) if shared else db}: {exc}") from None
        archive = None
        if options.role == "archiver":
            warc_dir = Path(args.warc_dir) if args.warc_dir else db.with_name(db.name + ".warc")
            archive = WarcArchive(warc_dir, crawler.lease, time.time())
            crawler.archive = archive
        crawler.on_progress = display
        try:
            crawler.seed(seeds)
            progress, interrupted = trio.run(_crawl, crawler, web)
        finally:
            display.end()
            if archive is not None:
                archive.close()
        _summary(
            args, without_password(args.db) if shared else str(db), progress, interrupted, archive
        )
        conn.close()
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


def _summary(
    args: argparse.Namespace,
    db: str,
    p: Progress,
    interrupted: bool,
    archive: WarcArchive | None,
) -> None:
    data = {
        "db": str(db),
        "pages": p.pages,
        "requests": p.requests,
        "refused": p.refused,
        "errors": p.errors,
        "slow_downs": p.slow_downs,
        "queued": p.queued,
        "hosts": p.hosts_seen,
        "hosts_skipped": p.hosts_skipped,
        "seconds": round(p.elapsed, 3),
        "pages_per_second": round(p.rate, 2),
        "interrupted": interrupted,
        "warc": str(archive.path) if archive is not None else None,
    }
    if args.json:
        emit_json(data)
        return
    out = sys.stdout
    print(
        f"crawled {p.pages} pages ({p.requests} requests) in {p.elapsed:.1f} s, "
        f"{p.rate:.1f} pages/s; {p.refused} refused by policy, {p.errors} errors, "
        f"{p.slow_downs} slow-downs obeyed",
        file=out,
    )
    for host, reason in sorted(p.hosts_skipped.items()):
        print(f"skipped for now: {host}: {reason}", file=out)
    if archive is not None:
        print(f"WARC: {archive.path} ({archive.records} records)", file=out)
    if interrupted:
        print(f"stopped: {p.queued} URLs queued; run the same command to resume", file=out)
    elif p.queued:
        print(f"{p.queued} URLs left in the queue (skipped hosts or --max-pages)", file=out)
    print(f"index: {db}  (geminibot search QUERY --db {db})", file=out)


# --- search and stats ---


def run_search(args: argparse.Namespace) -> int:
    with reading(args.db) as (conn, search):
        try:
            results = search(conn, args.query, args.limit)
        except QueryError as exc:
            raise CommandError(f"search: {exc}") from None
    for n, r in enumerate(results, 1):
        if args.json:
            emit_json(r.as_json())
        else:
            print(f"{n}. {r.title or r.url}\n   {r.url}\n   {r.snippet}")
    if not results and not args.json:
        print("no results", file=sys.stderr)
    return EXIT_OK if results else EXIT_NEGATIVE


def run_stats(args: argparse.Namespace) -> int:
    with reading(args.db) as (conn, _):
        data = stats(conn)
    if args.json:
        emit_json(data)
    else:
        print(format_stats(data))
    return EXIT_OK
