"""The server over real TLS sockets: virtual hosting, statuses, limits, log, shutdown."""

from __future__ import annotations

import hashlib
import ssl
import sys
from pathlib import Path

import pytest
import trio

from capsule_server.files import binary_sha256, large_robots
from capsule_server.server import CapsuleServer
from capsule_server.testing import (
    client_hello,
    open_stalled,
    open_tls,
    raw_request,
    running_server,
)
from geminibot.gemini.accesslog import AccessRecord
from geminibot.gemini.server import MAX_PER_ADDRESS, ServerLimits
from geminibot.gemini.urls import climbs_above_root
from geminibot.net.addresses import address_key


def split(response: bytes) -> tuple[str, bytes]:
    header, _, body = response.partition(b"\r\n")
    return header.decode("utf-8"), body


async def get(server: CapsuleServer, host: str, path: str, sni: str | None = "") -> bytes:
    assert server.port is not None
    return await raw_request(
        server.port, f"gemini://{host}{path}\r\n".encode(), host if sni == "" else sni
    )


async def test_serves_index_with_mime(server: CapsuleServer, capsules_dir: Path) -> None:
    header, body = split(await get(server, "va-groups.test", "/"))
    assert header == "20 text/gemini; charset=utf-8"
    assert body == (capsules_dir / "va-groups.test" / "index.gmi").read_bytes()


async def test_robots_txt_is_text_plain(server: CapsuleServer, capsules_dir: Path) -> None:
    header, body = split(await get(server, "wildcards.test", "/robots.txt"))
    assert header == "20 text/plain; charset=utf-8"
    assert body == (capsules_dir / "wildcards.test" / "robots.txt").read_bytes()


async def test_virtual_hosting_by_sni(server: CapsuleServer) -> None:
    a = split(await get(server, "va-groups.test", "/robots.txt"))[1]
    b = split(await get(server, "own-token.test", "/robots.txt"))[1]
    assert b"archiver" in a and b"geminibot" in b and a != b


async def test_each_host_gets_its_own_certificate(server: CapsuleServer) -> None:
    assert server.port is not None
    seen = set()
    for host in ("va-groups.test", "maze.test"):
        tls = await open_tls(server.port, host)
        der = tls.getpeercert(binary_form=True)
        assert der is not None
        seen.add(hashlib.sha256(der).hexdigest())
        await tls.send_all(f"gemini://{host}/\r\n".encode())
        await tls.aclose()
    assert len(seen) == 2


async def test_host_not_served_is_53(server: CapsuleServer) -> None:
    header, body = split(await get(server, "nowhere.test", "/"))
    assert header.startswith("53 ") and body == b""


async def test_sni_and_url_host_must_agree(server: CapsuleServer) -> None:
    header, _ = split(await get(server, "maze.test", "/", sni="va-groups.test"))
    assert header.startswith("53 ")
    header, _ = split(await get(server, "maze.test", "/", sni="unknown.test"))
    assert header.startswith("53 ")


async def test_no_sni_is_served_by_url_host(server: CapsuleServer) -> None:
    header, _ = split(await get(server, "maze.test", "/", sni=None))
    assert header == "20 text/gemini; charset=utf-8"


async def test_missing_is_51_and_directory_redirects(server: CapsuleServer) -> None:
    assert split(await get(server, "va-groups.test", "/nope.gmi"))[0] == "51 Not found"
    assert split(await get(server, "va-groups.test", "/public"))[0] == "31 /public/"


async def test_special_responses(server: CapsuleServer) -> None:
    assert split(await get(server, "robots-41.test", "/robots.txt"))[0].startswith("41 ")
    assert split(await get(server, "robots-44.test", "/robots.txt"))[0] == "44 60"
    assert split(await get(server, "robots-redirect.test", "/robots.txt"))[0] == (
        "31 /old-robots.txt"
    )


async def test_generated_bodies(server: CapsuleServer) -> None:
    header, body = split(await get(server, "robots-large.test", "/robots.txt"))
    assert header == "20 text/plain; charset=utf-8"
    assert body == large_robots(614400) and len(body) > 500 * 1024
    header, body = split(await get(server, "large-file.test", "/files/big.bin"))
    assert header == "20 application/octet-stream"
    assert len(body) == 16 * 1024 * 1024
    assert hashlib.sha256(body).hexdigest() == binary_sha256(16 * 1024 * 1024)


async def test_charset_overrides(server: CapsuleServer) -> None:
    header, body = split(await get(server, "non-utf8.test", "/latin1.gmi"))
    assert header == "20 text/gemini; charset=iso-8859-1"
    assert "Café".encode("latin-1") in body


