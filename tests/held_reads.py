"""A database read held on its worker thread until the test lets it go (by an event, never
a timer): what the tests of reads off the event loop hold (importable from ``tests/``)."""

from __future__ import annotations

import threading
from pathlib import Path

import trio

from geminibot.store.db import connect

#: How long a held read waits for its event at most: reached only when the server ran the
#: read on the event loop (then nothing else could set it), and the test fails.
HOLD_LIMIT = 30.0


class Hold:
    """Reads call :meth:`hold` on their worker thread; the test awaits
    :meth:`wait_started` for each, then :meth:`release` lets them all go on."""

    def __init__(self) -> None:
        self.started = threading.Semaphore(0)
        self.released = threading.Event()

    def hold(self) -> None:
        self.started.release()
        self.released.wait(HOLD_LIMIT)

    async def wait_started(self, count: int = 1) -> None:
        for _ in range(count):
            assert await trio.to_thread.run_sync(self.started.acquire, True, HOLD_LIMIT)

    def release(self) -> None:
        self.released.set()


def empty_crawl_db(folder: Path) -> str:
    """An empty crawl database (schema only) in ``folder``."""
    path = folder / "crawl.db"
    connect(path).close()
    return str(path)
