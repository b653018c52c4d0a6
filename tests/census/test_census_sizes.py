"""The size figures worked out by the database (nothing held per page) agree with the
nearest-rank quantiles of the sizes in order, at the edges: no page, one, two, many."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from geminibot.census.figures import QUANTILES, size_figures
from geminibot.store.database import Database
from geminibot.store.db import connect, transaction
from geminibot.store.pages import Page, store_page


def reference(sizes: list[int]) -> dict[str, int | float]:
    ordered = sorted(sizes)
    n = len(ordered)
    if not n:
        return {"mean": 0, **{f"p{int(q * 100)}": 0 for q in QUANTILES}, "max": 0}
    ranks = {f"p{int(q * 100)}": max(1, -(-int(q * n * 1000) // 1000)) for q in QUANTILES}
    return {
        "mean": round(sum(ordered) / n, 1),
        **{k: ordered[min(n, r) - 1] for k, r in ranks.items()},
        "max": ordered[-1],
    }


@pytest.mark.parametrize("count", [0, 1, 2, 7, 101, 1000])
def test_sizes_by_the_database(tmp_path: Path, count: int) -> None:
    rng = random.Random(count)
    sizes = [rng.randint(0, 5000) for _ in range(count)]
    db = tmp_path / "crawl.db"
    conn = connect(db)
    with transaction(conn):
        for i, size in enumerate(sizes):
            store_page(
                conn,
                Page(f"gemini://a.test/{i}", "a.test", 20, "text/gemini", 0.0, size=size),
                "researcher",
            )
        store_page(conn, Page("gemini://a.test/x", "a.test", 51, "Not found", 0.0), "researcher")
    assert size_figures(Database(db.name, conn, path=db), "a.test") == reference(sizes)
    conn.close()
