"""``geminibot export --db PATH --out DIR``: a crawl database as open data (Parquet files
and a README saying what each holds; :mod:`geminibot.export.writer`)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from geminibot.cliutil import (
    EXIT_NEGATIVE,
    EXIT_OK,
    CommandError,
    counted,
    emit_json,
    say,
    terminal_safe,
)
from geminibot.export.readme import README
from geminibot.export.writer import EXPORT_FILES, Written, export
from geminibot.store.database import Database, open_database
from geminibot.store.export_reads import HOLDS_URLS

#: Seconds between two progress lines on standard error.
PROGRESS_INTERVAL = 2.0


def register(commands: Any) -> None:
    p = commands.add_parser(
        "export",
        help="a crawl database as open data: Parquet files in Common Crawl's columns",
        description=(
            "Write what a crawl database holds into the folder DIR as Apache Parquet "
            "files, with a README.md saying what each file holds (columns, types, what "
            "a row is): a columnar index in Common Crawl's columns (index.parquet), "
            "hosts with their TLS and certificate facts and history, certificate pins, "
            "policy files as fetched, permanent redirects, "
            "the link graph between capsules, the URLs kept out with their reasons, "
            "and the feeds found with their entries. Nothing of a page's text (nor a "
            "feed's title, author or entries' titles) unless --text, and never for a "
            "host whose robots2.txt forbids keeping it. The database is only read (one snapshot; "
            "a crawl may go on meanwhile). Progress goes to standard error. Exit status: "
            "0 exported, 1 nothing to export or a failure while writing, 2 a bad --db "
            "or --out."
        ),
    )
    p.add_argument(
        "--db",
        required=True,
        metavar="PATH|URL",
        help="crawl database: an SQLite file, or postgresql://USER@HOST/DB",
    )
    p.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="DIR",
        help="folder to write (made if missing; must be empty unless --force)",
    )
    p.add_argument(
        "--text",
        action="store_true",
        help="also write page_text.parquet (the text kept of each searchable page) and "
        "the titles of feeds and their entries",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write into a folder that is not empty, replacing an earlier export's files",
    )
    p.add_argument("--json", action="store_true", help="one JSON object: the files and rows")
    p.set_defaults(run=run_export)


def check_out(out: Path, force: bool) -> None:
    """Refuse an ``--out`` that is not a folder, or a folder with files in it (unless
    ``force``); with ``force``, remove the files an earlier export left there."""
    if out.exists() and not out.is_dir():
        raise CommandError(f"{out}: exists and is not a folder")
    if not out.is_dir():
        return
    try:
        empty = not any(out.iterdir())
    except OSError as exc:
        raise CommandError(f"{out}: cannot read the folder: {exc.strerror}") from None
    if empty:
        return
    if not force:
        raise CommandError(f"{out}: not empty (--force writes over an earlier export)")
    for name in EXPORT_FILES:
        for stale in (out / name, out / f"{name}.partial"):
            stale.unlink(missing_ok=True)


def progress_lines(interval: float = PROGRESS_INTERVAL) -> Callable[[str], None]:
    """What the export says of its progress: a line on standard error at most every
    ``interval`` seconds."""
    last = [time.monotonic()]

    def progress(message: str) -> None:
        now = time.monotonic()
        if now - last[0] >= interval:
            last[0] = now
            print(f"export: {message}", file=sys.stderr, flush=True)

    return progress


def _export(database: Database, args: argparse.Namespace) -> list[Written]:
    if not int(database.run(HOLDS_URLS).fetchone()[0]):
        raise CommandError(
            f"{database.name}: the crawl holds no URLs yet: nothing to export", EXIT_NEGATIVE
        )
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(f"{args.out}: cannot make the folder: {exc.strerror}") from None
    try:
        return export(database, args.out, text=args.text, progress=progress_lines())
    except database.errors as exc:
        if isinstance(exc, OSError):
            message = f"{args.out}: cannot write: {exc.strerror or exc}"
        else:
            message = f"{database.name}: reading failed: {str(exc).splitlines()[0]}"
        raise CommandError(message, EXIT_NEGATIVE) from None


def run_export(args: argparse.Namespace) -> int:
    check_out(args.out, args.force)
    started = time.monotonic()
    with open_database(args.db) as database:
        written = _export(database, args)
    seconds = time.monotonic() - started
    rows = sum(w.rows for w in written)
    if args.json:
        emit_json(
            {
                "out": str(args.out),
                "files": [w.as_dict() for w in written],
                "rows": rows,
                "text": args.text,
                "seconds": round(seconds, 2),
            }
        )
        return EXIT_OK
    print(f"{'file':<24}{'rows':>14}{'MiB':>10}")
    for w in written:
        print(f"{w.file:<24}{w.rows:>14,}{w.bytes / 2**20:>10.1f}")
    say(
        sys.stdout,
        f"exported {counted(len(written), 'file')} and {README} in {seconds:.1f} s "
        f"(rows: {rows:,}), to:",
    )
    print(terminal_safe(str(args.out)))
    return EXIT_OK
