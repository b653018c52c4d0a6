"""Two independent clients get the expected status, meta and body for every capsule.

Peers: the ``ignition`` library (blocking, run in a thread; names ending in ``.test`` are
resolved to 127.0.0.1 by wrapping ``socket.getaddrinfo``) and geminibot's own trio client
(``connect_to`` sends every host to 127.0.0.1:PORT; SNI stays the host name).
Expected answers are written out here, bodies come from the capsule files on disk. One
server (on a thread of its own) answers the whole module: no test changes what it serves.
"""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import cryptography.hazmat.primitives.serialization  # noqa: F401  (before ignition, see PEERS.md)
import ignition
import pytest
import trio
from capsule_fixtures import TEST_LIMITS
from commands import run_main_bytes
from loopback import served_on_a_thread

from capsule_server.files import binary_sha256, large_robots, maze_page
from capsule_server.server import CapsuleServer
from capsule_server.testing import running_server
from geminibot.gemini.client import GeminiClient
from geminibot.net.limits import Limits

GMI = "text/gemini; charset=utf-8"
TXT = "text/plain; charset=utf-8"
BIG = 16 * 1024 * 1024

#: A case's body: a file path in the capsule, bytes, or None (empty).
Body = str | bytes | None


class Case(NamedTuple):
    """A request to the server and the answer both clients must get."""

    host: str
    path: str
    status: int
    meta: str
    body: Body


def case_id(case: Case) -> str:
    return case.host + case.path


EXPECTED: list[tuple[str, str, int, str, Body]] = [
    ("va-groups.test", "/robots.txt", 20, TXT, "robots.txt"),
    ("va-groups.test", "/public/a.gmi", 20, GMI, "public/a.gmi"),
    ("va-conflict.test", "/robots.txt", 20, TXT, "robots.txt"),
    ("own-token.test", "/robots.txt", 20, TXT, "robots.txt"),
    ("wildcards.test", "/robots.txt", 20, TXT, "robots.txt"),
    ("wildcards.test", "/docs/b.pdf", 20, "application/pdf", "docs/b.pdf"),
    ("percent.test", "/robots.txt", 20, TXT, "robots.txt"),
    ("percent.test", "/caf%C3%A9/a.gmi", 20, GMI, "café/a.gmi"),
    ("percent.test", "/%E2%82%AC/a.gmi", 20, GMI, "€/a.gmi"),
    ("percent.test", "/space%20dir/a.gmi", 20, GMI, "space dir/a.gmi"),
    ("robots-missing.test", "/robots.txt", 51, "Not found", None),
    ("robots-41.test", "/robots.txt", 41, "robots.txt is being regenerated", None),
    ("robots-44.test", "/robots.txt", 44, "60", None),
    ("robots-redirect.test", "/robots.txt", 31, "/old-robots.txt", None),
    (
        "robots-redirect.test",
        "/old-robots.txt",
        30,
        "gemini://robots-redirect.test/policy/robots.txt",
        None,
    ),
    ("robots-redirect.test", "/policy/robots.txt", 20, TXT, "policy/robots.txt"),
    ("robots-large.test", "/robots.txt", 20, TXT, large_robots(614400)),
    ("robots-malformed.test", "/robots.txt", 20, TXT, "robots.txt"),
    ("robots2-chain.test", "/robots2.txt", 20, TXT, "robots2.txt"),
    ("robots2-chain.test", "/policies/robots2-b.txt", 20, TXT, "policies/robots2-b.txt"),
    ("robots2-ask.test", "/robots.txt", 20, TXT, "robots.txt"),
    ("robots2-ask.test", "/robots2.txt", 20, TXT, "robots2.txt"),
    ("robots-redirect.test", "/hops/1", 31, "/hops/2", None),
    ("agents-good.test", "/agents.txt", 20, TXT, "agents.txt"),
    ("agents-bad.test", "/agents.txt", 20, TXT, "agents.txt"),
    ("robots-v2.test", "/robots.txt", 20, TXT, "robots.txt"),
    ("honeypot.test", "/robots2.txt", 20, TXT, "robots2.txt"),
    ("honeypot.test", "/trap/a.gmi", 20, GMI, "trap/a.gmi"),
    ("maze.test", "/maze/", 20, GMI, maze_page("/maze/", "/maze/")),
    ("maze.test", "/maze/0123abcd/", 20, GMI, maze_page("/maze/", "/maze/0123abcd/")),
    ("non-utf8.test", "/latin1.gmi", 20, "text/gemini; charset=iso-8859-1", "latin1.gmi"),
    ("non-utf8.test", "/sjis.txt", 20, "text/plain; charset=shift_jis", "sjis.txt"),
    ("non-utf8.test", "/mislabelled.gmi", 20, GMI, "mislabelled.gmi"),
    ("large-file.test", "/robots.txt", 20, TXT, "robots.txt"),
    ("why.test", "/robots.txt", 20, TXT, "robots.txt"),
    ("why.test", "/copy.gmi", 20, GMI, "copy.gmi"),
    ("no-such-host.test", "/", 53, "This server does not serve that host", None),
    ("va-groups.test", "/nope.gmi", 51, "Not found", None),
    ("ops.test", "/notes.txt", 20, TXT + "; lang=en", "notes.txt"),
    ("de.ops.test", "/gedichte.gmi", 20, GMI + "; lang=de", "gedichte.gmi"),
    ("feeds.test", "/robots.txt", 20, TXT, "robots.txt"),
    ("feeds.test", "/log/index.gmi", 20, GMI, "log/index.gmi"),
    ("feeds.test", "/atom.xml", 20, "application/atom+xml; charset=utf-8", "atom.xml"),
    ("feeds.test", "/rss.xml", 20, "application/rss+xml; charset=utf-8", "rss.xml"),
    ("feeds.test", "/twtxt.txt", 20, TXT, "twtxt.txt"),
]
HOSTS = sorted({host for host, *_ in EXPECTED} - {"no-such-host.test"})
#: Capsules whose pages say their language in the MIME type (the search operators' pair).
LANG = {"ops.test": "; lang=en", "de.ops.test": "; lang=de"}
CASES = [Case(*c) for c in EXPECTED] + [
    Case(h, "/", 20, GMI + LANG.get(h, ""), "index.gmi") for h in HOSTS
]
README_CASES = [Case(h, "/README.gmi", 20, GMI + LANG.get(h, ""), "README.gmi") for h in HOSTS]


