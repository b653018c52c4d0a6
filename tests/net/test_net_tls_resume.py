"""TLS session resumption in the Gemini client, against real servers on loopback: the
synthetic space's server (on several loopback addresses) and the capsule server, both
offering session tickets. Pins are
checked on resumed sessions too; names go through the client's DNS cache."""

from __future__ import annotations

import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import loopback
import pytest
import trio
from capsule_fixtures import capsules_dir, cert_dir
from certs import cert_pair

from capsule_server.testing import running_server
from geminibot.crawl.build import lookup_address
from geminibot.gemini import client as client_module
from geminibot.gemini import server as server_module
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.errors import CertificateChanged
from geminibot.gemini.tls import TLSConnection
from geminibot.gemini.tofu import MemoryKnownHosts, Trust
from geminibot.net.connect import Resolver, parse_connect_to

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from geminispace import Space, SpaceServer, serving  # noqa: E402
from geminispace.server import address_number, address_rules  # noqa: E402

SPACE = Space(12, 400, 7)


def space_client(port: int, addresses: int = 0, **kw: object) -> GeminiClient:
    rules = [parse_connect_to(r) for r in address_rules(port, addresses)]
    return GeminiClient(connect_to=Resolver(rules, loopback_only=True), **kw)  # type: ignore[arg-type]


async def test_second_connection_resumes_and_keeps_the_pin() -> None:
    async with serving(SpaceServer(SPACE)) as server:
        assert server.port is not None
        client = space_client(server.port)
        url = f"gemini://{SPACE.host(0)}/"
        first = await client.fetch(url)
        assert first.status == 20 and not first.resumed
        assert first.trust is Trust.NEW
        assert client.tls_sessions() == 1
        second = await client.fetch(url)
        assert second.status == 20 and second.resumed
        assert second.certificate == first.certificate  # the session's certificate
        assert second.trust is Trust.TRUSTED
        other = await client.fetch(f"gemini://{SPACE.host(2)}/")  # another host: its own
        assert not other.resumed and client.tls_sessions() == 2


def count_session_reads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each read of a connection's TLS session, appended."""
    reads: list[bool] = []
    read = TLSConnection.session.fget
    assert read is not None

    def counted(conn: TLSConnection) -> ssl.SSLSession | None:
        reads.append(True)
        return read(conn)

    monkeypatch.setattr(TLSConnection, "session", property(counted))
    return reads


async def test_a_resumed_session_is_kept_not_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a connection's session costs memory that is never freed (CPython 3.11,
    OpenSSL 3.0: about 5.6 KiB a read): it is read after full handshakes only."""
    reads = count_session_reads(monkeypatch)
    async with serving(SpaceServer(SPACE)) as server:
        assert server.port is not None
        client = space_client(server.port)
        url = f"gemini://{SPACE.host(0)}/"
        assert not (await client.fetch(url)).resumed
        for _ in range(3):
            assert (await client.fetch(url)).resumed
        assert len(reads) == 1 and client.tls_sessions() == 1


async def answer_now(_request: bytes) -> None:
    pass


@asynccontextmanager
async def ticket_server(
    contexts: Callable[[int], ssl.SSLContext],
    before_answer: Callable[[bytes], Awaitable[None]] = answer_now,
) -> AsyncIterator[int]:
    """A TLS server on 127.0.0.1 answering "20 text/plain" to every request (after
    ``before_answer(request)``); connection N (from 0) is served with ``contexts(N)``.
    Yields the port."""
    served = 0

    async def connection(tcp: trio.SocketStream) -> None:
        nonlocal served
        stream = trio.SSLStream(tcp, contexts(served), server_side=True)
        served += 1
        try:
            await stream.do_handshake()
            await before_answer(await loopback.read_request(stream, 2048))
            await stream.send_all(b"20 text/plain\r\nok")
            await stream.aclose()
        except trio.BrokenResourceError:
            await trio.aclose_forcefully(stream)

    async with loopback.tcp_server(connection) as port:
        yield port


async def fetch_four(port: int) -> tuple[list[bool], GeminiClient]:
    client = GeminiClient(connect_to={"h.test": ("127.0.0.1", port)})
    resumed = [(await client.fetch("gemini://h.test/")).resumed for _ in range(4)]
    return resumed, client


async def test_a_server_refusing_its_first_ticket_is_not_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new server context per connection (as jetforce does): each gives a ticket that the
    next refuses. Its session is read once, not once per connection (5.6 KiB each)."""
    reads = count_session_reads(monkeypatch)
    async with ticket_server(lambda _n: cert_pair("h.test").server_context()) as port:
        resumed, client = await fetch_four(port)
    assert resumed == [False] * 4
    assert len(reads) == 1 and client.tls_sessions() == 0


