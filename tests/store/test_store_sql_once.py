"""No SQL statement is written twice: no statement in the PostgreSQL code equals one in the
SQLite code once their placeholders are the same, nor comes within :data:`SIMILAR` of one
(a statement that differs only in dialect is one Core expression). A statement both
engines run is written once, in ``geminibot/store/statements.py``."""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "geminibot"

#: The modules whose SQL runs on PostgreSQL only.
PG_CODE = ("store/pgstore.py", "store/pg.py", "store/pg_sql.py", "index/pg_search.py")
#: The modules whose SQL runs on SQLite only.
SQLITE_CODE = (
    "store/crawlstore.py",
    "store/sqlite_sql.py",
    "store/migrate.py",
    "store/db.py",
    "index/search.py",
    "store/authority.py",
    "index/tantivy_index.py",
    "index/documents.py",
    "index/weights.py",
    "index/updater.py",
)
_VERBS = ("select", "insert", "update", "delete", "with", "create")
# ?, ?1, %s, %(name)s, :name (not a ::cast), {0}, {} (an f-string's value)
_PLACEHOLDER = re.compile(r"\?\d*|%\(\w+\)s|%s|(?<![:\w]):\w+|\{\d*\}")


def normalised(sql: str) -> str:
    """``sql`` with every placeholder as ``?``, ``%%`` as ``%``, blanks collapsed."""
    text = _PLACEHOLDER.sub("?", sql.replace("%%", "%"))
    return " ".join(text.split()).lower()


