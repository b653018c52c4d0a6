"""``geminibot census``: the researcher's report on a crawl store (text, ``--json``,
``--gemtext``), one capsule's (``--host``), and the censuses kept over time
(``--keep``, ``--history``)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from geminibot.census.figures import take_census
from geminibot.census.history import agent_of, keep, kept_censuses
from geminibot.census.host import host_census
from geminibot.census.model import Census
from geminibot.census.render import as_gemtext, as_json, as_text, history_text
from geminibot.cliutil import EXIT_OK, CommandError
from geminibot.store.database import open_database


def register(commands: Any) -> None:
    census = commands.add_parser(
        "census",
        help="figures of Geminispace as a crawl saw it",
        description="Figures of Geminispace as a crawl store saw it: URIs, capsules, sizes, "
        "MIME types, languages, charsets, status codes, in-links from other capsules, TLS "
        "versions and ciphers, certificates, and how capsules use robots.txt, the virtual "
        "agents, robots2.txt, agents.txt and security.txt, and how a capsule's policy "
        "differs from its host's web policy (when the crawl reached both). Each figure says "
        "what it counts and over which window. Crawl with 'geminibot crawl --as researcher' "
        "to gather them without keeping page text (a researcher's crawl alone reads "
        "security.txt). Reads the store; writes only with --keep.",
    )
    census.add_argument(
        "--db", required=True, metavar="PATH|URL", help="crawl database (file or postgresql://)"
    )
    out = census.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object")
    out.add_argument("--gemtext", action="store_true", help="gemtext (tables preformatted)")
    out.add_argument(
        "--html",
        metavar="DIR",
        type=Path,
        help="an HTML report into DIR (made if missing): index.html, and charts/*.svg "
        "drawing each distribution and each figure over the censuses kept; no script, "
        "readable offline",
    )
    census.add_argument(
        "--host",
        metavar="HOST",
        help="one capsule's own figures (its owner's view): errors by kind, gone pages, "
        "redirects, its robots.txt as fetched, its certificate and its changes",
    )
    census.add_argument(
        "--keep",
        action="store_true",
        help="also keep this census in the store, dated, for --history and for "
        "'changed since the last census'",
    )
    census.add_argument(
        "--history",
        action="store_true",
        help="each figure over the censuses kept (with --json: every census kept)",
    )
    census.add_argument(
        "--agent",
        metavar="TOKEN",
        help="the product token whose refusals are counted (default: the crawl's agent)",
    )
    census.set_defaults(run=run_census)


def _check_options(args: argparse.Namespace) -> None:
    """Refuse the options that do not go together."""
    if args.history and args.html:
        raise CommandError("census: --html draws the history already (no --history)")
    if args.history and (args.host or args.keep):
        raise CommandError("census: --history goes without --host and --keep")
    if args.keep and args.host:
        raise CommandError("census: --keep keeps whole-crawl censuses only (not with --host)")


def run_census(args: argparse.Namespace) -> int:
    _check_options(args)
    with open_database(args.db) as conn:
        if args.history:
            censuses = kept_censuses(conn)
            if args.json:
                print(json.dumps([c.as_json() for c in censuses], sort_keys=True))
            else:
                print(history_text(censuses))
            return EXIT_OK
        now = time.time()
        if args.host:
            census = host_census(conn, args.host, now)
        else:
            previous = kept_censuses(conn, 1)
            census = take_census(
                conn,
                now,
                agent=agent_of(conn, args.agent),
                previous=previous[-1] if previous else None,
            )
            if args.keep:
                keep(conn, census)
        if args.html:
            return _write_html(census, [] if args.host else kept_censuses(conn), args.html)
    if args.json:
        print(as_json(census))
    elif args.gemtext:
        print(as_gemtext(census), end="")
    else:
        print(as_text(census))
    return EXIT_OK


def _write_html(census: Census, history: list[Census], folder: Path) -> int:
    from geminibot.census.html import build_report, write_report  # (draws with matplotlib)

    if folder.exists() and not folder.is_dir():
        raise CommandError(f"census: {folder}: not a directory")
    report = build_report(census, history)
    try:
        written = write_report(report, folder)
    except OSError as exc:
        raise CommandError(f"census: {folder}: cannot write: {exc.strerror}") from None
    print(f"census: wrote {written[0]} and {len(written) - 1} charts in {folder / 'charts'}")
    return EXIT_OK
