"""The order of the suite under ``pytest -n N --dist worksteal`` (``make pytest``): the
longest modules first, spread over the workers (tests/conftest.py applies it)."""

from __future__ import annotations

import pytest

#: The modules that take longest (a few tests of real processes or long crawls each),
#: longest first (the service's, which mostly wait on its processes, ahead): they start
#: first, one at the head of each worker's share, so that none of them is left to run
#: alone at the end of the suite. ``tests/test_suite_order.py`` holds each name to a
#: real file.
LONGEST = (
    "tests/service/test_service_kill.py",
    "tests/service/test_operating_doc.py",
    "tests/service/test_service_recheck.py",
    "tests/store/test_store_processes.py",
    "tests/space/test_geminispace_crawl.py",
    "tests/capsule_server/test_report_bots.py",
    "tests/space/test_geminispace_fresh.py",
    "tests/census/test_census_browser.py",
    "tests/service/test_service.py",
    "tests/portal/test_portal_public.py",
    "tests/crawl/test_crawl_kill.py",
    "tests/crawl/test_crawl_cli.py",
    "tests/why/test_why_faces.py",
    "tests/crawl/test_crawl_cli_exits.py",
    "tests/store/test_store_service.py",
    "tests/test_dependencies.py",
    "tests/test_bad_inputs.py",
)


def shares(total: int, workers: int) -> list[int]:
    """How many tests pytest-xdist's ``worksteal`` first hands each of ``workers``: the
    collection cut in order into nearly equal, contiguous parts (it later steals from the
    back of a busy worker's part for an idle one)."""
    sizes = []
    for k in range(workers):
        sizes.append(total // (workers - k))
        total -= sizes[-1]
    return sizes


def longest_first(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``items`` reordered for ``workers`` worksteal workers: the :data:`LONGEST` modules
    dealt round-robin, longest first, one to the head of each worker's share; the other
    modules after them in collection order. A module's tests stay together (its fixtures
    are set up once)."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    lanes: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for n, name in enumerate(m for m in LONGEST if m in modules):
        lanes[n % workers] += modules.pop(name)
    rest = [item for module in modules.values() for item in module]
    ordered: list[pytest.Item] = []
    for lane, size in zip(lanes, shares(len(items), workers), strict=True):
        take = max(0, size - len(lane))
        ordered += lane + rest[:take]
        del rest[:take]
    return ordered + rest
