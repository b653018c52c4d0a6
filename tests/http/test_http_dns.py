"""The web client's connections: names through the shared DNS cache, addresses in order,
and TLS checked against the URL's host on every connection (two names on one address
never share a pooled connection). Real servers on loopback; names resolve through
/etc/hosts (``localhost``) or a made-up resolver that sends ``*.test`` to loopback."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer

import certs
import pytest
from webserver import WebServer, _handler, serve, system_tls, text

from geminibot.http.client import WebClient
from geminibot.net.connect import Resolver, parse_connect_to
from geminibot.net.dns import DnsCache, system_lookup
from geminibot.net.errors import ConnectionFailed, TLSFailure
from geminibot.net.limits import Limits

#: Time limits no answer reaches however loaded the machine (none of these tests is about
#: a time limit; those set their own), yet a hang still ends the test.
BOUNDED = Limits(connect_timeout=30, header_timeout=30, idle_timeout=30, total_timeout=60)


class Names:
    """A resolver of made-up names: each ``NAME.test`` to the addresses given, counted."""

    def __init__(self, **addresses: list[str]) -> None:
        self.addresses = addresses
        self.asked: list[str] = []

    async def __call__(self, name: str, port: int) -> list[str]:
        self.asked.append(name)
        found = self.addresses.get(name.removesuffix(".test").replace("-", "_"))
        if found is None:
            raise OSError(f"{name}: Name or service not known")
        return found


@contextmanager
def tls_server(host: str) -> Iterator[int]:
    """An HTTP/1.1 server (keep-alive) on 127.0.0.1 over TLS with ``host``'s certificate."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(WebServer({"/": text("secure")})))
    httpd.daemon_threads = True
    httpd.socket = (
        certs.cert_pair(host).server_context().wrap_socket(httpd.socket, server_side=True)
    )
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def trusting(host: str) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=certs.cert_pair(host).cert_pem.decode())


async def test_names_resolved_once_through_the_shared_cache() -> None:
    names = Names(web=["127.0.0.1"])
    cache = DnsCache(lookup=names)
    with serve({"/": text("hi")}) as web:
        for _ in range(2):  # two clients: two connections, one lookup
            async with WebClient(verify=system_tls(), limits=BOUNDED, dns=cache) as client:
                response = await client.fetch(f"http://web.test:{web.port}/")
                assert response.status == 200 and response.body == b"hi"
    assert names.asked == ["web.test"]
    assert [r.headers["Host"] for r in web.log] == [f"web.test:{web.port}"] * 2


async def test_system_resolver_and_addresses_in_order() -> None:
    """``localhost`` through /etc/hosts; a name whose first address refuses is reached
    on the next one, as the Gemini client does."""
    cache = DnsCache(lookup=system_lookup)
    with serve({"/": text("hi")}) as web:
        async with WebClient(verify=system_tls(), limits=BOUNDED, dns=cache) as client:
            assert (await client.fetch(f"http://localhost:{web.port}/")).body == b"hi"
        assert cache.lookups == 1 and cache.cached("localhost")
        names = Names(two=["127.0.0.2", "127.0.0.1"], none=[])
        async with WebClient(
            verify=system_tls(), limits=BOUNDED, dns=DnsCache(lookup=names)
        ) as client:
            assert (await client.fetch(f"http://two.test:{web.port}/")).body == b"hi"
            for name in ("none", "gone"):  # no address; no such name: one clear error
                with pytest.raises(ConnectionFailed, match=rf"{name}\.test"):
                    await client.fetch(f"http://{name}.test:{web.port}/")


async def test_tls_checks_each_name_on_a_shared_address() -> None:
    """Two names on one address: the pooled connection of the first (its certificate
    checked for it) is not reused for the second, whose name the certificate lacks."""
    names = Names(secure=["127.0.0.1"], other=["127.0.0.1"])
    with tls_server("secure.test") as port:
        async with WebClient(
            limits=BOUNDED, dns=DnsCache(lookup=names), verify=trusting("secure.test")
        ) as client:
            assert (await client.fetch(f"https://secure.test:{port}/")).body == b"secure"
            assert (await client.fetch(f"https://secure.test:{port}/")).body == b"secure"
            with pytest.raises(TLSFailure, match=r"other\.test"):
                await client.fetch(f"https://other.test:{port}/")
        async with WebClient(limits=BOUNDED, dns=DnsCache(lookup=names)) as client:
            with pytest.raises(TLSFailure):  # system CAs only: the test certificate fails
                await client.fetch(f"https://secure.test:{port}/")


async def test_connect_to_keeps_each_name_on_its_own_connection() -> None:
    """The same through --connect-to rules (no lookup at all for their address)."""
    names = Names()
    with tls_server("secure.test") as port:
        rules = [parse_connect_to(f"{h}:{port}:127.0.0.1:{port}") for h in ("secure.test", "*.x")]
        async with WebClient(
            limits=BOUNDED,
            connect_to=Resolver(rules, loopback_only=True),
            dns=DnsCache(lookup=names),
            verify=trusting("secure.test"),
        ) as client:
            assert (await client.fetch(f"https://secure.test:{port}/")).body == b"secure"
            with pytest.raises(TLSFailure, match=r"other\.x"):
                await client.fetch(f"https://other.x:{port}/")
            with pytest.raises(ConnectionFailed, match="not on this machine"):
                await client.fetch(f"https://example.org:{port}/")  # --test-range refusal
    assert names.asked == []
