"""``geminibot crawl`` (``search`` is :mod:`geminibot.index.search_cli`, ``stats``
:mod:`geminibot.index.stats_cli`).

The crawler and its network clients (trio, httpx) are imported when a crawl runs, not
when this module is: every ``--help`` starts without them.
"""

from __future__ import annotations

import argparse
import errno
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from geminibot import defaults
from geminibot.cliutil import (
    EXIT_OK,
    CommandError,
    bounded_number,
    counted,
    emit_json,
    human_duration,
    parse_duration,
    positive_float,
    positive_int,
    terminal_safe,
)
from geminibot.crawl.politeness import START_DELAY
from geminibot.crawl.settings import (
    DEFAULT_AGENT,
    DEFAULT_CONCURRENCY,
    ROLES,
    ConfigMismatch,
    CrawlOptions,
    check_settings,
    new_lease,
)
from geminibot.http.urls import DEFAULT_INFO_URL
from geminibot.net.connect import Resolver, add_connect_to_option, connect_rules, is_loopback
from geminibot.net.guard import IPNetwork, parse_network
from geminibot.policy.cli import agent_option
from geminibot.store.database import Database, open_database
from geminibot.store.traps import DEFAULT_MAX_DEPTH, MAX_URLS_PER_HOST, FrontierLimits
from geminibot.urls import SCHEMES, normalise, parse_url

_T = TypeVar("_T")

if TYPE_CHECKING:
    from geminibot.crawl.clock import TrioWallClock
    from geminibot.crawl.continuous import Stopper
    from geminibot.crawl.crawler import Crawler
    from geminibot.crawl.progress import Progress
    from geminibot.crawl.warc import WarcArchive
    from geminibot.store.crawlstore import CrawlStore

#: Exit code of a crawl stopped by Ctrl-C (resumable).
EXIT_INTERRUPTED = 130
#: Exit code of a crawl that fetched nothing and met errors, that made no request while
#: URLs were queued (every host with work skipped for now), or could not write its
#: database (disk full) or its WARC files: what was committed is kept, run it again.
EXIT_FAILED = 1
#: Longest --max-time and --min-delay accepted (a week), in seconds.
MAX_DURATION = 7 * 86400.0


