"""The portal as the public meets it: the real ``geminibot portal`` process, and a hostile
Gemini server on loopback (for tests/portal/ and bench/portal_attack.py).

The hostile server answers by the request's host and path:

- ``/robots.txt``, ``/robots2.txt``, ``/agents.txt``: ``51`` (no policy: all allowed),
  but on a host whose name starts with ``trickle`` robots.txt's body trickles after its
  header, one byte every :data:`TRICKLE_EVERY` seconds (at most :data:`TRICKLE_BOUND`
  bytes, then it closes);
- ``/links``: :data:`LINKS` link lines (6.5 MB, under the portal's 8 MiB body limit);
- ``/quotes``: one line of :data:`QUOTES` double quotes (six times that once escaped);
- ``/bytes/N``: a gemtext body of exactly N bytes;
- ``/dotslash``: a link to ``/.//web.attacker.test/p`` (a path that starts with ``//``);
- anything else: a small page;
- but a host whose name starts with ``mute`` closes every connection without a word.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import certs
import h2.config
import h2.connection
import trio
from loopback import read_request, tcp_server

LINKS = 200_000
QUOTES = 8_000_000
#: Seconds between two bytes of a trickling robots.txt, and the most it sends.
TRICKLE_EVERY = 10.0
TRICKLE_BOUND = 100
SMALL = b"20 text/gemini\r\n# A small page\nHello.\n"
#: Seconds the portal may take to start or stop (a bound, not a measure).
BOUND = 60.0
GEMINIBOT = str(Path(sys.executable).with_name("geminibot"))


def evil_args(port: int, *more: str) -> tuple[str, ...]:
    """``geminibot portal`` options that send every ``*.test`` capsule to the hostile
    server on ``port``."""
    return ("--test-range", "--connect-to", f"*.test:1965:127.0.0.1:{port}", *more)


def links_body(count: int = LINKS) -> bytes:
    return b"".join(b"=> /page/%06d Link number %06d\n" % (i, i) for i in range(count))


@dataclass
class Hostile:
    port: int = 0
    #: (host, path) of every request, in order.
    requests: list[tuple[str, str]] = field(default_factory=list)


@asynccontextmanager
async def hostile_capsule(host: str = "127.0.0.1") -> AsyncIterator[Hostile]:
    """The hostile server on ``host`` (a free port) until the block ends."""
    state = Hostile()
    context = certs.cert_pair("evil.test", 0).server_context()
    links = b"20 text/gemini\r\n" + links_body()
    quotes = b"20 text/gemini\r\n" + b'"' * QUOTES + b"\n"

    def answer(name: str, path: str) -> bytes:
        if path in ("/robots.txt", "/robots2.txt", "/agents.txt"):
            return b"51 none\r\n"
        if path.startswith("/bytes/"):  # a gemtext body of exactly that many bytes
            return b"20 text/gemini\r\n" + b"x" * min(int(path[7:] or 0), QUOTES)
        fixed = {
            "/links": links,
            "/quotes": quotes,
            "/dotslash": b"20 text/gemini\r\n=> /.//web.attacker.test/p Web\n",
        }
        return fixed.get(path, SMALL)

    async def handle(tcp: trio.SocketStream) -> None:
        stream = trio.SSLStream(tcp, context, server_side=True)
        try:
            line = (await read_request(stream, 2048)).decode("utf-8", "replace").strip()
            found = re.match(r"gemini://([^/:]+)(?::\d+)?(/[^?]*)?", line)
            name, path = (found.group(1), found.group(2) or "/") if found else ("", "")
            state.requests.append((name, path))
            if name.startswith("trickle") and path == "/robots.txt":
                await stream.send_all(b"20 text/plain\r\n")  # then the body, byte by byte
                for _ in range(TRICKLE_BOUND):
                    await trio.sleep(TRICKLE_EVERY)
                    await stream.send_all(b"#")
            elif not name.startswith("mute"):
                await stream.send_all(answer(name, path))
            await stream.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async with tcp_server(handle, host) as port:
        state.port = port
        yield state


@dataclass
class Portal:
    proc: subprocess.Popen[bytes]
    base: str
    log: Path

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    def stderr(self) -> str:
        return self.log.read_text("utf-8", "replace")


@contextmanager
def portal_process(log: Path, *args: str, files: int | None = None) -> Iterator[Portal]:
    """``geminibot portal --port 0 ARGS`` until the block ends (then SIGINT, unless it has
    stopped already); its stderr goes to ``log``; with ``files`` its descriptor limit
    (``ulimit -n``)."""

    argv = [GEMINIBOT, "portal", "--port", "0", *args]
    if files is not None:  # the shell sets the limit, then becomes the portal
        argv = ["/bin/sh", "-c", f'ulimit -n {files} && exec "$0" "$@"', *argv]
    with log.open("wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + BOUND
        while True:
            found = re.search(r"geminibot portal: (http://\S+)/ shows", log.read_text())
            if found:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the portal did not start: {log.read_text()}")
            time.sleep(0.05)
        yield Portal(proc, found.group(1), log)
    finally:
        if proc.poll() is None:
            proc.send_signal(2)
        try:
            proc.wait(BOUND)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(BOUND)


def rss_mib(pid: int) -> tuple[float, float]:
    """(resident, peak resident) MiB of process ``pid``."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


async def raw_http(port: int, request: bytes, bound: int = 1 << 20, *, eof: bool = False) -> bytes:
    """Send ``request`` as it is to 127.0.0.1:``port`` (then end the sending side with
    ``eof``); everything answered until the server closes (or ``bound`` bytes, or
    :data:`BOUND` seconds)."""
    with trio.move_on_after(BOUND):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(request)
            if eof:
                await stream.send_eof()
            data = b""
            while len(data) < bound:
                try:
                    chunk = await stream.receive_some(65536)
                except trio.BrokenResourceError:
                    break
                if not chunk:
                    break
                data += chunk
            return data
    raise AssertionError(f"no end of the answer to {request[:60]!r} within {BOUND} s")


def header(answer: bytes, name: bytes) -> list[bytes]:
    """The values of the header field ``name`` (lower case) in an HTTP/1.1 answer."""
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    return [
        line.split(b":", 1)[1].strip()
        for line in head.split(b"\r\n")[1:]
        if line.split(b":", 1)[0] == name
    ]


def h2_client_bytes(paths: list[bytes], *, reset: bool = False) -> bytes:
    """What an HTTP/2 client sends over cleartext (prior knowledge): the preface, its
    SETTINGS, a GET for each of ``paths`` (``:path`` as it is), each reset at once with
    ``reset`` (rapid reset, CVE-2023-44487), and a PING."""
    config = h2.config.H2Configuration(
        client_side=True, validate_outbound_headers=False, normalize_outbound_headers=False
    )
    conn = h2.connection.H2Connection(config=config)
    conn.initiate_connection()
    for n, path in enumerate(paths):
        stream = 1 + 2 * n
        headers = [(b":method", b"GET"), (b":scheme", b"http"), (b":authority", b"p")]
        conn.send_headers(stream, [*headers, (b":path", path)], end_stream=True)
        if reset:
            conn.reset_stream(stream)
    conn.ping(b"12345678")
    return conn.data_to_send()
