"""The policy files a crawl keeps (``robots``: each file's last fetch on each host, its
outcome, status and body), read in bulk for a report (``geminibot census``), with the
fetches that got them (their MIME type). A file comes back as the crawl store hands it
out, a :class:`~geminibot.store.records.CachedFile`.

``host`` scopes a read as :mod:`geminibot.store.census_reads`' do: one host key, or None
for every Gemini capsule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from geminibot.store import lookups
from geminibot.store import statements as q
from geminibot.store.census_reads import GEMINI_HOSTS, rows
from geminibot.store.records import CachedFile

if TYPE_CHECKING:
    from geminibot.store.database import Database

_FILE = "outcome, reason, status, body, fetched_at, expires_at"
#: The files of every Gemini capsule (one host's: :data:`~geminibot.store.lookups.FILE_ROWS`).
FILES = sa.text(f"SELECT host, name, {_FILE} FROM robots WHERE {GEMINI_HOSTS}")
NAMED_FILES = sa.text(
    f"SELECT host, name, {_FILE} FROM robots WHERE {GEMINI_HOSTS} AND name = :name"
)
#: The fetches answered 20 of robots.txt, robots2.txt and agents.txt, oldest first.
FILE_FETCHES = (
    "SELECT host, url, meta FROM fetches WHERE {where} AND status = 20"
    " AND (url LIKE '%/robots.txt' OR url LIKE '%/robots2.txt' OR url LIKE '%/agents.txt')"
    " ORDER BY started_at"
)
#: The web origins (keys with a scheme) with a policy file.
WEB_ORIGINS = sa.text("SELECT DISTINCT host FROM robots WHERE host LIKE '%://%'")
#: The hosts, of either protocol, whose file ``:name`` was fetched successfully.
HOSTS_WITH = sa.text("SELECT host FROM robots WHERE name = :name AND outcome = 'success'")


def files(database: Database, host: str | None, name: str | None = None) -> list[CachedFile]:
    """The policy files of ``host`` (None: every Gemini capsule), all or those ``name``."""
    if host is not None:
        found = host_files(database, host)
        return [f for f in found if name is None or f.name == name]
    if name is None:
        every = database.run(FILES).fetchall()
    else:
        every = database.run(NAMED_FILES, name=name).fetchall()
    return [CachedFile.of(str(r[0]), str(r[1]), r[2:]) for r in every]


def host_files(database: Database, host: str) -> list[CachedFile]:
    """The policy files of one host of either protocol (a web origin's too), by name."""
    found = database.run(lookups.FILE_ROWS, host=host).fetchall()
    return [CachedFile.of(host, str(r[0]), r[1:]) for r in found]


def host_file(database: Database, host: str, name: str) -> CachedFile | None:
    """The host's file ``name`` as last fetched (None: never fetched)."""
    row = database.run(q.POLICY_FILE, host=host, name=name).fetchone()
    return None if row is None else CachedFile.of(host, name, row)


def file_fetches(database: Database, host: str | None) -> list[tuple[str, str, str]]:
    """The 20 answers that got the policy files of ``host`` (None: every Gemini capsule),
    oldest first: host, URL, meta line."""
    return [(str(h), str(u), str(m)) for h, u, m in rows(database, FILE_FETCHES, host)]


def last_fetch(database: Database, url: str) -> tuple[str | None, str | None]:
    """The meta line (a MIME type, a reason) and the error (none: answered) of the last
    request for ``url``, by URL through the fetch log's index (None, None: never asked)."""
    row = database.run(lookups.LAST_FETCH, url=url).fetchone()
    return (None, None) if row is None else (row[2], row[3])


def web_origins(database: Database) -> list[str]:
    """The web origins (``https://...``, ``http://...``) with a policy file kept."""
    return [str(r[0]) for r in database.run(WEB_ORIGINS).fetchall()]


def hosts_with(database: Database, name: str) -> set[str]:
    """The hosts, of either protocol, whose file ``name`` was fetched successfully."""
    return {str(r[0]) for r in database.run(HOSTS_WITH, name=name).fetchall()}