def _duration_option(name: str, *, zero: bool) -> Any:
    def parse(text: str) -> float:
        try:
            seconds = parse_duration(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if seconds > MAX_DURATION or (seconds <= 0 and not zero):
            low = "0" if zero else "more than 0"
            raise argparse.ArgumentTypeError(
                f"{text!r}: expected {low} to {human_duration(MAX_DURATION)}"
            )
        return seconds

    parse.__name__ = name
    return parse


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
        help=f"where web site owners read about this bot (in the User-Agent; default "
        f"{DEFAULT_INFO_URL})",
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
        type=positive_int,
        metavar="N",
        help="work on at most N hosts at once (default: every host with work); with "
        "several processes on one postgresql:// --db, leaves hosts for the others",
    )
    crawl.add_argument(
        "--lease-seconds",
        type=positive_float,
        metavar="S",
        help="PostgreSQL: how long a host stays leased to this process unless renewed "
        "(default 90; a killed process's hosts go on elsewhere after it)",
    )
    crawl.add_argument(
        "--as",
        dest="role",
        choices=ROLES,
        default=defaults.CRAWL_ROLE,
        help="the Gemini virtual agent the crawler acts as, as in 'policy check --as': "
        "indexer, archiver or researcher (default indexer); a researcher also reads "
        "each capsule's /.well-known/security.txt (RFC 9116) when its policy allows",
    )
    crawl.add_argument(
        "--agent",
        default=DEFAULT_AGENT,
        metavar="TOKEN",
        help=f"product token (default {DEFAULT_AGENT})",
    )
    crawl.add_argument("--strict", action="store_true", help="strict virtual-agent mode")
    crawl.add_argument(
        "--trust-ca",
        action="append",
        default=[],
        type=Path,
        metavar="PEM",
        help="also count certificates issued by the CAs in this PEM file as CA-issued in "
        "the TLS facts the crawl keeps for 'geminibot census' (beside the system's CA "
        "bundle; repeatable). Certificates are still pinned on first use, never refused "
        "for their issuer",
    )
    crawl.add_argument(
        "--max-pages",
        type=positive_int,
        metavar="N",
        help="stop once the db holds N pages (default: no limit); run again to go on",
    )
    crawl.add_argument(
        "--max-time",
        type=_duration_option("duration", zero=False),
        metavar="DURATION",
        help="stop after this long (90, 90s, 5m, 1h30m, 2d; default: no limit); run again to go on",
    )
    crawl.add_argument(
        "--min-delay",
        type=_duration_option("duration", zero=True),
        default=defaults.CRAWL_MIN_DELAY,
        metavar="SECONDS",
        help="wait at least this long between two requests to one host or address, "
        "whatever a policy says or the address's pace (default 0; the pace starts at "
        f"one request per {START_DELAY:.0f} s and adapts to the server's answers)",
    )
    crawl.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="never fetch URLs matching this shell pattern, e.g. '*/private/*' or "
        "'gemini://host/logs/*' (repeatable)",
    )
    crawl.add_argument(
        "--max-depth",
        type=bounded_number(int, 0),
        default=DEFAULT_MAX_DEPTH,
        metavar="N",
        help=f"link depth bound (default {DEFAULT_MAX_DEPTH})",
    )
    crawl.add_argument(
        "--max-host-urls",
        type=positive_int,
        default=MAX_URLS_PER_HOST,
        metavar="N",
        help=f"URLs taken from one host (trap bound, default {MAX_URLS_PER_HOST})",
    )
    crawl.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="PATTERN",
        help="more hosts to crawl (shell pattern, repeatable); the seeds' hosts always are "
        "(default: the seeds' hosts only)",
    )
    crawl.add_argument(
        "--concurrency",
        type=positive_int,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"most requests in flight across hosts: the crawl's workers, one request "
        f"each (default {DEFAULT_CONCURRENCY})",
    )
    crawl.add_argument(
        "--test-range",
        action="store_true",
        help="for local test capsules only (refused for hosts not on loopback): an "
        "address's pace starts unbounded, with no ceiling (a policy's delay and a 44 "
        "still hold)",
    )
    crawl.add_argument(
        "--allow-address",
        action="append",
        default=[],
        type=_network,
        metavar="CIDR",
        help="also reach this network although it is not public (10.1.2.0/24, fd00::/8, "
        "127.0.0.2; repeatable); by default loopback, private, link-local and other "
        "non-public addresses are never contacted (not with --test-range: loopback only)",
    )
    add_connect_to_option(crawl)
    crawl.add_argument(
        "--warc-dir", metavar="DIR", help="--as archiver: WARC folder (default: DB.warc/)"
    )
    crawl.add_argument(
        "--refresh",
        action="store_true",
        help="revisit every page of the database now, due or not (default: only those "
        "whose revisit interval has passed)",
    )
    crawl.add_argument(
        "--forever",
        action="store_true",
        help="keep going: when the queue is empty, sleep until the next URL is due (a "
        "revisit, a retry, a host's back-off or policy files' expiry) and crawl again, "
        "until SIGTERM or Ctrl-C (then exit 0); --max-pages and --max-time apply per run",
    )
    crawl.add_argument("--json", action="store_true", help="summary as one JSON object (per run)")
    crawl.epilog = (
        "Exit status: 0 the crawl ran (or stopped at --max-pages / --max-time, or --forever "
        "was stopped); 1 it fetched nothing and met errors (hosts unreachable), or its "
        "database's disk is full; 2 a usage error or an unusable --db / --warc-dir; 130 "
        "stopped by Ctrl-C. Every stop is "
        "resumable: run the same command again. Certificates are pinned in the database on "
        "first use (per host and port); a changed certificate is refused."
    )
    crawl.set_defaults(run=run_crawl)


# --- crawl ---


def _network(text: str) -> IPNetwork:
    """``--allow-address``'s argument (see :func:`geminibot.net.guard.parse_network`)."""
    try:
        return parse_network(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _options(args: argparse.Namespace) -> tuple[list[str], CrawlOptions, Resolver]:

    seeds = []
    for seed in args.seeds:
        try:
            seeds.append(normalise(seed))
        except ValueError as exc:
            raise CommandError(f"seed {seed!r}: {exc}") from None
    resolver = Resolver(connect_rules(args.connect_to), loopback_only=args.test_range)
    if args.test_range and args.allow_address:
        raise CommandError("--allow-address is for crawls without --test-range (loopback only)")
    if args.test_range:
        for seed in seeds:
            url = parse_url(seed)
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
        limits=FrontierLimits(max_depth=args.max_depth, max_urls_per_host=args.max_host_urls),
        allow_hosts=tuple(args.allow_host),
        exclude=tuple(args.exclude),
        max_time=args.max_time,
        min_delay=args.min_delay,
        concurrency=args.concurrency,
        test_range=args.test_range,
        max_hosts=args.max_hosts,
        follow=tuple(args.follow),
        refresh=args.refresh,
        trust_ca=_trusted_cas(args.trust_ca),
    )
    return seeds, options, resolver


