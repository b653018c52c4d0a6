"""The capsule's pages read the crawl database off the event loop, a bounded number at
once: a search held (by an event, never a timer) leaves the capsule answering other
searches, its other pages and ``/check``; past :data:`SEARCH_READS` held reads a page
waits :data:`SEARCH_WAIT` for a slot, then ``44``."""

from __future__ import annotations

from collections.abc import Awaitable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from held_reads import Hold, empty_crawl_db

from geminibot.gemini.server import Resolution
from geminibot.gemini.status import Status
from geminibot.gemini.urls import parse_request
from geminibot.index import SearchResult, search
from geminibot.searchcap.app import SEARCH_READS, SEARCH_WAIT, SearchCapsule
from geminibot.store.reads import Reads
from geminibot.why.reads import CheckReads

HELD = "held"


class HeldSearch(Hold):
    """The real search, held until :meth:`release` when the query is :data:`HELD`."""

    def __call__(self, conn: Any, query: str, limit: int, *, offset: int = 0) -> list[SearchResult]:
        if query == HELD:
            self.hold()
        return search(conn, query, limit, offset=offset)


@pytest.fixture
def db(tmp_path: Path) -> str:
    return empty_crawl_db(tmp_path)


def capsule_of(db: str, held: HeldSearch) -> SearchCapsule:
    reads = Reads.of(db, limit=SEARCH_READS, wait=SEARCH_WAIT)
    return SearchCapsule(reads, held, checks=CheckReads.of(db))


async def ask(capsule: SearchCapsule, path_query: str) -> Resolution:
    answer = capsule(parse_request(f"gemini://localhost{path_query}".encode()))
    if isinstance(answer, Awaitable):
        return await answer
    return answer


def test_other_requests_are_answered_while_a_search_is_held(db: str) -> None:
    held = HeldSearch()
    order: list[tuple[str, int]] = []

    async def main(capsule: SearchCapsule) -> None:
        async def slow() -> None:
            order.append((HELD, (await ask(capsule, f"/search?{HELD}")).status))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow)
            await held.wait_started()
            for path in ("/search?other", "/hosts", "/backlinks?gemini://a.test/", "/stats"):
                order.append((path, (await ask(capsule, path)).status))
            order.append(("/check", (await ask(capsule, "/check?a.test")).status))
            held.release()

    with closing(capsule_of(db, held)) as capsule:
        trio.run(main, capsule)
    assert order == [
        ("/search?other", Status.SUCCESS),
        ("/hosts", Status.SUCCESS),
        ("/backlinks?gemini://a.test/", Status.SUCCESS),
        ("/stats", Status.SUCCESS),
        ("/check", Status.SUCCESS),
        (HELD, Status.SUCCESS),
    ]


@pytest.mark.parametrize("waited", [SEARCH_WAIT - 0.001, SEARCH_WAIT])
def test_past_the_read_limit_a_page_waits_then_is_told_busy(db: str, waited: float) -> None:
    """:data:`SEARCH_READS` searches held: one more waits for a slot, and is answered
    when one frees within :data:`SEARCH_WAIT`, ``44`` with the seconds to wait at it."""
    held = HeldSearch()
    clock = trio.testing.MockClock()
    answers: list[Resolution] = []

    async def main(capsule: SearchCapsule) -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(SEARCH_READS):
                nursery.start_soon(ask, capsule, f"/search?{HELD}")
            await held.wait_started(SEARCH_READS)

            async def one_more() -> None:
                answers.append(await ask(capsule, "/search?other"))

            nursery.start_soon(one_more)
            await trio.testing.wait_all_tasks_blocked()
            clock.jump(waited)
            await trio.testing.wait_all_tasks_blocked()
            held.release()

    with closing(capsule_of(db, held)) as capsule:
        trio.run(main, capsule, clock=clock)
    [answer] = answers
    if waited < SEARCH_WAIT:
        assert answer.status == Status.SUCCESS
    else:
        assert (answer.status, answer.meta) == (Status.SLOW_DOWN, str(int(SEARCH_WAIT)))


def test_one_read_short_of_the_limit_is_answered_at_once(db: str) -> None:
    held = HeldSearch()
    clock = trio.testing.MockClock()
    answers: list[Resolution] = []

    async def main(capsule: SearchCapsule) -> None:
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            for _ in range(SEARCH_READS - 1):
                nursery.start_soon(ask, capsule, f"/search?{HELD}")
            await held.wait_started(SEARCH_READS - 1)
            answers.append(await ask(capsule, "/search?other"))
            assert trio.current_time() == started  # it never waited
            held.release()

    with closing(capsule_of(db, held)) as capsule:
        trio.run(main, capsule, clock=clock)
    assert [a.status for a in answers] == [Status.SUCCESS]


def test_the_reads_keep_at_most_their_limit_of_connections(db: str) -> None:
    """Connections are reused read after read; close() closes them."""
    opened: list[int] = []
    reads = Reads.of(db, limit=2, wait=SEARCH_WAIT)
    real_open = reads.open_db

    def counting() -> Any:
        opened.append(1)
        return real_open()

    reads.open_db = counting

    async def main() -> None:
        for _ in range(5):
            assert await reads.run(lambda conn: conn.execute("SELECT 1").fetchone()) == (1,)

    trio.run(main)
    reads.close()
    assert len(opened) == 1
