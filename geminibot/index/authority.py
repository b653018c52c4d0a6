"""Link authority: TrustRank over the graph of links between hosts, kept in the database.

Nodes are hosts (capsules), not pages: a link from a page of host A to a page of host B is
one vote of A for B, however many pages of A link to however many of B, and a host's
links to itself count for nothing (navigation, and a big capsule voting for itself).
Votes are spread evenly over the hosts a host links to (PageRank), and the random jump
lands on *trusted* hosts only (TrustRank, Gyöngyi et al. 2004): by default the crawl's
seeds' hosts, which its operator chose. With every host trusted this is plain PageRank,
which a link farm fools: hosts that link only to each other keep what they are given and
gain more for every member (docs/benchmarks.md has figures of both).

Each page gets its host's score, scaled so that 1.0 is the average host. The table
``authority`` (created here when missing, so databases written before it keep working,
and dropping it loses nothing the crawl cannot recompute) holds ``score`` and ``weight`` =
``log2(2 + AUTHORITY_SCALE * score)``, the factor search multiplies text relevance by
(:func:`weight_of`): FTS5 and PostgreSQL read it from the table at each query, the
tantivy index from its weights file (:mod:`geminibot.index.weights`). It is computed
again on a schedule (:mod:`geminibot.index.authority_job`).
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from geminibot.cliutil import counted

if TYPE_CHECKING:
    from geminibot.store.statements import Compiled
from geminibot.store.db import set_setting, transaction

#: PageRank's damping factor (the chance a reader follows a link instead of jumping).
DAMPING = 0.85
#: Power iterations at most; stops early when the ranks move less than TOLERANCE in all.
MAX_ITERATIONS = 50
TOLERANCE = 1e-6
#: How strongly authority scales text relevance (0 turns it off).
AUTHORITY_SCALE = 1.0
#: The store's setting that records when authority was last computed (Unix seconds).
COMPUTED_AT = "authority_computed_at"
#: Pages whose authority SQLite writes per transaction: a crawl's write waits for one
#: chunk at most, not for the whole table, which at Geminispace scale can take longer
#: than the crawl's busy timeout (docs/benchmarks.md).
WRITE_CHUNK = 20_000


class Connection(Protocol):
    """What the reads of the link graph need of a connection: an sqlite3 or a psycopg one,
    or a :class:`~geminibot.store.database.Database` (the same SQL runs on both)."""

    def execute(self, query: Any, /) -> Any: ...


def weight_of(score: float) -> float:
    return math.log2(2.0 + AUTHORITY_SCALE * score)


def has_authority(conn: sqlite3.Connection) -> bool:
    """Whether authority has been computed (the ``authority`` table holds rows)."""
    return conn.execute("SELECT 1 FROM authority LIMIT 1").fetchone() is not None


def _host(url: str) -> str:
    """The host as ``pages.host`` spells it ("host", or "host:port" off port 1965)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        return host if parts.port in (None, 1965) else f"{host}:{parts.port}"
    except ValueError:
        return ""


def pagerank(
    nodes: int, sources: list[int], targets: list[int], trusted: list[int] | None = None
) -> list[float]:
    """PageRank of ``nodes`` nodes over the edges ``sources[k] -> targets[k]``, summing
    to 1. The random jump (and the rank of nodes without out-links) lands on ``trusted``
    nodes only when given (TrustRank), else on every node."""
    out = [0] * nodes
    for s in sources:
        out[s] += 1
    if trusted:
        chosen = set(trusted)
        jump = [1.0 / len(chosen) if n in chosen else 0.0 for n in range(nodes)]
    else:
        jump = [1.0 / nodes] * nodes
    rank = list(jump)
    for _ in range(MAX_ITERATIONS):
        dangling = sum(r for r, o in zip(rank, out, strict=True) if o == 0)
        spread = (1.0 - DAMPING) + DAMPING * dangling
        share = [r / o if o else 0.0 for r, o in zip(rank, out, strict=True)]
        new = [spread * j for j in jump]
        for s, t in zip(sources, targets, strict=True):
            new[t] += DAMPING * share[s]
        moved = sum(abs(a - b) for a, b in zip(new, rank, strict=True))
        rank = new
        if moved < TOLERANCE:
            break
    return rank