async def test_percent_encoded_names(server: CapsuleServer) -> None:
    header, body = split(await get(server, "percent.test", "/caf%C3%A9/a.gmi"))
    assert header.startswith("20 ") and b"caf" in body
    assert split(await get(server, "percent.test", "/space%20dir/a.gmi"))[0].startswith("20 ")


async def test_access_log_fields(server: CapsuleServer, access_log: list[AccessRecord]) -> None:
    await get(server, "va-groups.test", "/public/a.gmi")
    await get(server, "va-groups.test", "/nope")
    ok, missing = access_log[-2:]
    d = ok.as_dict()
    assert set(d) >= {"time", "client", "host", "path", "status", "bytes", "duration"}
    assert d["client"] == "127.0.0.1" and d["host"] == "va-groups.test"
    assert d["path"] == "/public/a.gmi" and d["status"] == 20 and d["bytes"] > 0
    assert d["duration"] > 0 and d["time"].endswith("Z")
    assert missing.status == 51 and missing.bytes == 0


async def test_header_timeout_closes_slow_client(
    capsules_dir: Path, cert_dir: Path, access_log: list[AccessRecord]
) -> None:
    limits = ServerLimits(header_timeout=0.3)
    async with running_server(capsules_dir, cert_dir, limits, access_log.append) as srv:
        assert srv.port is not None
        tls = await open_tls(srv.port, "maze.test")
        await tls.send_all(b"gemini://maze.test/")  # never finishes the line
        with trio.fail_after(5):
            try:
                rest = await tls.receive_some(100)
            except trio.BrokenResourceError:
                rest = b""
        assert rest == b""
        # and a client that only opens TCP is dropped as well
        with trio.fail_after(5):
            raw = await trio.open_tcp_stream("127.0.0.1", srv.port)
            assert await raw.receive_some(100) == b""
    assert [r.error for r in access_log] == ["header timeout", "header timeout"]


async def test_rate_limit_answers_44_with_seconds(
    capsules_dir: Path, cert_dir: Path, access_log: list[AccessRecord]
) -> None:
    limits = ServerLimits(rate_burst=3, rate_per_second=0.5)
    async with running_server(capsules_dir, cert_dir, limits, access_log.append) as srv:
        answers = [split(await get(srv, "maze.test", "/"))[0] for _ in range(5)]
    assert answers[:3] == ["20 text/gemini; charset=utf-8"] * 3
    assert answers[3:] == ["44 2", "44 2"]
    assert [r.limited for r in access_log] == [None, None, None, "rate", "rate"]


BIG = b"gemini://large-file.test/files/big.bin\r\n"
"""16 MiB: a client that does not read holds its connection in the answering state."""


async def hold_answering(srv: CapsuleServer, count: int) -> list[trio.SSLStream[trio.SocketStream]]:
    """``count`` connections whose (large) answers the client does not read."""
    assert srv.port is not None
    holders = []
    for _ in range(count):
        tls = await open_tls(srv.port, "large-file.test")
        await tls.send_all(BIG)
        holders.append(tls)
    with trio.fail_after(10):
        while srv.answering < count:
            await trio.sleep(0.01)
    return holders


async def test_busy_server_answers_44(capsules_dir: Path, cert_dir: Path) -> None:
    limits = ServerLimits(max_connections=2, overload_retry=7, shutdown_grace=0.5)
    async with running_server(capsules_dir, cert_dir, limits) as srv:
        holders = await hold_answering(srv, 2)  # two requests being answered fill it
        assert split(await get(srv, "maze.test", "/"))[0] == "44 7"
        for tls in holders:
            await tls.transport_stream.aclose()


async def test_idle_connections_do_not_make_the_server_busy(
    capsules_dir: Path, cert_dir: Path
) -> None:
    """Connections that sent nothing (TCP only, or TLS without a request)
    from one address do not count as requests being answered: others are still served."""
    limits = ServerLimits(max_connections=4)
    async with running_server(capsules_dir, cert_dir, limits) as srv:
        assert srv.port is not None
        idle: list[trio.abc.AsyncResource] = []
        for _ in range(6):
            idle.append(await open_stalled(srv.port))
            idle.append(await open_tls(srv.port, "maze.test"))
        with trio.fail_after(10):
            while srv.open_connections < 12:
                await trio.sleep(0.01)
        answer = await raw_request(
            srv.port, b"gemini://maze.test/\r\n", "maze.test", local_address="127.0.0.2"
        )
        assert split(answer)[0] == "20 text/gemini; charset=utf-8"
        for stream in idle:
            await stream.aclose()


