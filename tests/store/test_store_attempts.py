"""When a claimed URL's attempt counts, on both stores (``store`` is parametrised: SQLite
and PostgreSQL): at its first request (``hold_host``), not at its claim. A claim given
back or left leased unsent never counts; a request sent and never answered does, and
after MAX_URL_ATTEMPTS of them the URL is given up (a page that kills the crawler cannot
stop every resume). A "kill" here is a new store on the same database, the old one
dropped without ``end_run`` and its host lease gone."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from store_helpers import LIMITS, Clock
from test_store import A, claim, decision, fetch

from geminibot.store.crawlstore import CrawlStore, Revisit, SqliteStore
from geminibot.store.db import connect
from geminibot.store.frontier import MAX_URL_ATTEMPTS
from geminibot.store.pgstore import PgStore

Reopen = Callable[[CrawlStore], CrawlStore]


@pytest.fixture
def killed(kind: str, db: str, clock: Clock) -> Iterator[Reopen]:
    """Kill a store's process: its host lease gone, its memory lost, nothing ended;
    returns the next process's store, recovered."""
    opened: list[Any] = []

    def kill(store: CrawlStore) -> CrawlStore:
        store.release_host("a.test", "me")
        if kind == "sqlite":
            conn = connect(db)
            opened.append(conn)
            again: CrawlStore = SqliteStore(conn, clock, LIMITS)
        else:
            again = PgStore(db, clock, LIMITS, lease_seconds=30)
            opened.append(again)
        return again

    yield kill
    for each in opened:
        each.close()


def attempts(store: CrawlStore, url: str = A) -> int:
    seen = store.previous(url)
    assert seen is not None
    return seen.attempts


def sent(store: CrawlStore, host: str = "a.test") -> str:
    """A claim whose request is about to go out: the URL claimed."""
    claimed = claim(store, host)
    assert claimed is not None
    assert store.hold_host(host, "me", claimed.url)
    return str(claimed.url)


def test_a_claim_given_back_unsent_keeps_its_attempts(store: CrawlStore) -> None:
    store.seed([A])
    for _ in range(MAX_URL_ATTEMPTS + 2):  # a cancelled visit, a policy file's wait
        assert claim(store).url == A
        assert attempts(store) == 0  # claimed, not sent: not an attempt
        store.release(A)
        assert attempts(store) == 0
    assert sent(store) == A
    store.failed(decision(A), fetch(A, status=None), Revisit(0.0))
    assert attempts(store) == 1
    store.release_host("a.test", "me")
    assert store.revisit(0.0) == 1
    for _ in range(MAX_URL_ATTEMPTS + 2):  # the earlier count stays, neither up nor down
        assert claim(store).url == A
        assert attempts(store) == 1
        store.release(A)
        assert attempts(store) == 1
    assert store.state_of(A) == ("queued", None)


def test_a_sent_claim_given_back_gives_its_attempt_back(store: CrawlStore) -> None:
    """44 SLOW DOWN (or a request cut short by the run's end): the attempt its request
    counted goes back, as before the rule moved to the send."""
    store.seed([A])
    for _ in range(MAX_URL_ATTEMPTS + 2):
        assert sent(store) == A
        assert attempts(store) == 1
        store.slowed_down(fetch(A, status=44))
        assert attempts(store) == 0
        assert sent(store) == A
        store.release(A)
        assert attempts(store) == 0
    assert store.state_of(A) == ("queued", None)


def test_one_claim_counts_once_however_many_requests(store: CrawlStore) -> None:
    """A robots2 ask and the URL's own request hold the host for one claim: one attempt."""
    store.seed([A])
    assert sent(store) == A
    assert store.hold_host("a.test", "me", A)
    assert store.hold_host("a.test", "me", None)  # a policy file's request: no claim
    assert attempts(store) == 1


def test_sent_claims_cut_short_give_the_url_up(store: CrawlStore, killed: Reopen) -> None:
    """The poison-pill rule: each kill with the request sent counts one attempt, and the
    recovery after the MAX_URL_ATTEMPTS-th records the URL failed instead of queuing it."""
    store.seed([A])
    for n in range(1, MAX_URL_ATTEMPTS):
        assert sent(store) == A
        store = killed(store)
        assert store.recover() == 1, n
        assert store.state_of(A) == ("queued", None)
        assert attempts(store) == n
    assert sent(store) == A
    store = killed(store)
    assert store.recover() == 0
    assert store.state_of(A) == (
        "failed",
        f"given up: {MAX_URL_ATTEMPTS} attempts ended abnormally",
    )


def test_claims_left_leased_unsent_are_queued_again_not_given_up(
    store: CrawlStore, killed: Reopen
) -> None:
    """A claim waiting for its turn (another host on the same address held the slot) when
    the process was killed harmed nothing: one real attempt, then three such kills in a
    row, and the URL is queued again with its one attempt, not given up."""
    store.seed([A])
    assert sent(store) == A
    store = killed(store)
    assert store.recover() == 1
    for n in range(MAX_URL_ATTEMPTS + 1):
        assert claim(store).url == A  # claimed, then killed before its request
        store = killed(store)
        assert store.recover() == 1, n
        assert store.state_of(A) == ("queued", None)
        assert attempts(store) == 1
