"""Opening a crawl database: the one way every command, server and service component
opens what ``--db`` names, an SQLite file (the default, no server) or a PostgreSQL
database (a libpq URI, ``postgresql://USER@HOST:PORT/DB``).

:func:`open_database` hands back a :class:`Database`: its DBAPI connection, the statements
compiled for its engine, and what differs between the engines as methods, so that no
caller tells one engine from the other. Anything that makes a database unusable raises
:class:`~geminibot.store.errors.DatabaseError`, one line, which a command answers with
exit 2 (it is a :class:`~geminibot.cliutil.CommandError`).

To read (``search``, ``stats``, ``why``, ``index``, the servers: the default), the
database must already be a geminibot one, and is never created nor converted: a missing
file, an empty file, a file that is not SQLite, a PostgreSQL database without the crawl's
tables, an unreachable server are refused and left as they were. To write (``crawl``,
``serve`` preparing its database), a new file or an empty PostgreSQL database gets the
schema. Either way an older geminibot database is upgraded in place (as any geminibot
that opens it would) and a newer one refused.
"""

from __future__ import annotations

import fcntl
import itertools
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from geminibot.store.errors import DatabaseError
from geminibot.store.pg import display, is_postgres

if TYPE_CHECKING:
    from geminibot.store.crawlstore import CrawlStore
    from geminibot.store.statements import Compiled, Engine, Statement
    from geminibot.store.traps import FrontierLimits

__all__ = ["Database", "DatabaseError", "display", "open_database"]


def open_database(
    db: str,
    *,
    write: bool = False,
    any_thread: bool = False,
    make_folder: bool = False,
    lease_seconds: float | None = None,
) -> Database:
    """The crawl database ``db`` (a path, or a ``postgresql://`` URL), for reading or,
    with ``write``, for crawling (see the module docstring); raises
    :class:`~geminibot.store.errors.DatabaseError`. Writing an SQLite file takes its lock
    (one crawl process at a time; with ``make_folder`` its folder is made first). With
    ``any_thread`` an SQLite connection may be used by one thread after another (a
    PostgreSQL one always may). ``lease_seconds``: how long a crawl process holds a host
    of a database it shares with others (PostgreSQL only; refused before anything is
    opened on SQLite)."""
    if is_postgres(db):
        from geminibot.store import pg

        return Database(
            display(db), pg.connect(db, create=write), url=db, lease_seconds=lease_seconds
        )
    if lease_seconds is not None:
        raise DatabaseError("--lease-seconds is for a postgresql:// --db")
    from geminibot.store.db import connect

    path = Path(db)
    if not write:
        _check_readable(path)
        return Database(str(path), connect(path, create=False, any_thread=any_thread), path=path)
    if make_folder:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DatabaseError(f"{path}: {exc.strerror}") from None
    lock = _exclusive(path)
    try:
        return Database(str(path), connect(path, any_thread=any_thread), path=path, lock=lock)
    except BaseException:
        lock.close()
        raise


def _exclusive(path: Path) -> IO[str]:
    """The lock of a crawl on the SQLite file ``path``: one crawl process at a time (the
    lock goes with the process, even on kill -9)."""
    if path.is_dir():
        raise DatabaseError(f"{path}: is a folder; --db names the crawl's database file")
    try:
        lock = path.with_name(path.name + ".lock").open("w")
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise DatabaseError(f"{path}: another crawl is using this database") from None
    return lock


def _cannot_write(path: Path, exc: OSError) -> DatabaseError:
    """The one line for a database whose folder cannot be written."""
    folder = path.parent if str(path.parent) else Path(".")
    if path.exists():
        return DatabaseError(
            f"{path}: cannot write in {folder} ({exc.strerror}): a crawl writes its database "
            "and the -wal, -shm and .lock files beside it; geminibot search and stats can "
            "read it where it is"
        )
    if not folder.is_dir():
        return DatabaseError(f"{path}: cannot create the database there: no folder {folder}")
    return DatabaseError(f"{path}: cannot create the database there: {exc.strerror}")


#: Numbers the server-side cursors of :meth:`Database.batches`.
_cursors = itertools.count()

#: The first bytes of every SQLite 3 file.
SQLITE_HEADER = b"SQLite format 3\x00"


def _check_readable(path: Path) -> None:
    """Refuse, without touching it, a file that holds no crawl to read."""
    try:
        with path.open("rb") as file:
            head = file.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        raise DatabaseError(f"{path}: no such database") from None
    except IsADirectoryError:
        raise DatabaseError(f"{path}: is a folder, expected a database file") from None
    except OSError as exc:
        raise DatabaseError(f"{path}: cannot read: {exc.strerror}") from None
    if not head:
        raise DatabaseError(f"{path}: an empty file, not a crawl database")
    if head != SQLITE_HEADER:
        raise DatabaseError(f"{path}: not an SQLite database, so not a crawl database")


