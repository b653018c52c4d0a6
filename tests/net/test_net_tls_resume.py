"""TLS session resumption in the Gemini client, against real servers on loopback: the
synthetic space's server (on several loopback addresses) and the capsule server, both
offering session tickets. Pins are
checked on resumed sessions too; names go through the client's DNS cache."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from capsule_fixtures import capsules_dir, cert_dir

from capsule_server.testing import running_server
from geminibot.crawl.cli import address_of
from geminibot.gemini import client as client_module
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.errors import CertificateChanged
from geminibot.gemini.tofu import MemoryKnownHosts, Trust
from geminibot.net.connect import Resolver, parse_connect_to

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from geminispace import Space, SpaceServer, serving  # noqa: E402
from geminispace.server import address_rules  # noqa: E402

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


async def test_a_resumed_session_is_kept_not_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a connection's session costs memory that is never freed (CPython 3.11,
    OpenSSL 3.0: about 5.6 KiB a read): it is read after full handshakes only."""
    reads: list[bool] = []
    keep = GeminiClient._keep_session

    def counted(self: GeminiClient, key: tuple[str, str, int, int], stream: object) -> None:
        reads.append(True)
        keep(self, key, stream)  # type: ignore[arg-type]

    monkeypatch.setattr(GeminiClient, "_keep_session", counted)
    async with serving(SpaceServer(SPACE)) as server:
        assert server.port is not None
        client = space_client(server.port)
        url = f"gemini://{SPACE.host(0)}/"
        assert not (await client.fetch(url)).resumed
        for _ in range(3):
            assert (await client.fetch(url)).resumed
        assert len(reads) == 1 and client.tls_sessions() == 1


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
        lookup = address_of(Resolver(rules, loopback_only=True))
        where = [await lookup(SPACE.host(i)) for i in range(4)]
        assert where == [f"127.0.1.{k} port {port}" for k in (1, 2, 1, 2)]


__all__ = ["capsules_dir", "cert_dir"]  # fixtures
