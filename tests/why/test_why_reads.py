"""``/check``'s reads run off the event loop on both faces, a bounded number at once: a
read held (by an event, never a timer) leaves the face answering other requests, and a
``/check`` that finds every read slot taken is told "busy" (44 / 503) at
``CHECK_WAIT``, on a real SQLite crawl database."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from held_reads import Hold, empty_crawl_db

from geminibot.gemini.server import Resolution
from geminibot.gemini.status import Status
from geminibot.gemini.urls import parse_request
from geminibot.portal.app import PortalApp
from geminibot.portal.limits import PortalLimits
from geminibot.portal.upstream import Upstream, UpstreamGuard
from geminibot.searchcap.app import SearchCapsule
from geminibot.why import read_records
from geminibot.why.reads import CHECK_WAIT, CheckReads
from geminibot.why.records import HostRecords, UrlRecords

TARGET = "gemini://a.test/page.gmi"


class HeldRead(Hold):
    """The real read (:func:`geminibot.why.read_records`), held until :meth:`release`."""

    def __call__(self, conn: Any, text: str) -> UrlRecords | HostRecords:
        self.hold()
        return read_records(conn, text)


@pytest.fixture
def db(tmp_path: Path) -> str:
    return empty_crawl_db(tmp_path)


async def gemini(capsule: SearchCapsule, url: str) -> Resolution:
    answer = capsule(parse_request(url.encode()))
    return answer if isinstance(answer, Resolution) else await answer


@asynccontextmanager
async def portal(checks: CheckReads) -> AsyncIterator[httpx.AsyncClient]:
    upstream = Upstream(PortalLimits(), guard=UpstreamGuard([], test_range=True))
    app = PortalApp(upstream, checks=checks)
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://portal.test") as web:
        yield web


async def while_held(
    held: HeldRead, slow: Callable[[], Any], other: Callable[[], Any]
) -> list[tuple[str, object]]:
    """Start ``slow`` (a /check whose read ``held`` holds), answer ``other`` once the read
    has begun, then release it: what was answered, in order."""
    order: list[tuple[str, object]] = []

    async def first() -> None:
        order.append(("check", await slow()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(first)
        await held.wait_started()
        order.append(("other", await other()))
        held.release()
    return order


def test_the_capsule_answers_while_a_check_read_is_held(db: str) -> None:
    held = HeldRead()
    with closing(SearchCapsule.of(db, checks=CheckReads.of(db, read=held))) as capsule:

        async def slow() -> object:
            return (await gemini(capsule, f"gemini://localhost/check?{TARGET}")).status

        async def other() -> object:
            return (await gemini(capsule, "gemini://localhost/about")).status

        order = trio.run(while_held, held, slow, other)
    assert order == [("other", Status.SUCCESS), ("check", Status.SUCCESS)]


def test_the_portal_answers_while_a_check_read_is_held(db: str) -> None:
    held = HeldRead()

    async def main() -> list[tuple[str, object]]:
        async with portal(CheckReads.of(db, read=held)) as web:

            async def slow() -> object:
                return (await web.get("/check", params={"q": TARGET})).status_code

            async def other() -> object:
                return (await web.get("/about")).status_code

            return await while_held(held, slow, other)

    assert trio.run(main) == [("other", 200), ("check", 200)]


def test_a_check_past_the_read_limit_is_told_busy(db: str) -> None:
    """One read at once: a second /check waits CHECK_WAIT for it, then 44 (the capsule)
    or 503 (the portal), each with the seconds to wait; once the read ends, the next is
    answered."""
    held = HeldRead()
    checks = CheckReads.of(db, limit=1, read=held)
    url = f"gemini://localhost/check?{TARGET}"

    async def main() -> None:
        with closing(SearchCapsule.of(db, checks=checks)) as capsule:
            async with portal(checks) as web, trio.open_nursery() as nursery:
                nursery.start_soon(gemini, capsule, url)
                await held.wait_started()
                busy = await gemini(capsule, url)
                assert (busy.status, busy.meta) == (Status.SLOW_DOWN, str(int(CHECK_WAIT)))
                page = await web.get("/check", params={"q": TARGET})
                assert page.status_code == 503
                assert page.headers["retry-after"] == str(int(CHECK_WAIT))
                assert "busy" in page.text
                held.release()
            assert (await gemini(capsule, url)).status == Status.SUCCESS

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0.01))
