"""Shared test setup. Being here puts ``tests/`` on ``sys.path`` (pytest's prepend import
mode), so tests anywhere below can ``import certs`` (TLS certificates for loopback servers).
"""

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio.testing
from postgres_cluster import shared_postgres, stop_shared_postgres
from suite_order import longest_first

#: Where the run's processes find their one PostgreSQL cluster (:func:`pg_cluster`).
_PG_FOLDER = pytest.StashKey[Path]()

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


@pytest.fixture
def ignition_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ignition (a peer Gemini client, trust on first use) with a memory of certificates
    of this test's own, kept in ``known_hosts`` in its ``tmp_path``. Its public
    ``set_default_hosts_file`` only names another file: the certificates the process has
    seen stay in memory, so a host name that an earlier test met with another certificate
    is refused (``TofuCertificateRejection``, which a wait for a server takes for "not
    answering yet", for ever). The process's store is replaced for the test instead."""
    import cryptography.hazmat.primitives.serialization  # noqa: F401  (ignition uses it unimported)
    import ignition
    from ignition.ssl.cert_store import CertStore

    monkeypatch.setattr(ignition, "__cert_store", CertStore(str(tmp_path / "known_hosts")))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist's controller tells each worker how it hands out the tests (a worker's
    own ``--dist`` option reads ``no``)."""
    node.workerinput["dist"] = node.config.getoption("dist")
    node.workerinput["pg_folder"] = str(node.config.stash[_PG_FOLDER])


def pytest_configure(config: pytest.Config) -> None:
    """The run's controller (or the one process of a run without pytest-xdist) makes the
    folder where :func:`pg_cluster` starts the run's one PostgreSQL cluster, and stops
    that cluster and deletes the folder at the run's end, whatever its outcome."""
    if hasattr(config, "workerinput"):
        return
    folder = Path(tempfile.mkdtemp(prefix="geminibot-pg-run-"))
    config.stash[_PG_FOLDER] = folder

    def stop() -> None:
        try:
            stop_shared_postgres(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    config.add_cleanup(stop)


@pytest.fixture(scope="session")
def pg_cluster(pytestconfig: pytest.Config) -> str:
    """The connection string of the run's one real PostgreSQL cluster, which every worker
    shares (started by the first to need it: ``postgres_cluster.shared_postgres``).
    Tests make their own databases in it (``postgres_cluster.new_database``)."""
    workerinput = getattr(pytestconfig, "workerinput", None)
    if workerinput is not None:
        return shared_postgres(Path(workerinput["pg_folder"]))
    return shared_postgres(pytestconfig.stash[_PG_FOLDER])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``pytest -n N --dist worksteal`` (``make pytest``), the longest modules first,
    spread over the workers (:func:`suite_order.longest_first`)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get("dist") == "worksteal":
        items[:] = longest_first(items, int(workerinput["workercount"]))
