"""What ``--db`` names: an SQLite file (the default, no server) or a PostgreSQL database
(a libpq URI, ``postgresql://USER@HOST:PORT/DB``), for ``crawl`` (``search`` and ``stats``
read by the search commands).

A bad connection string is a usage error (exit 2); a server that cannot be reached, or
refuses us, is an error found (exit 1). Either is one line, never a traceback.
"""

from __future__ import annotations

import time
from typing import Any

from geminibot.store.errors import DatabaseError
from geminibot.store.pg import command_error as pg_error
from geminibot.store.pg import display, is_postgres
from geminibot.store.traps import FrontierLimits

__all__ = ["display", "is_postgres", "open_pg_store", "pg_error"]


def open_pg_store(db: str, limits: FrontierLimits, lease_seconds: float | None) -> Any:
    """The crawl's :class:`~geminibot.store.pgstore.PgStore` on ``db``."""
    from geminibot.store import pgstore

    seconds = pgstore.LEASE_SECONDS if lease_seconds is None else lease_seconds
    try:
        return pgstore.open_store(db, time.time, limits, lease_seconds=seconds)
    except DatabaseError as exc:
        raise pg_error(exc) from None
