"""``geminibot search``: searching a crawl database, SQLite or PostgreSQL.

Only what it needs is imported: the index, never the crawler, its network clients, the
policy engine or SQLAlchemy, so that a search answers in about the time Python takes to
start (``geminibot stats`` is :mod:`geminibot.index.stats_cli`).

A query is read as a query whatever it begins with: ``geminibot search -haiku beos``,
``geminibot search -- -haiku beos --db x.db`` and ``geminibot search --db x.db -- -haiku
beos`` all search for ``beos`` without ``haiku`` (:class:`QueryParser`): only the
command's own options (``--db``, ``--limit``... and ``-h``) are options, wherever they
stand, and ``--``, the usual way to say "no options from here", is accepted and skipped.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from geminibot.cliutil import (
    EXIT_NEGATIVE,
    EXIT_OK,
    CommandError,
    Parser,
    bounded_number,
    emit_json,
    wrapped,
)
from geminibot.index.query import (
    MAX_PHRASE_WORDS,
    MAX_PREFIXES,
    MAX_TERMS,
    MIN_PREFIX_CHARS,
    QueryError,
)
from geminibot.index.search import MAX_LIMIT, MAX_OFFSET, SearchResult, search
from geminibot.store.database import Database, open_database

#: The language assumed for a reader whose locale names none (``C``, ``POSIX``, unset).
DEFAULT_READER_LANGUAGE = "en"


class QueryParser(Parser):
    """``search``'s parser: every word that is not one of its options (or ``--``) is a
    query word, ``-word`` included, in the order given."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        options, words = self.split(list(sys.argv[1:] if args is None else args))
        return super().parse_known_args([*options, "--", *words], namespace)

    def split(self, args: list[str]) -> tuple[list[str], list[str]]:
        """(the command's options with their values, the query's words)."""
        options: list[str] = []
        words: list[str] = []
        rest = iter(args)
        for arg in rest:
            if arg == "--":
                continue
            action = self._option(arg)
            if action is None:
                words.append(arg)
                continue
            options.append(arg)
            if action.nargs != 0 and "=" not in arg:
                options += [next(rest, "")]
        return options, words

    def _option(self, arg: str) -> argparse.Action | None:
        """The option ``arg`` names (exactly, or as an unambiguous ``--`` prefix)."""
        if not arg.startswith("-"):
            return None
        name = arg.split("=", 1)[0] if arg.startswith("--") else arg
        if name in self._option_string_actions:
            return self._option_string_actions[name]
        if not arg.startswith("--"):
            return None
        found = {a for s, a in self._option_string_actions.items() if s.startswith(name)}
        return found.pop() if len(found) == 1 else None


def register(commands: Any) -> None:
    find = commands.add_parser(
        "search",
        help="search a crawl's index",
        description=(
            'QUERY: words (all required), "a phrase", prefix*, -excluded, a OR b, and '
            "operators: site:HOST (site:*.example.org, -site:), intitle:WORD, inurl:WORD, "
            "mime:TYPE (mime:image, mime:text/gemini), filetype:EXT (filetype:pdf), "
            "size:<10k / size:>1m, lang:CODE (an ISO 639-1 code: lang:de); operators alone "
            "list the pages in their scope, a malformed one is refused with its right "
            "form (exit 2). Every word that is not "
            "one of the options below is part of the query, -word included, wherever it "
            "stands (search -haiku beos --db x.db; -- is accepted and skipped: search -- "
            "-haiku beos --db x.db). A page in "
            "another language than the locale's ($LANG) is marked with its code: [de]. "
            f"At most {MAX_TERMS} terms, {MAX_PREFIXES} prefixes of {MIN_PREFIX_CHARS} "
            f"letters or more and phrases of {MAX_PHRASE_WORDS} words: a query over them "
            "is refused with what to change (exit 2)."
        ),
    )
    find.__class__ = QueryParser  # argparse makes the parser; its reading of words is ours
    find.add_argument("query", nargs="*", metavar="QUERY", help="the query's words")
    find.add_argument(
        "--db", required=True, metavar="PATH|URL", help="crawl database (file or postgresql://)"
    )
    find.add_argument(
        "--limit",
        type=bounded_number(int, 1, MAX_LIMIT),
        default=10,
        metavar="N",
        help=f"results (1 to {MAX_LIMIT})",
    )
    find.add_argument(
        "--offset",
        type=bounded_number(int, 0, MAX_OFFSET),
        default=0,
        metavar="N",
        help="skip the first N results (the next page: --offset 10)",
    )
    find.add_argument(
        "--host",
        metavar="PATTERN",
        help="only pages of hosts matching this shell pattern (example.org, *.example.org)",
    )
    find.add_argument(
        "--explain",
        action="store_true",
        help="under each result, how its score is made (text fields, link text, "
        "authority, stuffing penalty) and when the page was fetched; --json gives "
        "score_parts",
    )
    find.add_argument("--json", action="store_true", help="one JSON object per result")
    find.set_defaults(run=run_search)


def search_function(database: Database) -> Callable[..., list[SearchResult]]:
    """The search of ``database``'s engine: FTS5 or the tantivy index on SQLite,
    PostgreSQL's own text search."""
    return _SEARCHES[database.dialect]


def _pg_search(
    conn: Any,
    query: str,
    limit: int,
    *,
    offset: int = 0,
    host: str | None = None,
    explain: bool = False,
) -> list[SearchResult]:
    from geminibot.index import pg_search

    return pg_search.search(conn, query, limit, offset=offset, host=host, explain=explain)


_SEARCHES: dict[str, Callable[..., list[SearchResult]]] = {
    "sqlite": search,
    "postgresql": _pg_search,
}


def reader_language(environ: dict[str, str] | None = None) -> str:
    """The reader's language from the locale (``LC_ALL``, ``LC_MESSAGES``, ``LANG``:
    ``de_DE.UTF-8`` -> ``de``), else :data:`DEFAULT_READER_LANGUAGE`."""
    env = os.environ if environ is None else environ
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(name, "")
        code = value.split("_", 1)[0].split(".", 1)[0].lower()
        if value and code not in {"c", "posix"}:
            return code
    return DEFAULT_READER_LANGUAGE


def run_search(args: argparse.Namespace) -> int:
    query = " ".join(args.query)
    if not query.strip():
        raise CommandError("search: give a query")
    with open_database(args.db) as database:
        find = search_function(database)
        try:
            results = find(
                database.connection,
                query,
                args.limit,
                offset=args.offset,
                host=args.host,
                explain=args.explain or args.json,
            )
        except QueryError as exc:
            raise CommandError(f"search: {exc}") from None
    reader = reader_language()
    highlight = sys.stdout.isatty()
    for n, r in enumerate(results, args.offset + 1):
        if args.json:
            emit_json(r.as_json())
        else:
            print(r.as_text(n, highlight=highlight, reader=reader))
            if args.explain:
                for line in r.explanation():
                    print("\n".join(wrapped(line, "   ", "     ")))
    if not results and not args.json:
        print("no results", file=sys.stderr)
    return EXIT_OK if results else EXIT_NEGATIVE
