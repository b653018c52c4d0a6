"""No SQL statement is written twice: outside the one dialect module of each engine
(``geminibot/store/sqlite_sql.py``, ``geminibot/store/pg_sql.py``), no statement in the
PostgreSQL code equals one in the SQLite code once their placeholders are the same. A
statement both engines run is written once, in ``geminibot/store/statements.py``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "geminibot"

#: The modules whose SQL runs on PostgreSQL only.
PG_CODE = ("store/pgstore.py", "store/pg.py", "index/pg_search.py")
#: The modules whose SQL runs on SQLite only.
SQLITE_CODE = (
    "store/crawlstore.py",
    "store/frontier.py",
    "store/migrate.py",
    "store/db.py",
    "store/pages.py",
    "index/search.py",
    "index/authority.py",
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


def statements(path: Path) -> set[str]:
    """The SQL statements written in a module: its string constants (an f-string with
    its values as ``{}``) that begin with an SQL verb."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
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


#: The modules whose SQL runs on either engine's connection: written once, with named
#: parameters, compiled for the connection's engine (``engines.engine_of``).
SHARED_CODE = (
    "store/statements.py",
    "index/stats.py",
    "searchcap/app.py",
    "why/records.py",
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
    assert len(statements(ROOT / "why/records.py")) > 10
    assert len(statements(ROOT / "store/statements.py")) > 10
