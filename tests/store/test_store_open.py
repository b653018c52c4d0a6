"""Opening a crawl database (store.database.open_database): a command that only reads
never creates nor changes one; an unusable --db of either engine is one line, exit 2."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import psycopg
import pytest

from geminibot.cli import main
from geminibot.store.database import open_database
from geminibot.store.errors import DatabaseError

#: The commands that only read --db (the servers exit before they listen).
READERS = [
    ["stats"],
    ["stats", "--urls"],
    ["search", "garden"],
    ["why", "gemini://a.test/"],
    ["index", "status"],
    ["index", "rebuild"],
    ["index", "authority"],
    ["index", "update"],
    ["serve-search", "--port", "0"],
    ["portal", "--port", "0"],
    ["db", "migrate", "--to", "postgresql://u@127.0.0.1:1/x"],
]

#: What --db holds, and the words of its one line.
BAD_FILES = {
    "missing": (None, "no such database"),
    "empty": (b"", "an empty file"),
    "text": (b"User-agent: *\nDisallow: /\n", "not an SQLite database"),
}


def argv_of(reader: list[str], db: str, tmp_path: Path) -> list[str]:
    flag = "--from" if reader[0] == "db" else "--db"
    extra = ["--certs", str(tmp_path / "certs")] if reader[0] == "serve-search" else []
    return [*reader, flag, db, *extra]


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of ``folder``: its bytes and modification time (ns)."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}


def foreign_sqlite(path: Path) -> None:
    """An SQLite database of another application (in rollback-journal mode)."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE theirs (x INTEGER)")
    conn.commit()
    conn.close()


def one_line(err: str, says: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1 and says in lines[0], err


@pytest.mark.parametrize("reader", READERS, ids=" ".join)
@pytest.mark.parametrize("kind", [*BAD_FILES, "foreign"])
def test_a_reader_leaves_an_unusable_file_as_it_was(
    reader: list[str], kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    db = folder / "crawl.db"
    if kind == "foreign":
        foreign_sqlite(db)
        says = "not a geminibot one"
    else:
        content, says = BAD_FILES[kind]
        if content is not None:
            db.write_bytes(content)
    before = snapshot(folder)
    assert main(argv_of(reader, str(db), tmp_path)) == 2
    one_line(capsys.readouterr().err, says)
    assert snapshot(folder) == before  # nothing created (-wal, -shm, .lock), nothing changed


def test_open_database_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    for name, (content, says) in BAD_FILES.items():
        path = tmp_path / name
        if content is not None:
            path.write_bytes(content)
        with pytest.raises(DatabaseError, match=says):
            open_database(str(path))
    foreign_sqlite(tmp_path / "foreign")
    with pytest.raises(DatabaseError, match="not a geminibot one"):
        open_database(str(tmp_path / "foreign"), write=True)  # not even to crawl it
    assert DatabaseError("x").exit_code == 2


def test_a_crawl_database_is_read_without_a_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "crawl.db"
    open_database(str(db), write=True).close()  # created to crawl, then left alone
    before = snapshot(tmp_path)
    assert {"crawl.db", "crawl.db.lock"} <= set(before)
    for reader in (["stats"], ["search", "garden"], ["why", "gemini://a.test/"]):
        main(argv_of(reader, str(db), tmp_path))
    capsys.readouterr()
    assert snapshot(tmp_path) == before


def test_a_crawl_creates_what_a_reader_refuses(tmp_path: Path) -> None:
    db = tmp_path / "new" / "crawl.db"
    with pytest.raises(DatabaseError, match="no folder"):
        open_database(str(db), write=True)
    with open_database(str(db), write=True, make_folder=True) as database:
        assert database.execute("SELECT count(*) FROM urls").fetchone()[0] == 0
        with pytest.raises(DatabaseError, match="another crawl is using this database"):
            open_database(str(db), write=True)
    open_database(str(db), write=True).close()  # the lock went with the first


def test_an_unreachable_postgresql_is_an_unusable_db(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    db = f"postgresql://nobody:secret@127.0.0.1:{port}/none"
    for reader in READERS[:-1]:
        assert main(argv_of(reader, db, tmp_path)) == 2, reader
        err = capsys.readouterr().err
        one_line(err, "cannot connect")
        assert "secret" not in err
    assert main(["crawl", "gemini://a.test/", "--db", db]) == 2
    one_line(capsys.readouterr().err, "cannot connect")


def test_a_reader_leaves_an_empty_postgresql_database_empty(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for reader in (["stats"], ["search", "garden"], ["why", "a.test"], ["index", "authority"]):
        assert main(argv_of(reader, pg_url, tmp_path)) == 2
        one_line(capsys.readouterr().err, "no crawl in this database")
    with psycopg.connect(pg_url) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        assert tables.fetchone() == (0,)
    with open_database(pg_url, write=True) as database:  # a crawl creates the schema
        assert database.shared and database.sqlite is None
        assert database.execute("SELECT count(*) FROM urls").fetchone()[0] == 0
