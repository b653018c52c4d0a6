"""The crawl database's schema version and its upgrade: one history for both engines.

The history is a list of Alembic revisions (``geminibot/store/migrations/versions``),
"0001" to ``revision_of(SCHEMA_VERSION)``, each taking a database of either engine one
version up; the version a database is at is the row of its ``alembic_version`` table. A
new or older database is brought to :data:`SCHEMA_VERSION` in one transaction (on
PostgreSQL under an advisory lock, so processes starting together upgrade it once); a
newer one is refused. Nothing needs ``alembic.ini``: :func:`upgrade` configures Alembic
itself, and is imported only when a database is not current (opening one that is costs
one query).

Databases from before the history kept their version elsewhere, and are recognised by it:
SQLite's ``PRAGMA user_version`` 1-6 are versions 1-6; PostgreSQL's ``geminibot_schema``
1-5 are versions 1, 1 (with ``authority``, which version 7 adds), 2, 3 and 4. SQLite's
``user_version`` is kept equal to the version, so that an older geminibot refuses a newer
file rather than write into it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from geminibot.store.errors import DatabaseError

if TYPE_CHECKING:
    import sqlalchemy as sa
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

#: The query of a database's version (where ``alembic_version`` exists).
VERSION_QUERY = "SELECT version_num FROM alembic_version"
#: The schema version this geminibot reads and writes (the last revision of the history).
SCHEMA_VERSION = 15
#: The advisory lock key a PostgreSQL upgrade holds.
MIGRATION_LOCK = 0x67656D69
#: PostgreSQL's versions before the history (``geminibot_schema``) and the version each is.
PG_LEGACY_VERSIONS = {1: 1, 2: 1, 3: 2, 4: 3, 5: 4}


def revision_of(version: int) -> str:
    """The Alembic revision of a schema version ("0007" for 7)."""
    return f"{version:04d}"


def version_of(revision: str) -> int:
    """The schema version of an Alembic revision; a revision of another history is -1."""
    return int(revision) if revision.isdigit() else -1


def database_version(conn: Any, tables: str, legacy: Callable[[set[str]], int]) -> int | None:
    """The schema version of the database of DBAPI connection ``conn``: Alembic's stamp if
    it has one; else the version its marker from before the history says (``legacy``,
    given the database's table names; 0: none); else 0 for a database with tables (of
    another application), None for an empty one. ``tables`` lists its table names."""
    names = {str(row[0]) for row in conn.execute(tables).fetchall()}
    if "alembic_version" in names:
        stored = conn.execute(VERSION_QUERY).fetchone()
        return version_of(str(stored[0])) if stored else 0
    found = legacy(names)
    return found if found or names else None


def check_version(name: str, version: int) -> None:
    """Refuse a database this geminibot cannot read (one line)."""
    if version > SCHEMA_VERSION:
        raise DatabaseError(
            f"{name}: database schema version {version} is newer than this geminibot "
            f"understands ({SCHEMA_VERSION})"
        )
    if version < 0:
        raise DatabaseError(f"{name}: not a geminibot database (an unknown schema version)")


def upgrade(creator: Callable[[], Any], dialect: str) -> None:
    """Bring the database that ``creator`` connects to (a new DBAPI connection of
    ``dialect``, "sqlite" or "postgresql") to :data:`SCHEMA_VERSION`, in one transaction."""
    import sqlalchemy as sa
    from alembic import command
    from alembic.config import Config

    url = "sqlite://" if dialect == "sqlite" else "postgresql+psycopg://"
    engine = sa.create_engine(url, creator=creator, poolclass=sa.pool.NullPool)
    if dialect == "sqlite":  # (the sqlite3 module would not put DDL in the transaction)
        sa.event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
    config = Config()
    config.set_main_option("script_location", "geminibot.store:migrations")
    try:
        with engine.connect() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
    finally:
        engine.dispose()


def before_migrations(
    connection: sa.Connection, context: MigrationContext, script: ScriptDirectory
) -> None:
    """In the upgrade's transaction, before the revisions run: take PostgreSQL's lock, and
    stamp a database from before the history with the version its own marker says."""
    import sqlalchemy as sa

    pg = connection.dialect.name == "postgresql"
    if pg:
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
    if context.get_current_revision() is not None:
        return
    legacy = 0
    if pg:
        if sa.inspect(connection).has_table("geminibot_schema"):
            row = connection.exec_driver_sql("SELECT version FROM geminibot_schema").first()
            legacy = PG_LEGACY_VERSIONS.get(int(row[0]) if row else 0, 0)
    else:
        legacy = int(connection.exec_driver_sql("PRAGMA user_version").scalar_one())
    if legacy:
        context.stamp(script, revision_of(legacy))


def after_migrations(connection: sa.Connection) -> None:
    """In the upgrade's transaction, after the revisions ran: SQLite's ``user_version``
    says the version too (see the module docstring)."""
    if connection.dialect.name == "sqlite":
        connection.exec_driver_sql(f"PRAGMA user_version = {SCHEMA_VERSION}")