async def test_a_ticket_refused_after_resumptions_is_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Connections 0 and 1 on one server context, 2 and 3 on another (its ticket keys
    changed, as after a restart): the session is read again after the refusal."""
    reads = count_session_reads(monkeypatch)
    first, second = cert_pair("h.test").server_context(), cert_pair("h.test").server_context()
    async with ticket_server(lambda n: first if n < 2 else second) as port:
        resumed, client = await fetch_four(port)
    assert resumed == [False, True, False, True]
    assert len(reads) == 2 and client.tls_sessions() == 1


async def test_a_resumed_session_is_still_checked_against_the_pin() -> None:
    async with serving(SpaceServer(SPACE)) as server:
        assert server.port is not None
        known = MemoryKnownHosts()
        client = space_client(server.port, known_hosts=known, strict_tofu=True)
        url = f"gemini://{SPACE.host(0)}/"
        await client.fetch(url)
        known.put(SPACE.host(0), 1965, "0" * 64)  # as if another certificate was pinned
        with pytest.raises(CertificateChanged):
            await client.fetch(url)


async def test_sessions_bound_edge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "MAX_TLS_SESSIONS", 2)
    async with serving(SpaceServer(SPACE)) as server:
        assert server.port is not None
        client = space_client(server.port)
        for i in (0, 2, 4):
            await client.fetch(f"gemini://{SPACE.host(i)}/")
        assert client.tls_sessions() == 2
        assert not (await client.fetch(f"gemini://{SPACE.host(0)}/")).resumed  # forgotten
        assert (await client.fetch(f"gemini://{SPACE.host(4)}/")).resumed


async def test_capsule_server_offers_tickets_so_a_second_connection_resumes(
    capsules_dir: Path, cert_dir: Path
) -> None:
    """The shared Gemini server (capsule-server, serve-search) sends session tickets; a
    resumed connection still reaches the host its SNI names, with the same pin."""
    async with running_server(capsules_dir, cert_dir) as server:
        route = ("127.0.0.1", server.port or 0)
        client = GeminiClient(connect_to={"va-groups.test": route, "maze.test": route})
        first = await client.fetch("gemini://va-groups.test/")
        assert first.status == 20 and not first.resumed
        assert client.tls_sessions() == 1
        second = await client.fetch("gemini://va-groups.test/")
        assert second.status == 20 and second.resumed
        assert (second.body, second.certificate) == (first.body, first.certificate)
        other = await client.fetch("gemini://maze.test/", follow_redirects=False)
        assert other.status == 20 and not other.resumed
        assert other.certificate != first.certificate
        again = await client.fetch("gemini://maze.test/", follow_redirects=False)
        assert again.resumed and again.status == other.status and again.body == other.body
        assert client.tls_sessions() == 2


async def test_a_session_forgotten_during_its_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Room for one session: a.test's is forgotten (b.test's full handshake takes its place)
    while a resumed fetch of a.test is still running; that fetch ends normally."""
    monkeypatch.setattr(client_module, "MAX_TLS_SESSIONS", 1)
    b_done = trio.Event()
    context = cert_pair("a.test").server_context()

    async def a_waits_for_b(request: bytes) -> None:
        if request.startswith(b"gemini://a.test/wait"):
            await b_done.wait()

    async with ticket_server(lambda _n: context, a_waits_for_b) as port:
        client = GeminiClient(
            connect_to={name: ("127.0.0.1", port) for name in ("a.test", "b.test")}
        )
        assert not (await client.fetch("gemini://a.test/")).resumed
        results: dict[str, bool] = {}

        async def fetch(name: str, path: str) -> None:
            results[name] = (await client.fetch(f"gemini://{name}/{path}")).resumed
            if name == "b.test":
                b_done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetch, "a.test", "wait")
            nursery.start_soon(fetch, "b.test", "")
    assert results == {"a.test": True, "b.test": False}
    assert client.tls_sessions() == 1


async def test_a_server_offering_no_tickets_is_not_read_again(
    capsules_dir: Path, cert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_module, "SESSION_TICKETS", 0)
    reads = count_session_reads(monkeypatch)
    async with running_server(capsules_dir, cert_dir) as server:
        client = GeminiClient(connect_to={"va-groups.test": ("127.0.0.1", server.port or 0)})
        for _ in range(3):
            response = await client.fetch("gemini://va-groups.test/")
            assert response.status == 20 and not response.resumed
        assert client.tls_sessions() == 0
    assert len(reads) == 1  # no ticket the first time: not read again


async def test_space_on_several_loopback_addresses() -> None:
    """Hosts sent to 127.0.1.K answer there, and the crawl's address lookup puts the
    hosts of one address together (their politeness is shared)."""
    async with serving(SpaceServer(SPACE), addresses=2) as server:
        port = server.port
        assert port is not None
        client = space_client(port, 2)
        for i in (0, 1):
            assert (await client.fetch(f"gemini://{SPACE.host(i)}/")).status == 20
        rules = [parse_connect_to(r) for r in address_rules(port, 2)]
        lookup = lookup_address(Resolver(rules, loopback_only=True))
        where = [await lookup(SPACE.host(i)) for i in range(12)]
        assert where == [f"127.0.1.{address_number(i, 2)} port {port}" for i in range(12)]
        assert len(set(where)) == 2


__all__ = ["capsules_dir", "cert_dir"]  # fixtures