async def test_connections_per_address_are_capped(
    capsules_dir: Path, cert_dir: Path, access_log: list[AccessRecord]
) -> None:
    """At ``max_per_address`` connections from an address, the next one
    from there is closed before TLS; another address is served."""
    limits = ServerLimits(max_per_address=5)
    async with running_server(capsules_dir, cert_dir, limits, access_log.append) as srv:
        assert srv.port is not None
        idle = [await open_stalled(srv.port) for _ in range(5)]
        with trio.fail_after(10):
            while srv.open_connections < 5:
                await trio.sleep(0.01)
        refused = await raw_request(srv.port, b"gemini://maze.test/\r\n", "maze.test")
        assert refused == b""
        served = await raw_request(
            srv.port, b"gemini://maze.test/\r\n", "maze.test", local_address="127.0.0.2"
        )
        assert served.startswith(b"20 ")
        for stream in idle:
            await stream.aclose()
        with trio.fail_after(10):
            while srv.open_connections:
                await trio.sleep(0.01)
        again = await raw_request(srv.port, b"gemini://maze.test/\r\n", "maze.test")
        assert again.startswith(b"20 ")  # the count goes down as connections close
    assert [r.error for r in access_log].count("over the per-address connection limit") == 1


def test_ipv6_clients_are_counted_by_their_slash_64() -> None:
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:bbbb::9")
    assert address_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") != address_key("2001:db8:1:2::1")
    assert address_key("::ffff:127.0.0.5") == "127.0.0.5"
    assert address_key("127.0.0.5") == "127.0.0.5"


async def test_at_max_open_the_oldest_silent_connection_makes_room(
    capsules_dir: Path, cert_dir: Path, access_log: list[AccessRecord]
) -> None:
    """Connections that sent nothing cannot crowd out a client with a
    request: at ``max_open`` the oldest of them is closed for the newcomer."""
    limits = ServerLimits(max_open=4)
    async with running_server(capsules_dir, cert_dir, limits, access_log.append) as srv:
        assert srv.port is not None
        idle = [await open_stalled(srv.port, local_address=f"127.0.0.{n}") for n in range(3, 7)]
        with trio.fail_after(10):
            while srv.open_connections < 4:
                await trio.sleep(0.01)
        answer = await raw_request(
            srv.port, b"gemini://maze.test/\r\n", "maze.test", local_address="127.0.0.2"
        )
        assert answer.startswith(b"20 ")
        with trio.fail_after(5):
            assert await idle[0].receive_some(10) == b""  # the oldest was closed
        for stream in idle:
            await stream.aclose()
    evicted = [r for r in access_log if r.error == "closed to make room (had sent no request)"]
    assert [r.client for r in evicted] == ["127.0.0.3"]


async def test_over_max_open_is_closed_before_tls(capsules_dir: Path, cert_dir: Path) -> None:
    """When every open connection is being answered, a new one is closed before TLS."""
    limits = ServerLimits(max_open=1, shutdown_grace=0.5)
    async with running_server(capsules_dir, cert_dir, limits) as srv:
        assert srv.port is not None
        [holder] = await hold_answering(srv, 1)
        with pytest.raises((ssl.SSLError, trio.BrokenResourceError)):
            await open_tls(srv.port, "maze.test")
        await holder.transport_stream.aclose()


async def test_shutdown_lets_in_flight_request_finish(capsules_dir: Path, cert_dir: Path) -> None:
    async with running_server(capsules_dir, cert_dir) as srv:
        assert srv.port is not None
        port = srv.port
        tls = await open_tls(port, "maze.test")
        srv.shutdown()
        await trio.sleep(0.05)
        await tls.send_all(b"gemini://maze.test/\r\n")
        data = b""
        while chunk := await tls.receive_some(65536):
            data += chunk
        assert data.startswith(b"20 ")
    with pytest.raises(OSError):
        await trio.open_tcp_stream("127.0.0.1", port)


async def test_send_timeout_drops_a_client_that_does_not_read(
    capsules_dir: Path, cert_dir: Path, access_log: list[AccessRecord]
) -> None:
    limits = ServerLimits(send_timeout=0.3)
    async with running_server(capsules_dir, cert_dir, limits, access_log.append) as srv:
        assert srv.port is not None
        tls = await open_tls(srv.port, "large-file.test", handshake=False)
        await tls.send_all(b"gemini://large-file.test/files/big.bin\r\n")
        with trio.fail_after(10):
            while not access_log:  # 16 MiB do not fit in the socket buffers
                await trio.sleep(0.05)
        await tls.transport_stream.aclose()
    [record] = access_log
    assert record.error == "send timeout" and 0 < record.bytes < 16 * 1024 * 1024


