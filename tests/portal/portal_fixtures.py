"""The portal against capsule_server on loopback, both in one trio run (for tests/portal/).

The server serves the bundled capsules (linked into a temporary folder) plus
``input.test``, a capsule made here for what the bundled ones do not have: ``10`` and
``11`` prompts, page redirects (one into a webproxy-disallowed path, one to another scheme),
hostile text. The portal's ASGI app is called in-process through httpx; the server's
access log is kept with trio's (possibly mock) clock, so 44 waits cost no real time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trio
from capsule_fixtures import serving_on_trio_time

from capsule_server.files import bundled_capsules
from capsule_server.server import CapsuleServer
from geminibot.gemini.accesslog import AccessRecord
from geminibot.gemini.server import ServerLimits
from geminibot.net.connect import parse_connect_to
from geminibot.policy.site_policy import Bot
from geminibot.portal.app import PortalApp
from geminibot.portal.limits import PortalLimits
from geminibot.portal.upstream import Upstream, UpstreamGuard

CAPSULES = bundled_capsules()
assert CAPSULES is not None
EPOCH = 1.8e9  # where the access log's clock starts
FAST = ServerLimits(rate_burst=100_000, rate_per_second=100_000.0, header_timeout=5.0)
#: A portal that never slows a test down on its own (tests of the limits set their own).
OPEN = PortalLimits(rate_per_second=1e6, rate_burst=1_000_000, min_host_delay=0.0)

INPUT_ROBOTS = """User-agent: webproxy
Disallow: /proxy-no/

User-agent: *
Disallow: /private/
"""
INPUT_SERVE = """
[[special]]
path = "/ask"
status = 10
meta = "What is your name?"

[[special]]
path = "/secret"
status = 11
meta = "Password <please>"

[[special]]
path = "/moved"
status = 31
meta = "/page.gmi"

[[special]]
path = "/sneaky"
status = 30
meta = "/proxy-no/a.gmi"

[[special]]
path = "/away"
status = 30
meta = "https://example.org/"

[[special]]
path = "/cert"
status = 60
meta = "Show me a certificate"

[[special]]
path = "/gone"
status = 52
meta = "It went away"
"""
INPUT_PAGE = """# Input & <tests>
Text with <script>alert(1)</script> in it.
=> /ask Ask me
=> page.gmi Relative page
=> gemini://va-groups.test/public/a.gmi Another capsule
=> https://example.org/ A web page
=> javascript:alert(1) Not a link
* one
* two
> quoted "text"
```ascii art of a cat
 /\\_/\\
( o.o )
```
"""


def make_input_capsule(root: Path) -> None:
    cap = root / "input.test"
    (cap / "proxy-no").mkdir(parents=True)
    (cap / "robots.txt").write_text(INPUT_ROBOTS)
    (cap / "serve.toml").write_text(INPUT_SERVE)
    (cap / "index.gmi").write_text(INPUT_PAGE)
    (cap / "page.gmi").write_text("# A page\nplain text\n")
    (cap / "proxy-no" / "a.gmi").write_text("# not for web proxies\n")


@dataclass
class Hit:
    at: float
    host: str
    path: str
    status: int | None
    meta: str


@dataclass
class Served:
    server: CapsuleServer
    root: Path
    records: list[AccessRecord] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)

    @property
    def port(self) -> int:
        assert self.server.port is not None
        return self.server.port

    def paths(self, host: str) -> list[str]:
        return [h.path for h in self.hits if h.host == host]


@asynccontextmanager
async def serving(root: Path, cert_dir: Path, limits: ServerLimits = FAST) -> AsyncIterator[Served]:
    """Every bundled capsule plus input.test under ``root``, on 127.0.0.1."""
    root.mkdir(parents=True, exist_ok=True)
    for folder in sorted(CAPSULES.glob("*.test")):  # type: ignore[union-attr]
        (root / folder.name).symlink_to(folder, target_is_directory=True)
    make_input_capsule(root)
    served: Served

    def log(r: AccessRecord) -> None:
        served.records.append(r)
        if r.host is not None and r.path is not None:
            served.hits.append(Hit(trio.current_time(), r.host, r.path, r.status, r.meta or ""))

    async with serving_on_trio_time(root, cert_dir, limits, log, EPOCH) as server:
        served = Served(server, root)
        yield served


def make_app(
    port: int,
    limits: PortalLimits = OPEN,
    *,
    capsule: str | None = None,
    test_range: bool = True,
    strict: bool = False,
) -> PortalApp:
    guard = UpstreamGuard(
        [parse_connect_to(f"*.test:1965:127.0.0.1:{port}")], test_range=test_range
    )
    t0 = trio.current_time()
    upstream = Upstream(
        limits,
        guard=guard,
        bot=Bot("geminibot", ("webproxy",), strict=strict),
        wall_clock=lambda: EPOCH + trio.current_time() - t0,
    )
    from geminibot.gemini.urls import parse_url

    return PortalApp(
        upstream,
        capsule=parse_url(capsule) if capsule else None,
    )


def browser(app: PortalApp, client: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(client, 50000))  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url="http://portal.test")


@asynccontextmanager
async def portal(
    root: Path,
    cert_dir: Path,
    server_limits: ServerLimits = FAST,
    limits: PortalLimits = OPEN,
    **options: Any,
) -> AsyncIterator[tuple[Served, httpx.AsyncClient]]:
    """The capsules served, and a web client talking to a portal in front of them."""
    async with serving(root, cert_dir, server_limits) as served:  # noqa: SIM117 - needs served
        async with browser(make_app(served.port, limits, **options)) as web:
            yield served, web