def _trusted_cas(paths: list[Path]) -> tuple[Path, ...]:
    """``--trust-ca`` files, each checked to hold at least one PEM certificate."""
    from geminibot.gemini.certfacts import TrustStore

    for path in paths:
        try:
            TrustStore.load((path,), system=False)
        except OSError as exc:
            raise CommandError(f"--trust-ca {path}: cannot read it ({exc.strerror})") from None
        except ValueError:
            raise CommandError(f"--trust-ca {path}: not a PEM certificate file") from None
    return tuple(paths)


def _warc_archive(args: argparse.Namespace, db: Path, run_id: str) -> WarcArchive:
    from geminibot.crawl.warc import WarcArchive

    warc_dir = Path(args.warc_dir) if args.warc_dir else db.with_name(db.name + ".warc")
    if warc_dir.exists() and not warc_dir.is_dir():
        raise CommandError(f"--warc-dir {warc_dir}: is a file, expected a folder")
    try:
        return WarcArchive(warc_dir, run_id, time.time())
    except OSError as exc:
        raise CommandError(f"--warc-dir {warc_dir}: cannot write there: {exc.strerror}") from None


async def _crawl(crawler: Crawler, stopper: Stopper) -> tuple[Progress, bool]:
    stopper.running(crawler.stop)
    try:
        progress = await crawler.run()
    finally:
        stopper.running(None)
    return progress, stopper.stopped


