"""Relevance of ``geminibot search`` on the synthetic Geminispace: precision@10 and MRR.

The space (``bench/geminispace``) plants pages with known best answers: *topic* queries
(the word in the title and a heading of 8 pages, once in the body of 24 distractors),
*anchor* queries (3 pages whose own text never says the word, each linked with it from 12
other hosts; 12 distractors say it once) and *spam* queries (6 good pages on popular hosts
against a link farm of 12 unpopular hosts whose pages repeat the word and link to each
other with it). The index is what a perfect crawl of day 0 writes (``fill_store``).

Rankings compared: FTS5 bm25 (title, headings, body, url) and tantivy bm25 (plus link
text from other hosts), each alone and multiplied by link authority, computed as plain
PageRank over the host graph (every host trusted) or as TrustRank from seed hosts (the
home pages of the best-linked 5% of hosts, as a crawl started from well-known capsules).
tantivy's "×" rows are its two-stage ranking: the best ``RERANK_WINDOW`` pages by text,
re-ranked by text × authority weight × keyword-stuffing penalty.
Precision@10 counts relevant results in the first ten over ten, so its ceiling is 0.8 for
topic queries, 0.3 for anchor queries and 0.6 for spam queries.

    .venv/bin/python bench/ranking_eval.py [--urls 20000]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from geminispace import Query, Space
from geminispace.store import fill_store

from geminibot.index import search
from geminibot.index.authority import compute_authority
from geminibot.index.tantivy_index import rebuild
from geminibot.store.db import connect

HOSTS_PER_URL = 4400 / 600_000
#: Share of the (best-linked) hosts whose home pages are the trusted seeds.
SEED_SHARE = 0.05
KINDS = ("topic", "anchor", "spam")


def evaluate(
    conn: sqlite3.Connection, queries: list[Query], engine: str, authority: bool
) -> dict[str, tuple[float, float]]:
    """Per query kind and overall: (mean precision@10, mean reciprocal rank)."""
    scores: dict[str, list[tuple[float, float]]] = {k: [] for k in (*KINDS, "all")}
    for q in queries:
        results = search(conn, q.text, 10, engine=engine, authority=authority)
        hits = [r.url in q.relevant for r in results]
        precision = sum(hits) / 10
        rr = 1 / (hits.index(True) + 1) if True in hits else 0.0
        scores[q.kind].append((precision, rr))
        scores["all"].append((precision, rr))
    return {
        k: (statistics.mean(p for p, _ in v), statistics.mean(r for _, r in v))
        for k, v in scores.items()
        if v
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=20_000)
    args = parser.parse_args()
    hosts = max(30, round(args.urls * HOSTS_PER_URL))
    space = Space(hosts, args.urls)
    queries = space.queries()
    live = [i for i in range(hosts) if space.answers(i, 0)]
    seeds = [f"gemini://{space.host(i)}/" for i in live[: max(1, int(len(live) * SEED_SHARE))]]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        conn = connect(Path(tmp) / "eval.db")
        t0 = time.perf_counter()
        stored = fill_store(space, conn)
        print(
            f"{args.urls:,} URLs, {hosts} hosts, {stored:,} pages stored in "
            f"{time.perf_counter() - t0:.0f} s; {len(queries)} queries; {len(seeds)} seed hosts"
        )
        for label, trusted in (("PageRank (all hosts trusted)", []), ("TrustRank (seeds)", seeds)):
            compute_authority(conn, trusted)
            rebuild(conn)
            if not rows:
                rows.append(("FTS5 bm25", evaluate(conn, queries, "fts5", False)))
                rows.append(("tantivy bm25 + link text", evaluate(conn, queries, "tantivy", False)))
            rows.append((f"FTS5 × {label}", evaluate(conn, queries, "fts5", True)))
            rows.append((f"tantivy × {label}", evaluate(conn, queries, "tantivy", True)))
        conn.close()
    print()
    print("| ranking | " + " | ".join(f"{k} P@10 | {k} MRR" for k in (*KINDS, "all")) + " |")
    print("|---|" + "---:|" * (2 * (len(KINDS) + 1)))
    for label, result in rows:
        cells = " | ".join(f"{result[k][0]:.2f} | {result[k][1]:.2f}" for k in (*KINDS, "all"))
        print(f"| {label} | {cells} |")


if __name__ == "__main__":
    main()
