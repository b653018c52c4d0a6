"""``geminibot serve-search``: serve a crawl database's index as a Gemini search capsule.

The server is the one ``capsule-server`` runs (:mod:`geminibot.gemini.server`: TLS with a
certificate per ``--hostname``, made on first start and kept in ``--certs``, the request
line's limits, per-address rate limits, a JSON Lines access log); the capsule is
:class:`geminibot.searchcap.SearchCapsule`.
"""

from __future__ import annotations

import argparse
from contextlib import closing
from pathlib import Path
from typing import Any

from geminibot import defaults
from geminibot.gemini.servecmd import (
    HelpWithDefaults,
    add_listen_options,
    add_serve_options,
    cert_folder,
    host_name,
    serve,
)
from geminibot.gemini.server import GeminiServer
from geminibot.gemini.urls import DEFAULT_PORT
from geminibot.searchcap.app import SearchCapsule
from geminibot.searchcap.submit import Submissions
from geminibot.store.database import open_database
from geminibot.why.reads import CheckReads

#: The host name served (and named in its certificate) unless ``--hostname`` says.
DEFAULT_HOSTNAME = defaults.SEARCH_HOSTNAME
#: Certificates are kept here, relative to the working directory, unless ``--certs`` says.
DEFAULT_CERT_DIR = Path(defaults.SEARCH_CERTS)


def register(commands: Any) -> None:
    serve = commands.add_parser(
        "serve-search",
        help="serve a crawl's index as a Gemini search capsule",
        description=(
            "Serve the index in --db over Gemini: /search (with paging), /backlinks, "
            "/hosts, /stats and /about (how the crawler behaves and how to keep it out); "
            "what is new: /feeds, /new (a gemsub page), /newest, /random; /submit (a URL "
            "to fetch soon, a few per client an hour). "
            "The database may be crawled into while it is served."
        ),
        formatter_class=HelpWithDefaults,
    )
    serve.add_argument(
        "--db",
        required=True,
        metavar="PATH|URL",
        help="crawl database: an SQLite file, or postgresql://USER@HOST/DB",
    )
    add_listen_options(serve)
    serve.add_argument(
        "--hostname",
        action="append",
        metavar="NAME",
        help="host name served, with its own certificate; repeat for more "
        f"(default: {DEFAULT_HOSTNAME})",
    )
    add_serve_options(serve, DEFAULT_CERT_DIR)
    serve.set_defaults(run=run_serve_search)


def capsule_url(hostname: str, port: int, path: str = "/") -> str:
    return f"gemini://{hostname}{'' if port == DEFAULT_PORT else f':{port}'}{path}"


def run_serve_search(args: argparse.Namespace) -> int:
    names = [host_name(n) for n in args.hostname or [DEFAULT_HOSTNAME]]
    cert_dir = cert_folder(args.certs)
    with open_database(args.db):  # the database is there and current (else one line, exit)
        pass
    checks = CheckReads.of(args.db)
    capsule = SearchCapsule.of(args.db, checks=checks, submissions=Submissions(args.db, checks))
    with closing(capsule):
        return _serve(args, names, cert_dir, capsule)


def _serve(
    args: argparse.Namespace, names: list[str], cert_dir: Path, capsule: SearchCapsule
) -> int:
    def ready(port: int) -> str:
        return (
            f"serve-search: {capsule_url(names[0], port)}  "
            f"(a query: {capsule_url(names[0], port, '/search?gemini')})"
        )

    return serve(
        args,
        cert_dir,
        lambda limits, log: GeminiServer(dict.fromkeys(names, capsule), cert_dir, limits, log),
        "serve-search",
        ready,
    )
