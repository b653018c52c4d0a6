"""Link authority: TrustRank over the graph of links between hosts, kept in the database.

Nodes are hosts (capsules), not pages: a link from a page of host A to a page of host B is
one vote of A for B, however many pages of A link to however many of B, and a host's
links to itself count for nothing (navigation, and a big capsule voting for itself).
Votes are spread evenly over the hosts a host links to (PageRank), and the random jump
lands on *trusted* hosts only (TrustRank, Gyöngyi et al. 2004): by default the crawl's
seeds' hosts, which its operator chose. With every host trusted this is plain PageRank,
which a link farm fools: hosts that link only to each other keep what they are given and
gain more for every member (docs/benchmarks.md has figures of both).

Each page gets its host's score, scaled so that 1.0 is the average host. The store's
table ``authority`` (read and written by :mod:`geminibot.store.authority`; dropping its
rows loses nothing the crawl cannot recompute) holds ``score`` and ``weight`` =
``log2(2 + AUTHORITY_SCALE * score)``, the factor search multiplies text relevance by
(:func:`weight_of`): FTS5 and PostgreSQL read it from the table at each query, the
tantivy index from its weights file (:mod:`geminibot.index.weights`). It is computed
again on a schedule (:mod:`geminibot.index.authority_job`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from geminibot.cliutil import counted
from geminibot.store.authority import Connection, Writer, host_links, page_hosts, write_sqlite

#: PageRank's damping factor (the chance a reader follows a link instead of jumping).
DAMPING = 0.85
#: Power iterations at most; stops early when the ranks move less than TOLERANCE in all.
MAX_ITERATIONS = 50
TOLERANCE = 1e-6
#: How strongly authority scales text relevance (0 turns it off).
AUTHORITY_SCALE = 1.0


def weight_of(score: float) -> float:
    return math.log2(2.0 + AUTHORITY_SCALE * score)


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


def host_graph(conn: Connection) -> tuple[list[str], set[tuple[str, str]]]:
    """The crawl's hosts and the links between them, (source host, target host), from
    either store's connection."""
    hosts = page_hosts(conn)
    known = set(hosts)
    pairs: set[tuple[str, str]] = set()
    for source, target in host_links(conn):
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


def compute_authority(
    conn: Connection,
    trusted: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
    write: Writer = write_sqlite,
) -> dict[str, float]:
    """Recompute ``authority`` for every page; returns a summary (hosts, links, trusted,
    seconds). ``conn`` is either store's connection, ``write`` that store's writer
    (:func:`geminibot.store.authority.authority_writer`).

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
