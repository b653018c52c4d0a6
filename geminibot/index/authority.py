"""Link authority: TrustRank over the graph of links between hosts, kept in the database.

Nodes are hosts (capsules), not pages: a link from a page of host A to a page of host B is
one vote of A for B, however many pages of A link to however many of B, and a host's
links to itself count for nothing (navigation, and a big capsule voting for itself).
Votes are spread evenly over the hosts a host links to (PageRank), and the random jump
lands on *trusted* hosts only (TrustRank, Gyöngyi et al. 2004): by default the crawl's
seeds' hosts, which its operator chose. With every host trusted this is plain PageRank,
which a link farm fools: hosts that link only to each other keep what they are given and
gain more for every member (docs/benchmarks.md shows both on the synthetic space).

Each page gets its host's score, scaled so that 1.0 is the average host. The table
``authority`` (created here when missing, so databases written before it keep working,
and dropping it loses nothing the crawl cannot recompute) holds ``score`` and ``weight`` =
``log2(2 + AUTHORITY_SCALE * score)``, the factor search multiplies text relevance by
(tantivy's ``weight_by_field`` applies the same formula).
"""

from __future__ import annotations

import math
import sqlite3
import time
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


def crawl_seeds(conn: sqlite3.Connection) -> list[str]:
    """The URLs the crawl started from (depth 0 in its frontier)."""
    return [str(u) for (u,) in conn.execute("SELECT url FROM urls WHERE depth = 0")]


def compute_authority(
    conn: sqlite3.Connection,
    trusted: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """Recompute ``authority`` for every page; returns a summary (pages, edges, seconds).

    ``trusted``: URLs the random jump lands on (TrustRank: a link farm that no trusted
    page leads to gains nothing by linking to itself); None or empty: every page
    (plain PageRank, which a farm of pages linking to each other does fool)."""
    started = time.perf_counter()
    say = progress or (lambda _msg: None)
    conn.execute(SCHEMA)
    say("reading the links between hosts")
    hosts = [str(h) for (h,) in conn.execute("SELECT DISTINCT host FROM pages ORDER BY host")]
    number = {h: n for n, h in enumerate(hosts)}
    pairs: set[tuple[int, int]] = set()
    rows = conn.execute(
        "SELECT p.host, l.target FROM links l JOIN pages p ON p.id = l.page_id"
        " WHERE p.duplicate_of IS NULL"
    )
    for source, target in rows:
        s, t = number.get(source), number.get(_host(target))
        if s is not None and t is not None and s != t:
            pairs.add((s, t))
    sources = [s for s, _ in sorted(pairs)]
    targets = [t for _, t in sorted(pairs)]
    trust = sorted({number[h] for h in map(_host, trusted or ()) if h in number})
    if trusted and not trust:
        say("none of the trusted URLs' hosts is in the index: every host is trusted")
    say(f"ranking {len(hosts)} hosts over {len(pairs)} host-to-host links")
    rank = pagerank(len(hosts), sources, targets, trust) if hosts else []
    scores = [r * len(hosts) for r in rank]  # 1.0: the average host
    with transaction(conn):
        conn.execute("DROP TABLE IF EXISTS temp.host_rank")
        conn.execute("CREATE TEMP TABLE host_rank (host TEXT PRIMARY KEY, score REAL, weight REAL)")
        conn.executemany(
            "INSERT INTO temp.host_rank VALUES (?, ?, ?)",
            [(h, s, weight_of(s)) for h, s in zip(hosts, scores, strict=True)],
        )
        conn.execute("DELETE FROM authority")
        conn.execute(
            "INSERT INTO authority (url, score, weight) SELECT p.url, h.score, h.weight"
            " FROM pages p JOIN temp.host_rank h ON h.host = p.host"
        )
        conn.execute("DROP TABLE temp.host_rank")
        set_setting(conn, "authority_computed_at", str(time.time()))
    return {
        "hosts": len(hosts),
        "links": len(pairs),
        "trusted": len(trust),
        "seconds": time.perf_counter() - started,
    }
