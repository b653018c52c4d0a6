"""The crawl database: creation, migrations by version, refusal of foreign files."""

import sqlite3
from pathlib import Path

import pytest

from geminibot.index import DatabaseError, connect, transaction
from geminibot.index.db import SCHEMA_VERSION, get_setting, set_setting


def test_new_database_is_wal_and_current(tmp_path: Path) -> None:
    conn = connect(tmp_path / "c.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    again = connect(tmp_path / "c.db")  # reopening does not migrate twice
    assert again.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_missing_database_for_readers(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match="no such database"):
        connect(tmp_path / "absent.db", create=False)


def test_not_a_database(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite at all, just text\n" * 100)
    with pytest.raises(DatabaseError, match="not a usable geminibot database"):
        connect(bad)


def test_foreign_sqlite_database(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    c = sqlite3.connect(other)
    c.execute("CREATE TABLE t (x)")
    c.commit()
    c.close()
    with pytest.raises(DatabaseError, match="not a geminibot one"):
        connect(other)


def test_newer_schema_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    connect(path).close()
    c = sqlite3.connect(path)
    c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    c.commit()
    c.close()
    with pytest.raises(DatabaseError, match="newer"):
        connect(path)


def test_transaction_rolls_back_on_error(tmp_path: Path) -> None:
    conn = connect(tmp_path / "c.db")
    with pytest.raises(RuntimeError), transaction(conn):
        set_setting(conn, "role", "indexer")
        raise RuntimeError("boom")
    assert get_setting(conn, "role") is None
    with transaction(conn):
        set_setting(conn, "role", "indexer")
        set_setting(conn, "role", "archiver")  # idempotent upsert
    assert get_setting(conn, "role") == "archiver"
