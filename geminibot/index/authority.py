"""Link authority: PageRank over the crawl's links between hosts, kept in the database.

Only links from one host to another count: a capsule's links to its own pages are
navigation, and counting them would let any big capsule vote for itself. A link to a
duplicate counts for the canonical page it duplicates; links to pages not in the index,
and repeated links between the same two pages, count once or not at all.

The result is the table ``authority`` (created here when missing, so databases written
before it exist keep working, and dropping it loses nothing the crawl cannot recompute):
``score`` is the page's PageRank times the number of pages (1.0 is the average page) and
``weight`` is ``log2(2 + AUTHORITY_SCALE * score)``, the factor search multiplies a page's
text relevance by (tantivy's ``weight_by_field`` applies the same formula).

Memory: two integer arrays the size of the edge list and three float arrays the size of
the page count; no per-page Python objects.
"""

from __future__ import annotations

import math
import sqlite3
import time
from array import array
from collections.abc import Callable
from urllib.parse import urlsplit

from geminibot.index.db import set_setting, transaction

#: PageRank's damping factor (the chance a reader follows a link instead of jumping).
DAMPING = 0.85
#: Power iterations at most; stops early when the ranks move less than TOLERANCE in all.
MAX_ITERATIONS = 50
TOLERANCE = 1e-6
#: How strongly authority scales text relevance (0 turns it off).
AUTHORITY_SCALE = 1.0
#: Rows written per statement batch.
BATCH = 10_000

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS authority ("
    " url TEXT PRIMARY KEY, score REAL NOT NULL, weight REAL NOT NULL) WITHOUT ROWID"
)


def weight_of(score: float) -> float:
    return math.log2(2.0 + AUTHORITY_SCALE * score)


def has_authority(conn: sqlite3.Connection) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'authority'"
    ).fetchone()
    return row is not None


def _host(url: str) -> str:
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        return host if parts.port in (None, 1965) else f"{host}:{parts.port}"
    except ValueError:
        return ""


def pagerank(nodes: int, sources: array[int], targets: array[int]) -> array[float]:
    """PageRank of ``nodes`` nodes over the edges ``sources[k] -> targets[k]``, summing
    to 1; pages without out-links spread their rank over all pages."""
    out = array("l", bytes(8 * nodes))
    for s in sources:
        out[s] += 1
    rank = array("d", [1.0 / nodes]) * nodes
    for _ in range(MAX_ITERATIONS):
        dangling = sum(rank[n] for n in range(nodes) if out[n] == 0)
        base = (1.0 - DAMPING) / nodes + DAMPING * dangling / nodes
        share = array("d", (rank[n] / out[n] if out[n] else 0.0 for n in range(nodes)))
        new = array("d", [base]) * nodes
        for s, t in zip(sources, targets, strict=True):
            new[t] += DAMPING * share[s]
        moved = sum(abs(a - b) for a, b in zip(new, rank, strict=True))
        rank = new
        if moved < TOLERANCE:
            break
    return rank


def compute_authority(
    conn: sqlite3.Connection, progress: Callable[[str], None] | None = None
) -> dict[str, float]:
    """Recompute ``authority`` for every page; returns a summary (pages, edges, seconds)."""
    started = time.perf_counter()
    say = progress or (lambda _msg: None)
    conn.execute(SCHEMA)
    say("reading pages")
    ids: dict[str, int] = {}
    hosts: list[str] = []
    urls: list[str] = []
    canonical: dict[str, str] = {}
    for url, host, duplicate_of in conn.execute("SELECT url, host, duplicate_of FROM pages"):
        if duplicate_of is not None:
            canonical[url] = duplicate_of
            continue
        ids[url] = len(urls)
        urls.append(url)
        hosts.append(host)
    for url, original in canonical.items():
        if original in ids:
            ids[url] = ids[original]
    say(f"reading links between hosts of {len(urls)} pages")
    sources, targets = array("l"), array("l")
    seen: set[tuple[int, int]] = set()
    rows = conn.execute(
        "SELECT p.url, l.target FROM links l JOIN pages p ON p.id = l.page_id"
        " WHERE p.duplicate_of IS NULL"
    )
    for source_url, target in rows:
        s, t = ids.get(source_url), ids.get(target)
        if s is None or t is None or s == t or hosts[s] == _host(target):
            continue
        if (s, t) not in seen:
            seen.add((s, t))
            sources.append(s)
            targets.append(t)
    seen.clear()
    nodes = len(urls)
    say(f"ranking {nodes} pages over {len(sources)} links")
    rank = pagerank(nodes, sources, targets) if nodes else array("d")
    with transaction(conn):
        conn.execute("DELETE FROM authority")
        for start in range(0, nodes, BATCH):
            conn.executemany(
                "INSERT INTO authority (url, score, weight) VALUES (?, ?, ?)",
                (
                    (urls[n], rank[n] * nodes, weight_of(rank[n] * nodes))
                    for n in range(start, min(start + BATCH, nodes))
                ),
            )
        set_setting(conn, "authority_computed_at", str(time.time()))
    return {"pages": nodes, "links": len(sources), "seconds": time.perf_counter() - started}