def expected_body(capsules_dir: Path, host: str, body: Body) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    return (capsules_dir / host / body).read_bytes()


@pytest.fixture(scope="module")
def server(capsules_dir: Path, cert_dir: Path) -> Iterator[CapsuleServer]:
    """The bundled capsules, served for the whole module (tests/capsule_fixtures.py serves
    them per test, in the test's own trio run)."""
    with served_on_a_thread(lambda: running_server(capsules_dir, cert_dir, TEST_LIMITS)) as srv:
        yield srv


def test_every_capsule_is_covered(capsules_dir: Path) -> None:
    served = {p.name for p in capsules_dir.iterdir() if p.is_dir()}
    assert served == set(HOSTS)


@pytest.fixture
def dot_test_resolves_to_loopback(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = socket.getaddrinfo

    def fake(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.endswith(".test"):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    yield


def client_for(server: CapsuleServer) -> GeminiClient:
    port = server.port
    assert port is not None
    return GeminiClient(
        connect_to=lambda host, _port: ("127.0.0.1", port),
        limits=Limits(max_body_size=2 * BIG),
    )


@pytest.mark.usefixtures("dot_test_resolves_to_loopback", "ignition_hosts")
@pytest.mark.parametrize("case", CASES, ids=case_id)
async def test_ignition(server: CapsuleServer, capsules_dir: Path, case: Case) -> None:
    url = f"gemini://{case.host}:{server.port}{case.path}"
    response = await trio.to_thread.run_sync(lambda: ignition.request(url, timeout=10))
    assert (int(response.status), response.meta) == (case.status, case.meta)
    got = response.raw_body or b""
    assert got == expected_body(capsules_dir, case.host, case.body)


@pytest.mark.parametrize("case", CASES + README_CASES, ids=case_id)
async def test_geminibot_client(server: CapsuleServer, capsules_dir: Path, case: Case) -> None:
    url = f"gemini://{case.host}{case.path}"
    response = await client_for(server).fetch(url, follow_redirects=False)
    assert (response.status, response.meta) == (case.status, case.meta)
    assert response.body == expected_body(capsules_dir, case.host, case.body)
    assert not response.possibly_truncated  # the server ends with close_notify


async def test_large_binary_with_both_clients(server: CapsuleServer) -> None:
    response = await client_for(server).fetch("gemini://large-file.test/files/big.bin")
    assert (response.status, response.meta) == (20, "application/octet-stream")
    assert len(response.body) == BIG
    assert hashlib.sha256(response.body).hexdigest() == binary_sha256(BIG)


@pytest.mark.usefixtures("dot_test_resolves_to_loopback", "ignition_hosts")
async def test_large_binary_with_ignition(server: CapsuleServer) -> None:
    url = f"gemini://large-file.test:{server.port}/files/big.bin"
    response = await trio.to_thread.run_sync(lambda: ignition.request(url, timeout=30))
    assert len(response.raw_body) == BIG
    assert hashlib.sha256(response.raw_body).hexdigest() == binary_sha256(BIG)


async def test_client_follows_the_robots_redirect_chain(server: CapsuleServer) -> None:
    response = await client_for(server).fetch("gemini://robots-redirect.test/robots.txt")
    assert response.status == 20 and len(response.redirects) == 2
    assert b"Disallow: /private/" in response.body


FETCH_CASES = [
    ("va-groups.test", "/robots.txt", "20 text/plain; charset=utf-8", "robots.txt"),
    ("non-utf8.test", "/latin1.gmi", "20 text/gemini; charset=iso-8859-1", "latin1.gmi"),
    ("robots-44.test", "/robots.txt", "44 60", None),
    ("robots-redirect.test", "/robots.txt", "20 text/plain; charset=utf-8", "policy/robots.txt"),
]


@pytest.mark.parametrize(("host", "path", "header", "body"), FETCH_CASES)
def test_geminibot_fetch_command(
    server: CapsuleServer,
    capsules_dir: Path,
    tmp_path: Path,
    host: str,
    path: str,
    header: str,
    body: str | None,
) -> None:
    """The ``geminibot fetch`` command line, as a user would run it against the server
    (its ``main``, in this process: commands.run_main)."""
    argv = [
        "fetch", f"gemini://{host}{path}", "--raw",
        "--connect-to", f"{host}:1965:127.0.0.1:{server.port}",
        "--known-hosts", str(tmp_path / "known_hosts"),
    ]  # fmt: skip
    proc = run_main_bytes(argv)
    assert proc.stderr.decode().splitlines()[-1] == header
    assert proc.returncode == (0 if header.startswith("20") else 1)
    assert proc.stdout == expected_body(capsules_dir, host, body)
