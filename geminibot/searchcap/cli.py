"""``geminibot serve-search``: serve a crawl database's index as a Gemini search capsule.

The server is the one ``capsule-server`` runs (:mod:`geminibot.gemini.server`: TLS with a
certificate per ``--hostname``, made on first start and kept in ``--certs``, the request
line's limits, per-address rate limits, a JSON Lines access log); the capsule is
:class:`geminibot.searchcap.SearchCapsule`.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path
from typing import Any

from geminibot.cliutil import EXIT_OK, CommandError
from geminibot.gemini.accesslog import JsonLinesLog
from geminibot.gemini.servecmd import (
    DEFAULT_HOST,
    HelpWithDefaults,
    cert_folder,
    close_log,
    host_name,
    make_server,
    open_log,
    port_number,
    positive_float,
    positive_int,
    run_server,
)
from geminibot.gemini.server import RATE_BURST, RATE_PER_SECOND, GeminiServer, Limits
from geminibot.gemini.urls import DEFAULT_PORT
from geminibot.index import DatabaseError, connect
from geminibot.searchcap.app import SearchCapsule, prepare

#: The host name served (and named in its certificate) unless ``--hostname`` says.
DEFAULT_HOSTNAME = "localhost"
#: Certificates are kept here, relative to the working directory, unless ``--certs`` says.
DEFAULT_CERT_DIR = Path("var/serve-search/certs")


def register(commands: Any) -> None:
    serve = commands.add_parser(
        "serve-search",
        help="serve a crawl's index as a Gemini search capsule",
        description=(
            "Serve the index in --db over Gemini: /search (with paging), /backlinks, "
            "/hosts, /stats and /about (how the crawler behaves and how to keep it out). "
            "The database may be crawled into while it is served."
        ),
        formatter_class=HelpWithDefaults,
    )
    serve.add_argument("--db", required=True, metavar="PATH", help="crawl database (SQLite)")
    serve.add_argument(
        "--host",
        action="append",
        metavar="ADDRESS",
        help=f"address to listen on; repeat for more (default: {DEFAULT_HOST})",
    )
    serve.add_argument("--port", type=port_number, default=DEFAULT_PORT, help="port (0: any)")
    serve.add_argument(
        "--hostname",
        action="append",
        metavar="NAME",
        help="host name served, with its own certificate; repeat for more "
        f"(default: {DEFAULT_HOSTNAME})",
    )
    serve.add_argument(
        "--certs", metavar="DIR", default=str(DEFAULT_CERT_DIR), help="certificate folder"
    )
    serve.add_argument(
        "--log", metavar="FILE", help="append the JSON access log here (default: standard output)"
    )
    serve.add_argument(
        "--rate",
        type=positive_float,
        metavar="N",
        default=RATE_PER_SECOND,
        help="requests/s per client address",
    )
    serve.add_argument(
        "--rate-burst",
        type=positive_int,
        metavar="N",
        default=RATE_BURST,
        help="burst allowed per client address",
    )
    serve.set_defaults(run=run_serve_search)


def open_index(path: str) -> sqlite3.Connection:
    """The crawl database, with the backlinks index made if it can be (one line on
    standard error if the file is read-only: backlinks then scan the links table)."""
    try:
        conn = connect(path, create=False)
    except DatabaseError as exc:
        raise CommandError(str(exc)) from None
    try:
        prepare(conn)
    except sqlite3.Error as exc:
        print(
            f"serve-search: {path}: no backlinks index ({exc}); /backlinks is slower",
            file=sys.stderr,
        )
    return conn


def capsule_url(hostname: str, port: int, path: str = "/") -> str:
    return f"gemini://{hostname}{'' if port == DEFAULT_PORT else f':{port}'}{path}"


def run_serve_search(args: argparse.Namespace) -> int:
    names = [host_name(n) for n in args.hostname or [DEFAULT_HOSTNAME]]
    cert_dir = cert_folder(args.certs)
    conn = open_index(args.db)
    capsule = SearchCapsule(conn)
    limits = Limits(rate_burst=args.rate_burst, rate_per_second=args.rate)
    log_stream = open_log(args.log) if args.log else sys.stdout

    def ready(port: int) -> str:
        return (
            f"serve-search: {capsule_url(names[0], port)}  "
            f"(a query: {capsule_url(names[0], port, '/search?gemini')})"
        )

    try:
        server = make_server(
            cert_dir,
            lambda: GeminiServer(
                dict.fromkeys(names, capsule), cert_dir, limits, JsonLinesLog(log_stream)
            ),
        )
        hosts = args.host or [DEFAULT_HOST]
        run_server(server, hosts, args.port, "serve-search", args.log or "standard output", ready)
    finally:
        if args.log:
            close_log(log_stream)
        conn.close()
    return EXIT_OK