async def test_shutdown_grace_cuts_idle_connections(capsules_dir: Path, cert_dir: Path) -> None:
    limits = ServerLimits(shutdown_grace=0.2, header_timeout=30.0)
    with trio.fail_after(10):  # far less than the header timeout: the grace period ended it
        async with running_server(capsules_dir, cert_dir, limits) as srv:
            assert srv.port is not None
            idle = await open_stalled(srv.port)
            await trio.sleep(0.05)
        assert await idle.receive_some(10) == b""


async def test_non_ascii_sni_is_one_log_record_not_a_traceback(
    server: CapsuleServer, access_log: list[AccessRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    """CPython reports an undecodable SNI name to sys.unraisablehook
    (a traceback on stderr per connection); the server keeps it to one log record."""
    assert server.port is not None
    reported: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    for _ in range(3):
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await stream.send_all(client_hello("café.test".encode()))
        with trio.fail_after(5):
            answer = await stream.receive_some(100)
        await stream.aclose()
        assert answer[:1] == b"\x15"  # a TLS alert, never a Gemini header
    with trio.fail_after(5):
        while len(access_log) < 3:
            await trio.sleep(0.01)
    assert reported == []
    assert [r.error for r in access_log] == ["tls: SNI name is not ASCII: caf\\xc3\\xa9.test"] * 3
    assert (await get(server, "maze.test", "/")).startswith(b"20 ")


async def test_half_close_without_line_end_logs_no_status(
    server: CapsuleServer, access_log: list[AccessRecord]
) -> None:
    """A request with no line end, then a TCP half-close (no TLS
    close_notify): nothing can be answered, and the log says so instead of claiming 59."""
    assert server.port is not None
    tls = await open_tls(server.port, "maze.test")
    await tls.send_all(b"gemini://maze.test/")
    await tls.transport_stream.send_eof()
    with trio.fail_after(5):
        try:
            received = await tls.receive_some(100)
        except trio.BrokenResourceError:
            received = b""
        while not access_log:
            await trio.sleep(0.01)
    await tls.transport_stream.aclose()
    assert not received[:2].isdigit()
    [record] = access_log
    assert record.status is None and record.meta is None
    assert record.error == "closed without close_notify before the end of the request line"
    assert record.request == "gemini://maze.test/"


async def test_256_idle_connections_from_one_address_shut_out_no_one(
    capsules_dir: Path, cert_dir: Path, access_log: list[AccessRecord]
) -> None:
    """256 idle TCP connections from one address at the
    default limits made the server answer 44 to everyone else. (Every refusal is logged
    here: the log budget is lifted.)"""
    limits = ServerLimits(log_burst=1000)
    async with running_server(capsules_dir, cert_dir, limits, access_log.append) as srv:
        assert srv.port is not None
        idle = [await open_stalled(srv.port) for _ in range(256)]
        with trio.fail_after(10):
            while len(access_log) < 256 - MAX_PER_ADDRESS:
                await trio.sleep(0.01)
        for n in (2, 3):
            answer = await raw_request(
                srv.port, b"gemini://maze.test/\r\n", "maze.test", local_address=f"127.0.0.{n}"
            )
            assert answer.startswith(b"20 ")
        for stream in idle:
            await stream.aclose()
    refused = [r for r in access_log if r.error and r.error.startswith("over the ")]
    assert len(refused) == 256 - MAX_PER_ADDRESS


@pytest.mark.parametrize(
    ("url", "climbs"),
    [
        ("gemini://h/../", True),
        ("gemini://h/..", True),
        ("gemini://h/a/../../b", True),
        ("gemini://h/%2e%2E/x", True),
        ("gemini://h/.%2e/x", True),
        ("gemini://h:1965/./../", True),
        ("gemini://h/a/../b", False),
        ("gemini://h/a//../../b", False),  # the empty segment is a level, as in RFC 3986
        ("gemini://h/./a/./", False),
        ("gemini://h/..a/...", False),
        ("gemini://h/%2e%2e%2f", False),  # an encoded slash: one segment, not a dot segment
        ("gemini://h/?q=/../../", False),  # the query is not a path
        ("gemini://h", False),
    ],
)
def test_climbs_above_root(url: str, climbs: bool) -> None:
    assert climbs_above_root(url) is climbs
