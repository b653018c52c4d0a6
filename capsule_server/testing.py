"""Start a capsule server in-process on 127.0.0.1 and an ephemeral port (for tests, benches)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from capsule_server.files import load_capsules
from capsule_server.log import AccessRecord
from capsule_server.server import CapsuleServer, Limits


@asynccontextmanager
async def running_server(
    directory: Path,
    cert_dir: Path,
    limits: Limits | None = None,
    log: Callable[[AccessRecord], None] | None = None,
) -> AsyncIterator[CapsuleServer]:
    """Serve ``directory`` on 127.0.0.1:0; ``server.port`` is the port. Shuts down on exit."""
    server = CapsuleServer(load_capsules(directory), cert_dir, limits, log)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    server.port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve, listeners)
        try:
            yield server
        finally:
            server.shutdown()
