"""A researcher's crawl of capsules with known facts, then ``census --json``: every count
exact, on SQLite and on PostgreSQL (one crawled store per engine, shared by the module).

The capsules, each served over TLS on loopback by a server of its own:

- ``tls12.test``: TLS 1.2 only, self-signed EC P-256; robots.txt with a group per virtual
  agent, ``archiver`` closed out entirely, ``researcher`` in part; pages in English and
  French; a well-formed security.txt; over http too, the same robots.txt;
- ``ca.test``: TLS 1.3, RSA 2048 signed by a test CA (given to the crawl as trusted);
  robots.txt (refusing security.txt: it is never read) and a robots2.txt; a German page,
  one page in ISO-8859-1 declared as UTF-8; over http too, a robots.txt and a robots2.txt
  that differ in a path, the wait and an AI usage answer;
- ``expired.test``: TLS 1.3, self-signed EC, expired; an agents.txt; a security.txt
  expired; over http too, no robots.txt;
- ``mismatch.test``: TLS 1.3, self-signed RSA 2048 for ``other.test``; no policy file; a
  security.txt without Expires (not well-formed).

The web sides are one plain http server in the test's trio run (so the mock clock never
jumps while a request waits on a thread), answering by the Host header.

A second crawl, an indexer's, fails on capsules in known ways (:func:`broken_capsules`:
answers 31, 42 and 52, a page that never answers, a server that does not speak TLS, a
closed port). For each capsule of both crawls, the search capsule's and the portal's
``/check?HOST`` show what ``census --host HOST --json`` gives, figure for figure.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from census_certs import certificate
from check_faces import assert_census_shown, capsule_check
from commands import run_main
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from postgres_cluster import new_database

from geminibot.crawl.build import build_crawler
from geminibot.crawl.clock import TrioWallClock
from geminibot.crawl.fetcher import CRAWL_LIMITS, ProtocolFetcher, gemini_fetch
from geminibot.crawl.settings import CrawlOptions
from geminibot.gemini.client import GeminiClient
from geminibot.gemini.tls import TLSConnection
from geminibot.http.client import WebClient
from geminibot.net.connect import ConnectRule, Resolver
from geminibot.net.limits import DEFAULT_TOTAL_TIMEOUT
from geminibot.store.crawlstore import CrawlStore, SqliteStore
from geminibot.store.db import connect
from geminibot.store.pgstore import PgStore
from geminibot.store.traps import FrontierLimits

GMI = "text/gemini"
#: The capsules of :func:`capsules`, each with certificate facts of its own.
TLS_HOSTS = ("tls12.test", "ca.test", "expired.test", "mismatch.test")
ROBOTS_ALL_AGENTS = (
    b"User-agent: archiver\nDisallow: /\n\n"
    b"User-agent: indexer\nDisallow: /drafts/\n\n"
    b"User-agent: researcher\nDisallow: /private/\n\n"
    b"User-agent: webproxy\nAllow: /\n"
)
Files = dict[str, tuple[str, bytes]]
#: A file's "MIME type" that makes the server answer nothing (the client times out).
SILENT = "(silent)"
#: Seconds a server holds a connection: past the client's timeouts.
HOLD = 2 * DEFAULT_TOTAL_TIMEOUT
SECURITY = "/.well-known/security.txt"
WEB_SITES: dict[str, Files] = {
    "tls12.test": {"/robots.txt": ("text/plain", ROBOTS_ALL_AGENTS)},
    "ca.test": {
        "/robots.txt": (
            "text/plain",
            b"User-agent: *\nDisallow: /private/\nDisallow: /drafts/\nCrawl-delay: 20\n",
        ),
        "/robots2.txt": ("text/plain", b"version: 1\ntrain: no\n"),
    },
    "expired.test": {"/": ("text/plain", b"no robots.txt here")},
}


def _context(cert: x509.Certificate, key: Any, tls12_only: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.maximum_version = ssl.TLSVersion.TLSv1_2 if tls12_only else ssl.TLSVersion.TLSv1_3
    with tempfile.TemporaryDirectory() as tmp:
        cert_path, key_path = Path(tmp) / "c.pem", Path(tmp) / "k.pem"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        context.load_cert_chain(cert_path, key_path)
    return context


def capsules(ca_file: Path) -> dict[str, tuple[ssl.SSLContext, Files]]:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = certificate("Census Test CA", ca_key, ca=True)
    ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    ec_key = ec.generate_private_key(ec.SECP256R1())
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rsa_key2 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key2 = ec.generate_private_key(ec.SECP256R1())
    return {
        "tls12.test": (
            _context(certificate("tls12.test", ec_key), ec_key, tls12_only=True),
            {
                "/robots.txt": ("text/plain", ROBOTS_ALL_AGENTS),
                "/": (f"{GMI}; lang=en", b"# Home\n=> /fr.gmi French\n=> gemini://ca.test/ CA\n"),
                "/fr.gmi": (f"{GMI}; lang=fr", "# Bonjour\nUne page en français.\n".encode()),
                SECURITY: (
                    "text/plain",
                    b"Contact: mailto:security@tls12.test\nExpires: 2099-01-01T00:00:00Z\n",
                ),
            },
        ),
        "ca.test": (
            _context(
                certificate("ca.test", rsa_key, issuer=("Census Test CA", ca_key)), rsa_key, False
            ),
            {
                "/robots.txt": (
                    "text/plain",
                    b"User-agent: *\nDisallow: /private/\nDisallow: /.well-known/security.txt\n",
                ),
                "/robots2.txt": ("text/plain", b"version: 1\n"),
                SECURITY: (
                    "text/plain",
                    b"Contact: mailto:a@ca.test\nExpires: 2099-01-01T00:00:00Z\n",
                ),
                "/": (f"{GMI}; lang=de", b"# Hallo\n=> /latin.gmi Latin\n"),
                "/latin.gmi": (f"{GMI}; charset=utf-8", "# Café\n".encode("latin-1")),
            },
        ),
        "expired.test": (
            _context(certificate("expired.test", ec_key2, expired=True), ec_key2, False),
            {
                "/agents.txt": ("text/plain", b"# agents.txt\n"),
                SECURITY: (
                    "text/plain",
                    b"Contact: mailto:old@expired.test\nExpires: 2021-01-01T00:00:00Z\n",
                ),
                "/": (f"{GMI}; lang=en", b"# Old\n=> gemini://tls12.test/ tls12\n"),
            },
        ),
        "mismatch.test": (
            _context(certificate("other.test", rsa_key2), rsa_key2, False),
            {
                "/": (f"{GMI}; lang=en", b"# Elsewhere\n=> gemini://tls12.test/ tls12\n"),
                SECURITY: ("text/plain", b"Contact: mailto:me@mismatch.test\n"),
            },
        ),
    }


async def _answer(conn: TLSConnection, files: Files) -> None:
    line = b""
    while not line.endswith(b"\r\n") and len(line) < 1100:
        data = await conn.receive_some(1100)
        if not data:
            return
        line += data
    path = line.decode("utf-8", "replace").strip().split("/", 3)[-1]
    found = files.get("/" + path)
    if found is None:
        await conn.send_all(b"51 not found\r\n")
    elif found[0][:2].isdigit():  # a whole header: an answer other than 20
        await conn.send_all(f"{found[0]}\r\n".encode())
    elif found[0] == SILENT:
        await trio.sleep_forever()
    else:
        await conn.send_all(f"20 {found[0]}\r\n".encode() + found[1])


async def serve(context: ssl.SSLContext, files: Files, listener: socket.socket) -> None:
    async with trio.open_nursery() as nursery:
        while True:
            await trio.lowlevel.wait_readable(listener)
            try:
                sock, _ = listener.accept()
            except BlockingIOError:
                continue

            async def handle(sock: socket.socket = sock) -> None:
                conn = TLSConnection(sock, context)
                try:
                    with trio.move_on_after(HOLD):
                        await conn.do_handshake()
                        await _answer(conn, files)
                except OSError:
                    pass
                finally:
                    conn.close()

            nursery.start_soon(handle)


async def _answer_http(stream: trio.SocketStream) -> None:
    """One HTTP/1.1 request on ``stream`` answered from :data:`WEB_SITES` by its Host."""
    head = b""
    with trio.move_on_after(10):
        while b"\r\n\r\n" not in head and len(head) < 8192:
            data = await stream.receive_some(4096)
            if not data:
                break
            head += data
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1] if lines[0].count(" ") == 2 else "/"
        host = next(
            (v for k, _, v in (h.partition(": ") for h in lines) if k.lower() == "host"), ""
        )
        found = WEB_SITES.get(host.strip(), {}).get(path)
        status = "200 OK" if found else "404 Not Found"
        mime, body = found or ("text/plain", b"not found")
        await stream.send_all(
            f"HTTP/1.1 {status}\r\nContent-Type: {mime}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + body
        )
    await stream.aclose()


#: errors.test's robots.txt: an unknown field, and a group for a token one '-' away from
#: a known crawler's (``GPTBot``: found only with the registry of known crawlers).
ERRORS_ROBOTS = b"User-agent: *\nDisallow: /private/\nFrob: 1\n\nUser-agent: GPT-Bot\nDisallow: /\n"


def broken_capsules() -> dict[str, tuple[ssl.SSLContext, Files]]:
    """Capsules a crawl fails on, for an indexer's crawl: ``errors.test`` (a robots.txt
    that lints and refuses ``/private/``; pages answering 20, 31, 42 and 52; two pages the
    same), ``silent.test`` (its robots.txt answered, its page never: a timeout);
    :func:`crawl` adds ``tls.test``
    (not TLS: a TLS failure) and ``closed.test`` (a closed port: refused)."""
    key = ec.generate_private_key(ec.SECP256R1())
    home = b"# Errors\n" + b"".join(
        f"=> /{p}\n".encode() for p in ("a.gmi", "b.gmi", "moved", "cgi", "gone", "private/x")
    )
    page = (GMI, b"# A page\nwords of a page\n")
    return {
        "errors.test": (
            _context(certificate("errors.test", key), key, False),
            {
                "/robots.txt": ("text/plain", ERRORS_ROBOTS),
                "/": (GMI, home),
                "/a.gmi": page,
                "/b.gmi": page,
                "/moved": ("31 gemini://errors.test/a.gmi", b""),
                "/cgi": ("42 the script failed", b""),
                "/gone": ("52 gone for good", b""),
            },
        ),
        "silent.test": (
            _context(certificate("silent.test", key), key, False),
            {"/robots.txt": ("text/plain", b"User-agent: *\nAllow: /\n"), "/": (SILENT, b"")},
        ),
    }


#: The capsules of :func:`crawl` without a server that speaks TLS.
NOT_TLS, CLOSED = "tls.test", "closed.test"


async def _not_tls(stream: trio.SocketStream) -> None:
    """A server that is not a TLS one: a line of text, then the connection closed."""
    with trio.move_on_after(10):
        await stream.send_all(b"HTTP/1.0 400 Bad Request\r\n\r\n")
    await stream.aclose()


async def crawl(store: CrawlStore, ca_file: Path, broken: bool = False) -> None:
    """A crawl of :func:`capsules` (a researcher's), or with ``broken`` of
    :func:`broken_capsules` and the two without a server (an indexer's)."""
    rules = []
    served = broken_capsules() if broken else capsules(ca_file)
    async with trio.open_nursery() as nursery:
        for host, (context, files) in served.items():
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen(16)
            listener.setblocking(False)
            rules.append(ConnectRule(host, 1965, "127.0.0.1", listener.getsockname()[1]))
            nursery.start_soon(serve, context, files, listener)
        web_listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        web_port = web_listeners[0].socket.getsockname()[1]
        rules += [ConnectRule(host, 80, "127.0.0.1", web_port) for host in WEB_SITES]
        nursery.start_soon(trio.serve_listeners, _answer_http, web_listeners)
        seeds = [f"gemini://{host}/" for host in served] + [f"http://{h}/" for h in WEB_SITES]
        options = CrawlOptions(role="researcher", test_range=True, trust_ca=(ca_file,))
        if broken:
            not_tls = await trio.open_tcp_listeners(0, host="127.0.0.1")
            nursery.start_soon(trio.serve_listeners, _not_tls, not_tls)
            with socket.socket() as closed:  # a port nothing listens on
                closed.bind(("127.0.0.1", 0))
                closed_port = closed.getsockname()[1]
            rules += [
                ConnectRule(NOT_TLS, 1965, "127.0.0.1", not_tls[0].socket.getsockname()[1]),
                ConnectRule(CLOSED, 1965, "127.0.0.1", closed_port),
            ]
            seeds = [f"gemini://{host}/" for host in (*served, NOT_TLS, CLOSED)]
            options = CrawlOptions(test_range=True)
        resolver = Resolver(rules, loopback_only=True)
        async with WebClient(connect_to=resolver, limits=CRAWL_LIMITS) as web:
            fetch = ProtocolFetcher(gemini=gemini_fetch(GeminiClient(connect_to=resolver)), web=web)
            crawler = build_crawler(store, options, TrioWallClock(), fetch=fetch)
            crawler.seed(seeds)
            with trio.fail_after(600):
                await crawler.run()
        nursery.cancel_scope.cancel()


def crawled(store: CrawlStore, ca_file: Path, broken: bool = False) -> None:
    trio.run(crawl, store, ca_file, broken, clock=trio.testing.MockClock(autojump_threshold=0))


def crawled_db(request: Any, folder: Path, broken: bool = False) -> str:
    """The crawl (:func:`crawl`) into an SQLite file in ``folder`` or a new PostgreSQL
    database, as the fixture's parameter says: what ``--db`` says."""
    ca_file = folder / "ca.pem"
    if request.param == "sqlite":
        db = str(folder / "crawl.db")
        conn = connect(db)
        store: Any = SqliteStore(conn, TrioWallClock().now, FrontierLimits(), batch=True)
        crawled(store, ca_file, broken)
        store.end_run()
        conn.close()
    else:
        db = new_database(request.getfixturevalue("pg_cluster"))
        store = PgStore(db, TrioWallClock().now, FrontierLimits(), lease_seconds=30)
        crawled(store, ca_file, broken)
        store.close()
    return db


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def census_db(request: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A researcher's crawl of :func:`capsules`."""
    return crawled_db(request, tmp_path_factory.mktemp("census"))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def broken_db(request: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """An indexer's crawl of :func:`broken_capsules`, ``tls.test`` and ``closed.test``."""
    return crawled_db(request, tmp_path_factory.mktemp("broken"), broken=True)


def census(db: str, *args: str) -> dict[str, Any]:
    result = run_main(["census", "--db", db, "--json", *args])
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return {key: figure["value"] for key, figure in data["figures"].items()}


def test_census_counts_each_known_fact(census_db: str) -> None:
    got = census(census_db)
    assert got["capsules.known"] == 4
    assert got["capsules.reachable"] == 4
    assert got["tls.versions"] == {"TLSv1.3": 3, "TLSv1.2": 1}
    assert got["certs.trust"] == {"self-signed": 3, "known CA": 1}
    assert got["certs.issuers"] == {"Census Test CA": 1}
    assert got["certs.keys"] == {"EC secp256r1 256": 2, "RSA 2048": 2}
    assert got["certs.expired"] == 1
    assert got["certs.expiring"] == 0
    assert got["certs.name_mismatch"] == 1
    assert got["content.languages"] == {"en": 3, "de": 1, "fr": 1, "none declared": 1}
    assert got["content.charsets"] == {"utf-8 (default)": 5, "utf-8": 1}
    assert got["content.charset_undecodable"] == 1
    assert got["content.charset_undecodable_share"] == round(1 / 6, 4)
    assert got["uris.ok"] == 6
    assert got["uris.gemtext_share"] == 1.0
    assert got["uris.no_answer"] == 0
    assert got["robots.present"] == 2
    assert got["robots.naming"] == {"archiver": 1, "indexer": 1, "researcher": 1, "webproxy": 1}
    assert got["refused.archiver"] == {"entirely": 1, "in part": 1, "not at all": 2}
    assert got["refused.researcher"] == {"entirely": 0, "in part": 2, "not at all": 2}
    assert got["refused.webproxy"] == {"entirely": 0, "in part": 1, "not at all": 3}
    for va in ("archiver", "indexer", "researcher", "webproxy"):  # no group is strict-only
        assert got[f"refused_strict.{va}"] == got[f"refused.{va}"]
    assert got["robots2.present"] == 1
    assert got["agents.present"] == 1
    assert got["capsules.inlinks"] == {"tls12.test": 2, "ca.test": 1}
    assert got["security.present"] == 3  # ca.test's robots.txt refuses it: never read
    assert got["security.not_read"] == 1
    assert got["security.well_formed"] == 2
    assert got["security.expired"] == 1
    assert got["web.hosts"] == 3
    assert got["web.both_robots"] == 2
    assert got["web.compared"] == 2
    assert got["web.compared_in_part"] == 0
    assert got["web.policies"] == {"identical in effect": 1, "differing": 1}
    assert got["web.differences"] == {"path": 1, "wait": 1, "usage": 1}


def test_census_of_one_host_and_history(census_db: str) -> None:
    mine = census(census_db, "--host", "expired.test")
    assert mine["host.cert.days_left"] < 0
    assert mine["host.robots.fetched"] == "never" or mine["host.robots.status"] == 51
    result = run_main(["census", "--db", census_db, "--keep"])
    assert result.returncode == 0, result.stderr
    assert all(len(line) <= 80 for line in result.stdout.splitlines())
    history = run_main(["census", "--db", census_db, "--history", "--json"])
    kept = json.loads(history.stdout)
    assert len(kept) >= 1
    assert kept[-1]["figures"]["capsules.known"]["value"] == 4


def test_check_shows_each_capsules_certificate_as_census_does(census_db: str) -> None:
    """Both faces' ``/check?HOST`` show ``census --host HOST``'s figures word for word:
    the certificate's fingerprints as TOFU clients show them, its standing, expiry and
    names, the TLS version, robots.txt as fetched."""
    got = {host: assert_census_shown(census_db, host) for host in (*TLS_HOSTS,)}
    for figures in got.values():
        for key in ("host.cert.sha256", "host.cert.spki_sha256"):
            assert re.fullmatch(r"([0-9A-F]{2}:){31}[0-9A-F]{2}", figures[key]), figures[key]
        assert figures["host.cert.changes"] == 1
    assert got["tls12.test"]["host.tls"].startswith("TLSv1.2 ")
    assert got["tls12.test"]["host.robots.mime"] == "text/plain"
    assert got["tls12.test"]["host.robots.size"] == len(ROBOTS_ALL_AGENTS)
    assert got["ca.test"]["host.cert.issuer"] == "CN=Census Test CA"
    assert got["expired.test"]["host.cert.days_left"] < 0
    assert got["expired.test"]["host.robots.status"] == 51
    assert got["expired.test"]["host.robots.mime"] == "-"  # a 51's meta is no MIME type
    assert got["mismatch.test"]["host.cert.name_matches"] == 0
    assert got["mismatch.test"]["host.cert.subject"] == "CN=other.test"


def test_check_shows_each_capsules_errors_as_census_does(broken_db: str) -> None:
    """Both faces' ``/check?HOST`` of capsules the crawl failed on show ``census --host
    HOST``'s figures word for word: errors by kind, gone pages, redirects, robots.txt's
    lint findings and its last request's error, searchable pages beside the reasons to
    be out."""
    errors = assert_census_shown(broken_db, "errors.test")
    assert errors["host.errors"] == {"DNS": 0, "TLS": 0, "timeout": 0, "4x": 1, "5x": 1}
    assert errors["host.gone"] == 1 and errors["host.redirects"] == {"31": 1}
    assert errors["host.robots.lint"] == {"unknown-field": 1, "agent-near-known": 1}
    # the page's policy part (why) lints robots.txt as the census does: the same findings
    page = capsule_check(broken_db, "errors.test").splitlines()
    linted = [line for line in page if line.startswith("lint: robots.txt line ")]
    assert [line.split(": ")[2] for line in linted] == ["warning", "warning"], linted
    lint = census(broken_db)["lint.findings"]  # and so does the census of the whole crawl
    assert lint["robots.txt agent-near-known"] == lint["robots.txt unknown-field"] == 1
    assert errors["host.robots.error"] == "none"
    assert errors["host.searchable"] == 2 and errors["host.duplicates"] == 1
    assert errors["host.states"] == {"done": 5, "gone": 1, "refused": 1}
    (reason,) = errors["host.out_reasons"]
    assert reason.startswith("robots.txt: disallowed by 'Disallow: /private/' (line 2)")
    silent = assert_census_shown(broken_db, "silent.test")
    assert silent["host.errors"]["timeout"] == 1 and silent["host.states"] == {"failed": 1}
    for host, kind in ((NOT_TLS, "TLS: TLSFailure: "), (CLOSED, "other (connection): ")):
        unreached = assert_census_shown(broken_db, host)
        assert unreached["host.robots.error"].startswith(kind), unreached
        assert unreached["host.robots.outcome"] == "unreachable"