def _environment_error(exc: BaseException) -> BaseException | None:
    """The database or file-system error that ended a crawl, if that is what did (trio
    wraps it in exception groups)."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _environment_error(inner)
            if found is not None:
                return found
        return None
    return exc if isinstance(exc, sqlite3.Error | OSError) else None


def _failure(db: str, exc: BaseException) -> CommandError:
    """One line for a crawl ended by its environment (see :data:`EXIT_FAILED`)."""
    full = isinstance(exc, sqlite3.Error) and "full" in str(exc)
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        full = True
    if full:
        what = "the disk is full"
    elif isinstance(exc, sqlite3.Error):
        what = f"the database could not be written ({exc})"
    else:
        assert isinstance(exc, OSError)
        where = f" {exc.filename}" if exc.filename else ""
        what = f"cannot write{where} ({exc.strerror or exc})"
    return CommandError(
        f"{db}: crawl stopped: {what}; every page committed is kept: make room and run the "
        "same command to resume",
        EXIT_FAILED,
    )


def run_crawl(args: argparse.Namespace) -> int:
    import trio

    return trio.run(crawl_async, args)


async def crawl_async(args: argparse.Namespace) -> int:
    """``geminibot crawl`` with parsed ``args``, inside a trio run (the tests run it on
    their own, next to in-process servers and under a mock clock); SIGTERM and SIGINT
    stop it."""
    import trio

    from geminibot.crawl.continuous import Stopper

    stopper = Stopper()
    failure: Exception | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stopper.watch_signals)
        try:
            code = await _crawl_stoppable(args, stopper)
        except Exception as exc:  # raised as itself, not in the nursery's exception group
            failure = exc
        nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return code


async def _crawl_stoppable(args: argparse.Namespace, stopper: Stopper) -> int:
    seeds, options, resolver = _options(args)
    with open_database(args.db, write=True, lease_seconds=args.lease_seconds) as database:
        if database.shared and options.role == "archiver" and not args.warc_dir:
            raise CommandError("--as archiver with a postgresql:// --db needs --warc-dir")
        try:
            if args.forever:
                code = await _run_forever(args, database, stopper)
            else:
                code = await _run(args, database, seeds, options, resolver, stopper)
            database.checkpoint()  # a clean end: no WAL left beside the database
            return code
        except (sqlite3.Error, OSError, BaseExceptionGroup) as exc:
            cause = _environment_error(exc)
            if cause is None:
                raise
            raise _failure(database.name, cause) from None


async def _run_forever(args: argparse.Namespace, database: Database, stopper: Stopper) -> int:
    """Crawl runs one after the other, each when work is due (:mod:`.continuous`), until
    ``stopper`` stops them: exit 0."""
    from geminibot.crawl.continuous import any_due, keep_going, next_due

    newest = 0  # the newest URL id the last run looked at: a newer one queued is new work

    def ran(progress: Progress) -> None:
        nonlocal newest
        newest = progress.newest_url

    async def run_once(wall_clock: Callable[[], float]) -> None:
        seeds, options, resolver = _options(args)
        await _run(args, database, seeds, options, resolver, stopper, wall_clock, ran)
        args.refresh = False  # --refresh: the first run only

    def reading(read: Callable[[Database, float], _T]) -> Callable[[float], _T]:
        def on_store(now: float) -> _T:
            if not database.shared:
                return read(database, now)
            with open_database(args.db) as fresh:  # (a connection idle for hours may be gone)
                return read(fresh, now)

        return on_store

    def on_sleep(seconds: float, when: float | None) -> None:
        what = "nothing due" if when is None else "the next URL is due"
        print(
            f"geminibot crawl: sleeping {human_duration(seconds)} ({what}); "
            "SIGTERM or Ctrl-C stops",
            file=sys.stderr,
            flush=True,
        )

    def watching(since: float) -> Callable[[float], bool]:
        mark = newest  # (a URL queued after the run's last look: a /submit)
        return reading(lambda db, now: any_due(db, now, mark))

    await keep_going(run_once, reading(next_due), stopper, on_sleep, watching)
    return EXIT_OK


async def _run(
    args: argparse.Namespace,
    database: Database,
    seeds: list[str],
    options: CrawlOptions,
    resolver: Resolver,
    stopper: Stopper,
    wall_clock: Callable[[], float] = time.time,
    ran: Callable[[Progress], None] | None = None,
) -> int:
    """One crawl run (``ran`` is told what it did, as it ends)."""
    from geminibot.crawl.clock import TrioWallClock

    clock = TrioWallClock(wall_clock)
    with database.crawl_store(clock.now, options.limits) as store:
        return await _run_on(
            args, database.name, store, seeds, options, resolver, stopper, clock, ran
        )


async def _run_on(
    args: argparse.Namespace,
    label: str,
    store: CrawlStore,
    seeds: list[str],
    options: CrawlOptions,
    resolver: Resolver,
    stopper: Stopper,
    clock: TrioWallClock,
    ran: Callable[[Progress], None] | None = None,
) -> int:
    """One crawl run on ``store`` (its database named ``label`` in messages; ``ran`` is
    told what it did, as it ends)."""
    from geminibot.crawl.build import Network, build_crawler
    from geminibot.crawl.display import Display
    from geminibot.crawl.runrecord import record_run
    from geminibot.store.recheck import DUE_POLL

    try:
        check_settings(store, options)
    except ConfigMismatch as exc:
        raise CommandError(f"{label}: {exc}") from None
    record_run(store, options, seeds)
    lease = new_lease()  # this process among those sharing the store; the WARC run's name
    archive = None
    if options.role == "archiver":
        archive = _warc_archive(args, Path(args.db), lease)
    elif args.warc_dir:
        raise CommandError("--warc-dir is for --as archiver only")
    display = Display(sys.stderr)
    network = Network(resolver, tuple(args.allow_address), args.contact)
    crawler = build_crawler(
        store,
        options,
        clock,
        network=network,
        archive=archive,
        on_progress=display,
        lease=lease,
        poll_due=DUE_POLL if args.forever else None,
    )
    try:
        crawler.seed(seeds)
        progress, interrupted = await _crawl(crawler, stopper)
        if ran is not None:
            ran(progress)
    finally:
        display.end()
        if archive is not None:
            archive.close()
    _summary(args, label, progress, interrupted, archive)
    if interrupted:
        return EXIT_INTERRUPTED
    if progress.pages == 0 and progress.errors and not progress.limit:
        # Nothing fetched, and why is an error: say so rather than succeed silently.
        print(
            f"geminibot crawl: nothing fetched: {counted(progress.errors, 'request')} failed "
            f"({terminal_safe(progress.last_error or 'see the skipped hosts above')})",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if progress.requests == 0 and progress.queued and not progress.limit:
        # URLs queued and not one request (every host with work skipped for now: its
        # policy files cached as unreachable, its next turn beyond the longest wait, ...).
        skipped = sorted(progress.hosts_skipped.items())
        why = f"{skipped[0][0]}: {skipped[0][1]}" if skipped else "no host may be asked now"
        print(
            f"geminibot crawl: nothing fetched: {counted(progress.queued, 'URL')} queued, no request "
            f"made ({terminal_safe(why)}); run again later",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def _summary(
    args: argparse.Namespace,
    db: str,
    p: Progress,
    interrupted: bool,
    archive: WarcArchive | None,
) -> None:
    from geminibot.crawl.progress import summary, summary_lines

    if args.json:
        emit_json(summary(p, db, interrupted, archive))
    else:
        print("\n".join(summary_lines(p, db, interrupted, archive)))