def strings(path: Path) -> Iterator[str]:
    """The string constants of a module, an f-string with its values as ``{}``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.JoinedStr):
            yield "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def statements(path: Path) -> set[str]:
    """The SQL statements written in a module: its string constants (an f-string with
    its values as ``{}``) that begin with an SQL verb."""
    found = set()
    for text in strings(path):
        words = text.split(None, 1)
        if words and words[0].lower() in _VERBS:
            found.add(normalised(text))
    return found


def test_normalising_makes_placeholders_alike() -> None:
    assert normalised("SELECT a FROM t WHERE b = %s AND c = %(c)s") == normalised(
        "SELECT a FROM t WHERE b = ? AND c = :c"
    )
    assert normalised("SELECT x::text FROM t WHERE y LIKE '%%' || {0}") == (
        "select x::text from t where y like '%' || ?"
    )


def test_no_statement_is_written_for_both_engines() -> None:
    pg = set().union(*(statements(ROOT / name) for name in PG_CODE))
    sqlite = set().union(*(statements(ROOT / name) for name in SQLITE_CODE))
    assert len(pg) > 10 and len(sqlite) > 10  # (the modules do hold SQL)
    assert sorted(pg & sqlite) == []


#: Pairs of statements, one in each engine's code, at least this similar once normalised
#: (:func:`normalised`; difflib's ratio): a statement that differs from the other engine's
#: only in a few words is to be written once (a Core expression each engine compiles,
#: :mod:`geminibot.store.statements`).
SIMILAR = 0.8


def similar_pairs(pg: set[str], sqlite: set[str]) -> list[tuple[float, str, str]]:
    """The pairs of ``pg`` x ``sqlite`` at least :data:`SIMILAR`, most similar first."""
    pairs = []
    for a in sorted(pg):
        for b in sorted(sqlite):
            ratio = difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
            if ratio >= SIMILAR:
                pairs.append((ratio, a, b))
    return sorted(pairs, reverse=True)


def test_similarity_sees_a_statement_written_twice() -> None:
    """A claim with and without its row lock is one statement written twice (0.88); a
    different statement on the same table is not."""
    claim = "select url, depth from urls where host = ? and state = 'queued' order by id limit 1"
    locked = claim + " for update skip locked"
    pairs = similar_pairs({locked}, {claim, "delete from urls where url = ?"})
    assert [(a, b) for _, a, b in pairs] == [(locked, claim)]


def test_no_statement_is_nearly_written_for_both_engines() -> None:
    pg = set().union(*(statements(ROOT / name) for name in PG_CODE))
    sqlite = set().union(*(statements(ROOT / name) for name in SQLITE_CODE))
    assert similar_pairs(pg, sqlite) == []


#: The modules whose SQL runs on either engine's connection: written once, with named
#: parameters, compiled for the connection's engine (``engines.engine_of``).
SHARED_CODE = (
    "store/statements.py",
    "store/sqlstore.py",
    "store/frontier.py",
    "store/statistics.py",
    "searchcap/app.py",
    "store/lookups.py",
    "store/whatsnew.py",
    "store/export_reads.py",
    "store/census_reads.py",
    "store/policy_reads.py",
)
# ?, ?1, %s, %(name)s, {0}, {} (an f-string's value in place of a parameter)
_ENGINE_PLACEHOLDER = re.compile(r"\?\d*|%\(\w+\)s|%s|\{\d*\}")
# SQLite's placeholders rewritten for psycopg: .replace("?", "%s")
_TO_PSYCOPG = re.compile(r"""\.replace\(\s*["']\?["']\s*,\s*["']%s""")


def test_statements_both_engines_run_have_no_engine_of_their_own() -> None:
    """A shared module writes no engine's placeholder (a format constant filled per
    engine, ``.replace('?', '%s')``) and does not tell the connections apart itself."""
    for name in SHARED_CODE:
        path = ROOT / name
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                words = node.value.split(None, 1)
                if words and words[0].lower() in _VERBS:
                    assert not _ENGINE_PLACEHOLDER.search(node.value), (name, node.value)
        assert "sqlite3.Connection" not in source, name
        assert not _TO_PSYCOPG.search(source), name


def test_the_shared_modules_hold_sql() -> None:
    assert len(statements(ROOT / "store/lookups.py")) > 10
    assert len(statements(ROOT / "store/statements.py")) > 10


# a statement's opening words: a query, a write, a schema change, a pragma
_SQL = re.compile(
    r"^\s*(select|insert\s+into|update\s+\w+\s+set|delete\s+from|with\s+\w+\s+as"
    r"|create\s+(temp\s+|unique\s+)?(table|index|trigger|virtual)|drop\s+(table|index|trigger)"
    r"|pragma\s+\w+|alter\s+table)\b",
    re.IGNORECASE,
)
_SQL_WORD = re.compile(r"\b(from|into|set|table|index|values)\b|^\s*pragma", re.IGNORECASE)


def sql_literals(path: Path) -> list[str]:
    """The string constants of a module (an f-string's values as ``{}``) that are SQL."""
    return [text for text in strings(path) if _SQL.match(text) and _SQL_WORD.search(text)]


#: The modules of ``index/`` that search and rank, which write the SQL of their queries
#: and of the search index they keep; the rest of ``index/`` (statistics, link authority's
#: graph and writes) calls the store.
SEARCH_MODULES = (
    "search.py",
    "pg_search.py",
    "tantivy_index.py",
    "documents.py",
    "weights.py",
    "updater.py",
)


def test_sql_is_written_in_the_store_and_the_search_index_only() -> None:
    """Outside ``store/`` (the crawl database) and the search modules of ``index/``, no
    module writes SQL: it calls the store."""
    assert sql_literals(ROOT / "store/statements.py")  # (the check sees SQL)
    outside: dict[str, int] = {}
    for path in sorted(ROOT.rglob("*.py")):
        where = path.relative_to(ROOT)
        package = where.parts[0]
        if package == "store" or (where.parts[:-1] == ("index",) and where.name in SEARCH_MODULES):
            continue
        if found := sql_literals(path):
            outside[package] = outside.get(package, 0) + len(found)
    assert outside == {}


def test_the_search_modules_hold_sql() -> None:
    """Each module let write SQL does (the list names no module that no longer needs it)."""
    for name in SEARCH_MODULES:
        assert sql_literals(ROOT / "index" / name), name


def test_rows_tuples_follow_their_statements_placeholders() -> None:
    """A :class:`~geminibot.store.statements.Rows` statement compiles to one positional
    placeholder per name, on both engines; one naming its parameters in another order
    than its text is refused when compiled (its tuples would fill the wrong columns)."""
    from geminibot.store import statements as q
    from geminibot.store.pg_sql import ENGINE as PG
    from geminibot.store.sqlite_sql import ENGINE as SQLITE

    for engine, placeholder in ((SQLITE, "?"), (PG, "%s")):
        for rows in (
            q.ADD_URL,
            q.ADD_LINK,
            q.ADD_HOST,
            q.LOG_FETCH,
            q.LOG_DECISION,
            engine.add_page,
        ):
            sql = engine.sql[rows]
            assert sql.count(placeholder) == len(rows.names) and ":" not in sql, sql
        swapped = q.Rows(q.ADD_HOST.statement, ("now", "host"))
        with pytest.raises(ValueError, match="not"):
            engine.sql[swapped]
