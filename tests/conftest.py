"""Shared test setup. Being here puts ``tests/`` on ``sys.path`` (pytest's prepend import
mode), so tests anywhere below can ``import certs`` (TLS certificates for loopback servers).
"""

from typing import Any

import pytest
import trio.testing
from suite_order import longest_first

#: Real seconds the loop must be idle before the mock clock jumps to the next timer: long
#: enough that a loopback TLS exchange never looks idle, short enough to keep tests quick.
AUTOJUMP = 0.25


@pytest.fixture
def loopback_clock() -> trio.testing.MockClock:
    """A mock clock for tests that talk to real loopback servers (pytest-trio runs the
    test on it): it jumps to the next timer after :data:`AUTOJUMP` idle real seconds."""
    return trio.testing.MockClock(autojump_threshold=AUTOJUMP)


#: Real seconds of idleness before :func:`in_process_clock` jumps. Everything such a test
#: talks to runs in its own trio run, so an idle loop means every task waits on a timer;
#: the few milliseconds only give the kernel time to hand loopback bytes across.
AUTOJUMP_IN_PROCESS = 0.005


@pytest.fixture
def in_process_clock() -> trio.testing.MockClock:
    """A mock clock for tests whose clients and servers all run in the test's trio run
    (no child process): pacing and waits take no real time. A wait on a thread (the
    capsule server reads files in one) may let the clock jump to the next timer: use it
    only where a timer much shorter than any timeout always runs, as a crawl's progress
    report does (``commands.crawl_in_trio``)."""
    return trio.testing.MockClock(autojump_threshold=AUTOJUMP_IN_PROCESS)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist's controller tells each worker how it hands out the tests (a worker's
    own ``--dist`` option reads ``no``)."""
    node.workerinput["dist"] = node.config.getoption("dist")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``pytest -n N --dist worksteal`` (``make pytest``), the longest modules first,
    spread over the workers (:func:`suite_order.longest_first`)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get("dist") == "worksteal":
        items[:] = longest_first(items, int(workerinput["workercount"]))
