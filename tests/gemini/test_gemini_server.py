"""The shared Gemini server with handlers other than capsules: each host its own handler
(and certificate), a handler's exception answered ``40`` and logged, the server going on;
a server out of descriptors. (capsule_server's tests cover the connection flow and limits
on the same server.)"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import trio

from capsule_server.testing import open_stalled, raw_request
from geminibot.gemini.accesslog import AccessRecord
from geminibot.gemini.server import GeminiServer, Resolution
from geminibot.urls import URL

#: Seconds any one wait may take (a bound on a loaded machine, never a speed test).
BOUND = 60.0


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


#: A Gemini server in a process of its own whose descriptor limit (argv[1]) leaves no
#: reserve: connections take every descriptor, so ``accept`` fails with EMFILE. It prints
#: its port, and serves until SIGTERM, its access log to argv[3].
OUT_OF_DESCRIPTORS = """
import resource, signal, sys
import trio
from pathlib import Path
from geminibot.gemini.accesslog import JsonLinesLog
from geminibot.gemini.server import GeminiServer, Resolution, ServerLimits, open_listeners

resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
limits = ServerLimits(descriptor_reserve=0, max_per_address=10_000, header_timeout=600)
with open(sys.argv[3], "a") as log:
    site = {"a.test": lambda url: Resolution(20, "text/plain", body=b"ok")}
    server = GeminiServer(site, Path(sys.argv[2]), limits, JsonLinesLog(log))

    async def main():
        listeners = await open_listeners(["127.0.0.1"], 0)
        print(listeners[0].socket.getsockname()[1], flush=True)
        with trio.open_signal_receiver(signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(server.serve, listeners)
                async for _ in signals:
                    server.shutdown()
                    break

    trio.run(main)
"""
#: The server's descriptor limit, and idle connections held (more than it has).
SERVER_DESCRIPTORS = 64
HELD = 100


async def test_out_of_descriptors_is_one_log_line_and_a_client_still_served(
    tmp_path: Path,
) -> None:
    """More idle connections than the process has descriptors: ``accept`` fails with
    EMFILE; each failure closes the oldest idle connection (one that sent nothing) so
    that a client with a request is served, and the failures make one log line (and, at
    shutdown, one that counts the others), never a traceback."""
    log = tmp_path / "access.jsonl"
    argv = [sys.executable, "-c", OUT_OF_DESCRIPTORS, str(SERVER_DESCRIPTORS)]
    proc = await trio.lowlevel.open_process(
        [*argv, str(tmp_path / "certs"), str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    with trio.fail_after(BOUND):
        port = int((await proc.stdout.receive_some(100)).decode())
        # the host's certificate loaded while descriptors are free (later, none is)
        assert (await raw_request(port, b"gemini://a.test/\r\n", "a.test")).startswith(b"20 ")
    held = [await open_stalled(port, local_address=f"127.0.2.{1 + n % 50}") for n in range(HELD)]
    try:
        # The held connections still in the listen queue keep failing accept() for a
        # while; on a busy machine the newcomer can be mid-handshake when one does, and be
        # closed with the idle ones: a client asks again, a few times at most.
        answers = []
        for _ in range(3):
            with trio.fail_after(BOUND):
                answers.append(await raw_request(port, b"gemini://a.test/\r\n", "a.test"))
            if answers[-1]:
                break
            await trio.sleep(1)  # the queue of held connections drains meanwhile
        assert answers[-1] == b"20 text/plain\r\nok", answers
    finally:
        for stream in held:
            await stream.aclose()
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(BOUND):
            await proc.wait()
    err = await proc.stderr.receive_some(65536)
    assert b"Traceback" not in err
    records = [AccessRecord.from_dict(json.loads(line)) for line in log.read_text().splitlines()]
    failed = [r.error for r in records if r.error and r.error.startswith("accept: ")]
    assert failed[0] == "accept: Too many open files"
    assert len(failed) <= 2 and all(e.endswith(" more times)") for e in failed[1:])
    evicted = [r for r in records if r.error == "closed to make room (had sent no request)"]
    assert evicted
