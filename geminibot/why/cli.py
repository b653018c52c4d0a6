"""``geminibot why URL|HOST --db PATH``: why a page is in the search index or not, or what
the crawl knows of a host (the answer of :func:`geminibot.why.check`); and
``geminibot recheck URL|HOST --db PATH``: look at it again now
(:func:`geminibot.store.recheck.recheck`)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from geminibot.cliutil import (
    EXIT_NEGATIVE,
    EXIT_OK,
    CommandError,
    emit_json,
    terminal_safe,
)
from geminibot.store.database import open_database
from geminibot.store.recheck import DUE_POLL
from geminibot.urls import host_name
from geminibot.why import Answer, BadTarget, check, parse_target
from geminibot.why.render import recheck_lines, text_lines


def register(commands: Any) -> None:
    p = commands.add_parser(
        "why",
        help="why a page is in a crawl's index or not, or what it knows of a host",
        description=(
            "For a URL: whether the page is searchable and, if not, the one reason (the "
            "policy line that refused it, a policy file that could not be read, a trap or "
            "depth bound, a duplicate, failed requests, gone, --exclude, a host not "
            "followed, not reached yet, never linked); when it was last fetched, what came "
            "back, when it will be looked at again, who links to it. For a host (no "
            "'/'): its policy files, their lint findings, what each virtual agent may do, "
            "the delay, and its URLs by state. Exit status: 0 searchable (or a host), "
            "1 not searchable, 2 a usage error."
        ),
    )
    p.add_argument("target", metavar="URL|HOST", help="gemini://host/path, or a host name")
    p.add_argument(
        "--db",
        required=True,
        metavar="PATH|URL",
        help="crawl database: an SQLite file, or postgresql://USER@HOST/DB",
    )
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(run=run_why)
    r = commands.add_parser(
        "recheck",
        help="fetch a page, or every page of a host, again soon, at the capsule's pace",
        description=(
            "Make a URL, or every URL of a host (no '/'), due now in the crawl's frontier "
            "(a URL named goes first among its capsule's queued URLs): the running crawl (geminibot serve, crawl --forever) fetches it within "
            f"{DUE_POLL:g} s of its next look, else the next geminibot crawl does, at the "
            "capsule's pace and under its policy like any URL (nothing is fetched here). "
            "A page not found (51, 404) or gone (52, 410) is asked once more; a URL a "
            "trap bound keeps out never is. Exit status: 0 queued (or queued already), "
            "1 nothing could be queued, 2 a usage error (a URL or host the database does "
            "not hold, a bad --db)."
        ),
    )
    r.add_argument("target", metavar="URL|HOST", help="gemini://host/path, or a host name")
    r.add_argument(
        "--db",
        required=True,
        metavar="PATH|URL",
        help="crawl database: an SQLite file, or postgresql://USER@HOST/DB",
    )
    r.add_argument("--json", action="store_true", help="one JSON object")
    r.set_defaults(run=run_recheck)


def run_why(args: argparse.Namespace) -> int:
    with open_database(args.db) as database:
        try:
            answer = check(database, args.target, time.time())
        except BadTarget as exc:
            raise CommandError(f"{args.target!r}: {exc}") from None
    if args.json:
        emit_json(answer.as_dict())
    else:
        sys.stdout.write("\n".join(text_lines(answer)) + "\n")
    if isinstance(answer, Answer) and not answer.searchable:
        return EXIT_NEGATIVE
    return EXIT_OK


def run_recheck(args: argparse.Namespace) -> int:
    from geminibot.store.recheck import recheck

    try:
        target, host, is_url = parse_target(args.target)
    except BadTarget as exc:
        raise CommandError(f"{args.target!r}: {exc}") from None
    with open_database(args.db) as database:
        try:
            done = recheck(database, target, host, is_url=is_url, now=time.time())
        except database.errors as exc:  # a database we may not write, locked for too long
            raise CommandError(f"{database.name}: cannot write: {exc}", EXIT_NEGATIVE) from None
        name = database.name
    what = terminal_safe(target if is_url else host_name(host))
    if not done.known:
        kind = "URL" if is_url else "host"
        raise CommandError(
            f"{what}: no such {kind} in {name} (a page must be linked or seeded "
            "before it can be fetched again)"
        )
    if args.json:
        emit_json(done.as_dict())
    else:
        sys.stdout.write("\n".join(recheck_lines(done, what)) + "\n")
    return EXIT_OK if done.due or done.waiting else EXIT_NEGATIVE
