"""The portal against a hostile Gemini server made here: a body that never ends, a
certificate that changes. Loopback only; the server stops by itself."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import certs
import trio
from loopback import tcp_server
from portal_fixtures import OPEN, browser

from geminibot.net.connect import parse_connect_to
from geminibot.policy.site_policy import Bot
from geminibot.portal.app import PortalApp
from geminibot.portal.limits import PortalLimits
from geminibot.portal.upstream import Upstream, UpstreamGuard

#: The endless body stops by itself after this many bytes (a bound, never reached).
SERVER_BOUND = 256 * 1024 * 1024
CHUNK = 64 * 1024


@dataclass
class Hostile:
    port: int = 0
    contexts: list[ssl.SSLContext] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=dict)
    connections: int = 0


@asynccontextmanager
async def hostile_server() -> AsyncIterator[Hostile]:
    state = Hostile(contexts=[certs.cert_pair("evil.test", v).server_context() for v in (0, 1)])

    async def handle(tcp: trio.SocketStream) -> None:
        # from the sixth connection on (3 policy files, /a, /b): the other certificate
        context = state.contexts[1 if state.connections >= 5 else 0]
        state.connections += 1
        stream = trio.SSLStream(tcp, context, server_side=True)
        try:
            line = b""
            while not line.endswith(b"\r\n") and len(line) < 2048:
                data = await stream.receive_some(2048)
                if not data:
                    return
                line += data
            path = line.decode().strip().split("evil.test", 1)[1]
            if path in ("/robots.txt", "/robots2.txt", "/agents.txt"):
                await stream.send_all(b"51 none\r\n")
            elif path.startswith("/endless"):
                await stream.send_all(b"20 text/gemini\r\n")
                sent = 0
                while sent < SERVER_BOUND:
                    await stream.send_all(b"# more\n" * (CHUNK // 7))
                    sent += CHUNK // 7 * 7
                    state.sent[path] = sent
            else:
                await stream.send_all(b"20 text/gemini\r\n# hello\n")
            await stream.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async with tcp_server(handle) as port:
        state.port = port
        yield state


def app_for(port: int, limits: PortalLimits = OPEN) -> PortalApp:
    guard = UpstreamGuard([parse_connect_to(f"evil.test:1965:127.0.0.1:{port}")], test_range=True)
    return PortalApp(Upstream(limits, guard=guard, bot=Bot("geminibot", ("webproxy",))))


async def test_an_endless_body_stops_at_the_cap() -> None:
    cap = 256 * 1024
    limits = PortalLimits(
        rate_per_second=1e6, rate_burst=1000, min_host_delay=0.0, max_body_bytes=cap
    )
    async with hostile_server() as evil, browser(app_for(evil.port, limits)) as web:
        r = await web.get("/gemini/evil.test/endless")
        ok = await web.get("/gemini/evil.test/")  # the portal is still fine
    assert r.status_code == 502, r.text[-1500:]
    assert f"at most {cap} bytes" in r.text
    assert evil.sent["/endless"] < SERVER_BOUND  # the portal hung up, not the server
    assert ok.status_code == 200


async def test_a_changed_certificate_is_shown() -> None:
    async with hostile_server() as evil, browser(app_for(evil.port)) as web:
        first = await web.get("/gemini/evil.test/a")  # robots.txt, then /a
        await web.get("/gemini/evil.test/b")
        changed = await web.get("/gemini/evil.test/c")  # the 6th connection: a new certificate
    assert "matches the pinned certificate" in first.text
    assert certs.cert_pair("evil.test", 0).fingerprint in first.text
    assert "certificate CHANGED since first seen" in changed.text
    assert certs.cert_pair("evil.test", 1).fingerprint in changed.text
