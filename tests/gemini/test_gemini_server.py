"""The shared Gemini server with handlers other than capsules: each host its own handler
(and certificate), a handler's exception answered ``40`` and logged, the server going on.
(capsule_server's tests cover the connection flow and limits on the same server.)"""

from __future__ import annotations

from pathlib import Path

import trio

from capsule_server.testing import raw_request
from geminibot.gemini.accesslog import AccessRecord
from geminibot.gemini.server import GeminiServer, Resolution
from geminibot.urls import URL


def echo(url: URL) -> Resolution:
    return Resolution(20, "text/plain", body=f"{url.host} {url.path_query}".encode())


def broken(url: URL) -> Resolution:
    raise RuntimeError("database is locked")


async def test_handlers_per_host_and_a_failing_handler(tmp_path: Path) -> None:
    records: list[AccessRecord] = []
    server = GeminiServer({"a.test": echo, "b.test": broken}, tmp_path, log=records.append)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve, listeners)
        ok = await raw_request(port, b"gemini://a.test/x?y\r\n", "a.test")
        assert ok == b"20 text/plain\r\na.test /x?y"
        assert await raw_request(port, b"gemini://b.test/\r\n", "b.test") == (
            b"40 Internal error\r\n"
        )
        again = await raw_request(port, b"gemini://a.test/\r\n", "a.test")
        assert again.startswith(b"20 ")
        assert (await raw_request(port, b"gemini://c.test/\r\n", "a.test")).startswith(b"53 ")
        server.shutdown()
    assert sorted(p.name for p in tmp_path.glob("*.crt")) == [
        "a.test.crt",
        "b.test.crt",
        "localhost.crt",
    ]
    failed = [r for r in records if r.host == "b.test"]
    assert [(r.status, r.error) for r in failed] == [
        (40, "handler: RuntimeError: database is locked")
    ]
