"""The suite's order under ``make pytest`` (tests/suite_order.py): the longest modules start
first, one at the head of each worker's share, and no test is lost or repeated."""

from __future__ import annotations

from pathlib import Path

import pytest
from suite_order import LONGEST, longest_first, shares

ROOT = Path(__file__).resolve().parents[1]


def test_the_longest_modules_exist() -> None:
    missing = [name for name in LONGEST if not (ROOT / name).is_file()]
    assert missing == []


def test_shares_cut_the_collection_as_worksteal_does() -> None:
    assert shares(10, 4) == [2, 2, 3, 3]
    assert shares(2736, 4) == [684] * 4
    assert sum(shares(7, 3)) == 7


class Item:
    """What :func:`longest_first` reads of a collected test: its node id."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


def test_each_worker_starts_with_a_longest_module() -> None:
    others = [Item(f"tests/m{n}.py::t{k}") for n in range(20) for k in range(5)]
    longest = [Item(f"{LONGEST[n]}::t{k}") for n in range(6) for k in range(2)]
    items = others[:50] + longest + others[50:]
    ordered = longest_first(items, 4)  # type: ignore[arg-type]
    assert sorted(i.nodeid for i in ordered) == sorted(i.nodeid for i in items)
    heads = [ordered[start].nodeid.split("::")[0] for start in (0, 28, 56, 84)]
    assert heads == list(LONGEST[:4])
    # the fifth and sixth follow the first and second on their workers
    assert ordered[2].nodeid.startswith(LONGEST[4])
    assert ordered[30].nodeid.startswith(LONGEST[5])


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_nothing_is_lost_or_repeated(workers: int) -> None:
    items = [Item(f"{name}::t") for name in LONGEST] + [Item(f"tests/x{n}.py::t") for n in range(3)]
    ordered = longest_first(items, workers)  # type: ignore[arg-type]
    assert sorted(i.nodeid for i in ordered) == sorted(i.nodeid for i in items)
