"""The crawl's clock: wall-clock seconds (the politeness state kept in the database is in
them), advanced by trio's clock once the crawl runs, so that tests under trio's mock
clock do not sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import trio


class Clock(Protocol):
    """The crawl's time: wall-clock seconds, and a way to wait until one of them."""

    def start(self) -> None:
        """The crawl starts (inside trio)."""
        ...

    def now(self) -> float: ...
    async def sleep_until(self, when: float) -> None: ...


class TrioWallClock:
    """Wall-clock time at the start, advanced by trio's clock: the politeness state kept
    in the database stays meaningful across restarts, and under trio's mock clock tests
    do not sleep."""

    def __init__(self, wall_clock: Callable[[], float] = time.time) -> None:
        self._wall0 = wall_clock()
        self._trio0: float | None = None

    def start(self) -> None:
        self._trio0 = trio.current_time()

    def now(self) -> float:
        if self._trio0 is None:
            return self._wall0
        return self._wall0 + (trio.current_time() - self._trio0)

    async def sleep_until(self, when: float) -> None:
        await trio.sleep(max(0.0, when - self.now()))


async def wait_for(event: trio.Event, clock: Clock, until: float | None) -> None:
    """Wait until ``event`` is set, or until ``until`` on ``clock`` (the crawl's clock,
    not trio's: a test's clock that jumps to the end of each wait then never sleeps for
    real); None: for the event alone."""
    async with trio.open_nursery() as nursery:

        async def until_set() -> None:
            await event.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(until_set)
        if until is not None:
            await clock.sleep_until(until)
            nursery.cancel_scope.cancel()