def crawl_seeds(conn: Connection) -> list[str]:
    """The URLs the crawl started from (depth 0 in its frontier)."""
    return [str(u) for (u,) in conn.execute("SELECT url FROM urls WHERE depth = 0")]


def host_graph(conn: Connection) -> tuple[list[str], set[tuple[str, str]]]:
    """The crawl's hosts and the links between them, (source host, target host), read
    with SQL that both stores run (an sqlite3 or a psycopg connection)."""
    hosts = [str(h) for (h,) in conn.execute("SELECT DISTINCT host FROM pages ORDER BY host")]
    known = set(hosts)
    pairs: set[tuple[str, str]] = set()
    rows = conn.execute(
        "SELECT p.host, l.target FROM links l JOIN pages p ON p.id = l.page_id"
        " WHERE p.duplicate_of IS NULL"
    )
    for source, target in rows:
        host = _host(target)
        if source != host and host in known:
            pairs.add((str(source), host))
    return hosts, pairs


def rank_hosts(
    hosts: list[str],
    pairs: set[tuple[str, str]],
    trusted: list[str] | None,
    say: Callable[[str], None],
) -> tuple[list[float], int]:
    """Each host's score (1.0: the average host) and how many hosts were trusted."""
    number = {h: n for n, h in enumerate(hosts)}
    edges = sorted((number[s], number[t]) for s, t in pairs)
    trust = sorted({number[h] for h in map(_host, trusted or ()) if h in number})
    if trusted and not trust:
        say("none of the trusted URLs' hosts is in the index: every host is trusted")
    say(f"ranking {counted(len(hosts), 'host')} over {counted(len(edges), 'host-to-host link')}")
    sources = [s for s, _ in edges]
    targets = [t for _, t in edges]
    rank = pagerank(len(hosts), sources, targets, trust) if hosts else []
    return [r * len(hosts) for r in rank], len(trust)


#: Writes each host's (score, weight) to its pages' ``authority`` rows, replacing them all.
Writer = Callable[[Any, list[tuple[str, float, float]]], None]


def write_sqlite(conn: sqlite3.Connection, ranks: list[tuple[str, float, float]]) -> None:
    """The SQLite store's :data:`Writer`: every page's row replaced by its host's, in
    transactions of :data:`WRITE_CHUNK` pages, then the rows of pages gone deleted, so
    that a crawl writing meanwhile waits for one chunk at most, never for the whole table
    (SQLite has one writer at a time). A search in between reads some pages' new weights
    and others' old ones; the tantivy index's weights file is written after the last."""
    from geminibot.store import statements as q
    from geminibot.store.sqlite_sql import ENGINE

    _host_rank(conn, ranks, ENGINE.sql)
    try:
        _in_chunks(
            conn,
            "SELECT id FROM pages WHERE id > ? ORDER BY id LIMIT ?",
            "INSERT OR REPLACE INTO authority (url, score, weight)"
            " SELECT p.url, h.score, h.weight FROM pages p JOIN temp.host_rank h"
            " ON h.host = p.host WHERE p.id > ? AND p.id <= ?",
            0,
        )
        _in_chunks(
            conn,
            "SELECT url FROM authority WHERE url > ? ORDER BY url LIMIT ?",
            "DELETE FROM authority WHERE url > ? AND url <= ?"
            " AND NOT EXISTS (SELECT 1 FROM pages p WHERE p.url = authority.url)",
            "",
        )
        with transaction(conn):
            set_setting(conn, COMPUTED_AT, str(time.time()))
    finally:
        conn.execute(ENGINE.sql[q.DROP_HOST_RANK])