class Database:
    """An open crawl database of either engine (see :func:`open_database`): ``name`` for
    messages (a URL without its password), ``connection`` (sqlite3's or psycopg's, in
    autocommit mode) and what the callers need of it whatever the engine."""

    def __init__(
        self,
        name: str,
        connection: Any,
        *,
        path: Path | None = None,
        url: str | None = None,
        lock: IO[str] | None = None,
        lease_seconds: float | None = None,
    ) -> None:
        self.name = name
        self.connection = connection
        self.path = path  # the SQLite file (None: a PostgreSQL database)
        self.url = url  # the PostgreSQL URL (None: an SQLite file)
        self._lock = lock  # a crawl's lock on the SQLite file
        self.lease_seconds = lease_seconds  # a crawl's hold on a host (PostgreSQL)

    @property
    def dialect(self) -> str:
        """The engine's name: ``sqlite`` or ``postgresql``."""
        return "sqlite" if self.path is not None else "postgresql"

    @property
    def engine(self) -> Engine:
        """The engine's compiled statements (:mod:`geminibot.store.statements`)."""
        if self.path is None:
            from geminibot.store.pg_sql import ENGINE
        else:
            from geminibot.store.sqlite_sql import ENGINE
        return ENGINE

    @property
    def sql(self) -> Compiled:
        return self.engine.sql

    @property
    def shared(self) -> bool:
        """Whether several crawl processes may share it (PostgreSQL), which also means a
        full-text index of its own, always current (no tantivy index beside it)."""
        return self.path is None

    @property
    def sqlite(self) -> sqlite3.Connection | None:
        """The sqlite3 connection of an SQLite file (its derived tantivy index, its
        FTS5 search); None on PostgreSQL."""
        return None if self.path is None else self.connection

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        """What a statement raises when it fails (locked, lost, full disk)."""
        if self.path is not None:
            return (sqlite3.Error, OSError)
        import psycopg

        return (psycopg.Error, OSError)

    @property
    def lost(self) -> bool:
        """Whether the connection is gone (a PostgreSQL server closed it)."""
        return self.path is None and bool(self.connection.closed)

    def execute(self, query: Any, params: Any = None) -> Any:
        """The DBAPI cursor of ``query`` (text in the engine's own parameter style)."""
        if params is None:
            return self.connection.execute(query)
        return self.connection.execute(query, params)

    def run(self, statement: Statement, **params: object) -> Any:
        """The cursor of one of :mod:`geminibot.store.statements`' statements."""
        return self.connection.execute(self.sql[statement], params)

    def query(self, sql: str, params: Mapping[str, object] | None = None) -> Any:
        """The cursor of an ad hoc read: SQL text with ``:name`` parameters, compiled for
        this engine (a report's question, not one of the crawl's statements)."""
        return self.connection.execute(self.sql.once(sql), dict(params or {}))

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read-only transaction for the ``with`` block: every read in it sees the
        database as it was when the block began, whatever a crawl writes meanwhile (for a
        long read of several tables that must agree, such as an export)."""
        if self.path is not None:
            self.connection.execute("BEGIN")
            try:
                yield
            finally:
                self.connection.execute("ROLLBACK")
            return
        with self.connection.transaction(force_rollback=True):
            self.connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield

    def batches(
        self, statement: Statement, size: int = 10_000, **params: object
    ) -> Iterator[list[Any]]:
        """The rows of ``statement`` in lists of at most ``size``, never all at once:
        SQLite steps through them, PostgreSQL sends them from a server-side cursor (so
        read them inside :meth:`snapshot`, its transaction)."""
        if self.path is None:
            cursor = self.connection.cursor(name=f"batches_{next(_cursors)}")
        else:
            cursor = self.connection.cursor()
        try:
            cursor.execute(self.sql[statement], params)
            while rows := cursor.fetchmany(size):
                yield rows
        finally:
            cursor.close()

    def setting(self, key: str) -> str | None:
        from geminibot.store import statements as q

        row = self.run(q.SETTING, key=key).fetchone()
        return None if row is None else str(row[0])

    def transaction(self) -> AbstractContextManager[Any]:
        """One write transaction (SQLite's ``BEGIN IMMEDIATE``), committed when the block
        ends, rolled back on an error."""
        if self.path is not None:
            from geminibot.store.db import transaction

            return transaction(self.connection)
        return self.connection.transaction()  # type: ignore[no-any-return]

    def rollback(self) -> None:
        """End a transaction a failed statement left open."""
        if self.path is None or self.connection.in_transaction:
            self.connection.rollback()

    @contextmanager
    def crawl_store(
        self,
        clock: Callable[[], float],
        limits: FrontierLimits | None = None,
    ) -> Iterator[CrawlStore]:
        """The crawl's store on this database, for one crawl run: on SQLite over this
        connection, its writes batched; on PostgreSQL a pool of connections of its own,
        holding hosts by leases (of :attr:`lease_seconds`), closed as the run ends."""
        if self.url is None:
            from geminibot.store.crawlstore import SqliteStore

            yield SqliteStore(self.connection, clock, limits, batch=True)
            return
        from geminibot.store import pgstore

        seconds = pgstore.LEASE_SECONDS if self.lease_seconds is None else self.lease_seconds
        store = pgstore.open_store(self.url, clock, limits, lease_seconds=seconds)
        try:
            yield store
        finally:
            store.close()

    def checkpoint(self) -> None:
        """As a crawl ends cleanly: no write-ahead log left beside an SQLite file."""
        if self.path is not None:
            from geminibot.store.db import checkpoint

            checkpoint(self.connection)

    def close(self) -> None:
        self.connection.close()
        if self._lock is not None:
            self._lock.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
