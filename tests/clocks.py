"""A crawl clock for tests (importable as ``clocks``: ``tests/`` is on ``sys.path``)."""

from __future__ import annotations

import trio


class JumpClock:
    """Wall-clock time that jumps to the end of each wait instead of sleeping (what runs
    meanwhile, requests included, runs on trio's real clock with its real time limits);
    a test may also set :attr:`time` itself. Implements the crawl's ``Clock``."""

    def __init__(self, time: float = 1.7e9) -> None:
        self.time = time

    def start(self) -> None:
        pass

    def now(self) -> float:
        return self.time

    async def sleep_until(self, when: float) -> None:
        self.time = max(self.time, when)
        await trio.lowlevel.checkpoint()