def _in_chunks(conn: sqlite3.Connection, keys: str, change: str, last: int | str) -> None:
    """Run ``change`` (parameters: a range of keys, low excluded) over the keys ``keys``
    lists (parameters: after this key, at most this many) from after ``last``, one
    transaction per :data:`WRITE_CHUNK` keys."""
    while True:
        with transaction(conn):
            found = conn.execute(keys, (last, WRITE_CHUNK)).fetchall()
            if not found:
                return
            conn.execute(change, (last, found[-1][0]))
        last = found[-1][0]


def _host_rank(conn: Any, ranks: list[tuple[str, float, float]], sql: Compiled) -> None:
    """The temporary table ``host_rank`` made afresh and filled with ``ranks``."""
    from geminibot.store import statements as q

    conn.execute(sql[q.DROP_HOST_RANK])
    conn.execute(sql[q.HOST_RANK_TABLE])
    rows = [{"host": host, "score": score, "weight": weight} for host, score, weight in ranks]
    conn.cursor().executemany(sql[q.ADD_HOST_RANK], rows)


def replace_authority(conn: Any, sql: Compiled) -> None:
    """Every page's authority replaced by its host's (score, weight), inside the caller's
    transaction, which holds the temporary table ``host_rank`` (host, score, weight): the
    PostgreSQL store's way (its readers and writers never wait for it); ``sql``: the
    statements compiled for ``conn``'s engine."""
    from geminibot.store import statements as q

    conn.execute(sql[q.CLEAR_AUTHORITY], {})
    conn.execute(sql[q.FILL_AUTHORITY], {})
    conn.execute(sql[q.SET_SETTING], {"key": COMPUTED_AT, "value": str(time.time())})


#: When authority was last computed: the same text on both engines (no parameter).
LAST_COMPUTED = f"SELECT value FROM settings WHERE key = '{COMPUTED_AT}'"


def last_computed(conn: Any) -> float | None:
    """When authority was last computed into the store, on either store's connection or a
    :class:`~geminibot.store.database.Database` (Unix seconds; None: never)."""
    row = conn.execute(LAST_COMPUTED).fetchone()
    try:
        return None if row is None else float(row[0])
    except ValueError:
        return None


def compute_authority(
    conn: Any,
    trusted: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
    write: Writer = write_sqlite,
) -> dict[str, float]:
    """Recompute ``authority`` for every page; returns a summary (hosts, links, trusted,
    seconds). ``conn`` is either store's connection, ``write`` that store's writer
    (:func:`write_sqlite`, :func:`geminibot.index.authority.write_postgres`).

    ``trusted``: URLs the random jump lands on (TrustRank: a link farm that no trusted
    page leads to gains nothing by linking to itself); None or empty: every page
    (plain PageRank, which a farm of pages linking to each other does fool)."""
    started = time.perf_counter()
    say = progress or (lambda _msg: None)
    say("reading the links between hosts")
    hosts, pairs = host_graph(conn)
    scores, trust = rank_hosts(hosts, pairs, trusted, say)
    write(conn, [(h, s, weight_of(s)) for h, s in zip(hosts, scores, strict=True)])
    return {
        "hosts": len(hosts),
        "links": len(pairs),
        "trusted": trust,
        "seconds": time.perf_counter() - started,
    }


def write_postgres(conn: Any, ranks: list[tuple[str, float, float]]) -> None:
    """The PostgreSQL store's :data:`~geminibot.index.authority.Writer`: every page's
    authority replaced in one transaction (searches see the old scores or the new)."""
    from geminibot.store import statements as q
    from geminibot.store.pg_sql import ENGINE

    with conn.transaction():
        _host_rank(conn, ranks, ENGINE.sql)
        replace_authority(conn, ENGINE.sql)
        conn.execute(ENGINE.sql[q.DROP_HOST_RANK])
