"""The crawler's address guard, end to end (``geminibot crawl`` in the test's trio run):
a crawl of every host (``--allow-host '*'``) reaches one capsule on 127.0.0.2, allowed by
``--allow-address 127.0.0.2``, whose pages link and redirect to loopback (a Gemini server
and a web server on 127.0.0.1 that must never be contacted), private and link-local
addresses. Nothing there is contacted or indexed, and each refusal is recorded with its
reason. ``--test-range`` still crawls capsules on loopback (tests/crawl)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import trio.testing
from commands import crawl_in_trio, run_main
from webserver import serve, text

from capsule_server.testing import running_server
from geminibot.gemini.accesslog import AccessRecord
from geminibot.gemini.server import ServerLimits
from geminibot.net.dns import AddressRefused, DnsCache
from geminibot.net.guard import AddressGuard, parse_network

LIMITS = ServerLimits(rate_burst=1000, rate_per_second=1000.0)
#: Where the capsule under crawl listens: loopback, but not 127.0.0.1.
CAPSULE_ADDRESS = "127.0.0.2"


def links(secret: int, web: int) -> list[str]:
    """Every spelling of an inward address the capsule's page links to."""
    found = [
        f"gemini://127.0.0.1:{secret}/",
        f"gemini://localhost:{secret}/",
        f"gemini://inward.test:{secret}/",  # a name that leads to 127.0.0.1
        f"gemini://127.1:{secret}/",
        f"gemini://2130706433:{secret}/",
        f"gemini://0x7f000001:{secret}/",
        f"gemini://[::ffff:127.0.0.1]:{secret}/",
        f"gemini://[::1]:{secret}/",
        "gemini://10.0.0.1/",
        "gemini://192.168.1.1/",
        "gemini://172.16.0.1/",
        "gemini://169.254.169.254/",
        "gemini://[fe80::1]/",
        "gemini://[fd00::1]/",
        "gemini://0.0.0.0/",
        f"http://127.0.0.1:{web}/",
        f"http://localhost:{web}/",
        "gemini://cap.test/redirect",
    ]
    return found


async def crawl(
    tmp_path: Path, pages: dict[str, str], serve_toml: str = ""
) -> tuple[dict[str, object], sqlite3.Connection, list[AccessRecord], list[str]]:
    """Crawl a capsule on 127.0.0.2 holding ``pages`` (``{SECRET}`` and ``{WEB}`` in them
    are the inward servers' ports): the summary, the database, what the Gemini server on
    127.0.0.1 was asked and what the web server on 127.0.0.1 was asked."""
    secret_root = tmp_path / "secret" / "127.0.0.1"
    secret_root.mkdir(parents=True)
    (secret_root / "index.gmi").write_text("# Internal service\nsecret words\n")
    secret_hits: list[AccessRecord] = []
    db = tmp_path / "guard.db"
    with serve({"/": text("internal web service"), "/robots.txt": text("")}) as web:
        async with running_server(
            tmp_path / "secret", tmp_path / "certs", LIMITS, secret_hits.append
        ) as secret:
            root = tmp_path / "capsules" / "cap.test"
            root.mkdir(parents=True)
            for name, body in pages.items():
                filled = body.replace("{SECRET}", str(secret.port))
                (root / name).write_text(filled.replace("{WEB}", str(web.port)))
            if serve_toml:
                (root / "serve.toml").write_text(serve_toml.replace("{SECRET}", str(secret.port)))
            async with running_server(
                tmp_path / "capsules", tmp_path / "certs", LIMITS, hosts=(CAPSULE_ADDRESS,)
            ) as capsule:
                done = await crawl_in_trio(
                    [
                        "gemini://cap.test/",
                        "--db", str(db), "--json", "--max-time", "60",
                        "--allow-host", "*", "--follow", "http",
                        "--min-delay", "0.01",
                        "--allow-address", CAPSULE_ADDRESS,
                        "--connect-to", f"cap.test:1965:{CAPSULE_ADDRESS}:{capsule.port}",
                        "--connect-to", f"inward.test:{secret.port}:127.0.0.1:{secret.port}",
                    ]
                )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout), sqlite3.connect(db), secret_hits, web.paths()


def indexed(conn: sqlite3.Connection) -> set[str]:
    """Every URL the database holds a page row for (redirects included)."""
    return {r[0] for r in conn.execute("SELECT url FROM pages")}


def errors(conn: sqlite3.Connection) -> dict[str, str]:
    return {u: e for u, e in conn.execute("SELECT url, error FROM fetches WHERE error IS NOT NULL")}


async def test_links_to_loopback_and_private_addresses_contact_nothing(
    tmp_path: Path, in_process_clock: trio.testing.MockClock
) -> None:
    index = "# Capsule\nlichen\n" + "".join(f"=> {link} inward\n" for link in links(1, 2))
    page = index.replace(":1/", ":{SECRET}/").replace(":2/", ":{WEB}/")
    summary, conn, secret_hits, web_hits = await crawl(
        tmp_path,
        {"index.gmi": page},
        serve_toml='[[special]]\npath = "/redirect"\nstatus = 31\n'
        'meta = "gemini://127.0.0.1:{SECRET}/"\n',
    )
    assert secret_hits == [] and web_hits == []
    assert indexed(conn) == {"gemini://cap.test/", "gemini://cap.test/redirect"}
    words = conn.execute("SELECT url FROM pages_fts WHERE pages_fts MATCH 'secret OR internal'")
    assert words.fetchall() == []
    assert summary["pages"] == 2  # the home page and the redirect
    refused = errors(conn)
    inward = [u for u in refused if "cap.test" not in u]
    assert len(inward) >= 15, refused
    for url, error in refused.items():
        if "cap.test" not in url:
            assert "refused by the address guard" in error, (url, error)
    loopback = [e for u, e in refused.items() if "127.0.0.1" in u]
    assert loopback and all("not a public address (loopback)" in e for e in loopback)
    assert any("(private)" in e for e in refused.values())
    assert any("(link-local)" in e for e in refused.values())
    skipped = dict(conn.execute("SELECT host, skipped_reason FROM hosts").fetchall())
    assert skipped.pop("cap.test") is None
    assert all("refused by the address guard" in str(why) for why in skipped.values())


async def test_a_robots_txt_redirect_to_loopback_is_refused(
    tmp_path: Path, in_process_clock: trio.testing.MockClock
) -> None:
    _, conn, secret_hits, _ = await crawl(
        tmp_path,
        {"index.gmi": "# Capsule\nlichen\n"},
        serve_toml='[[special]]\npath = "/robots.txt"\nstatus = 31\n'
        'meta = "gemini://127.0.0.1:{SECRET}/robots.txt"\n',
    )
    assert secret_hits == []
    refused = errors(conn)
    assert any(
        u.startswith("gemini://127.0.0.1:") and "refused by the address guard" in e
        for u, e in refused.items()
    ), refused
    assert all("127.0.0.1" not in u for u in indexed(conn))
    # an unreachable robots.txt (RFC 9309): the capsule is left for now, nothing fetched
    assert "gemini://cap.test/" not in indexed(conn)


# --- the guard itself (no I/O) ---------------------------------------------------------

PUBLIC = ["1.1.1.1", "2001:4860:4860::8888", "[2606:4700::1111]", "64:ff9b::101:101"]
REFUSED = {
    "127.0.0.1": "loopback",
    "127.255.0.9": "loopback",
    "::1": "loopback",
    "::ffff:127.0.0.1": "loopback",
    "::ffff:7f00:1": "loopback",
    "64:ff9b::7f00:1": "loopback",  # NAT64 of 127.0.0.1
    "2002:7f00:1::1": "loopback",  # 6to4 of 127.0.0.1
    "10.1.2.3": "private",
    "172.31.0.1": "private",
    "192.168.0.1": "private",
    "fd12::1": "private",
    "169.254.169.254": "link-local",
    "fe80::1%eth0": "link-local",
    "224.0.0.1": "multicast",
    "ff02::1": "multicast",
    "0.0.0.0": "unspecified",
    "::": "unspecified",
    "100.64.0.1": "reserved",
    "240.0.0.1": "private",
}


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert AddressGuard().refusal("h.test", address) is None
    assert AddressGuard(loopback_only=True).refusal("h.test", address) is not None


@pytest.mark.parametrize(("address", "kind"), REFUSED.items())
def test_non_public_addresses_are_refused(address: str, kind: str) -> None:
    reason = AddressGuard().refusal("h.test", address)
    assert reason == f"h.test is not a public address ({kind})"


def test_allow_reaches_exactly_its_network() -> None:
    guard = AddressGuard(allow=(parse_network("127.0.0.2"), parse_network("10.1.0.0/16")))
    assert guard.refusal("h", "127.0.0.2") is None
    assert guard.refusal("h", "::ffff:127.0.0.2") is None
    assert guard.refusal("h", "10.1.255.255") is None
    assert guard.refusal("h", "127.0.0.1") is not None
    assert guard.refusal("h", "10.2.0.1") is not None


def test_test_range_reaches_loopback_only() -> None:
    guard = AddressGuard(loopback_only=True, allow=(parse_network("10.0.0.0/8"),))
    assert guard.refusal("h", "127.0.0.1") is None and guard.refusal("h", "::1") is None
    assert "only loopback" in (guard.refusal("h", "10.0.0.1") or "")


@pytest.mark.parametrize("bad", ["", "10.0.0.1/33", "10.0.0.1/24", "h.test", "1.2.3"])
def test_allow_address_needs_an_address_or_a_network(bad: str) -> None:
    with pytest.raises(ValueError, match="not an address or a network"):
        parse_network(bad)


async def test_a_guarded_cache_keeps_only_allowed_addresses() -> None:
    async def lookup(name: str, port: int) -> list[str]:
        return {"mixed.test": ["10.0.0.1", "1.1.1.1"], "inward.test": ["127.0.0.1", "::1"]}[name]

    dns = DnsCache(lookup=lookup, guard=AddressGuard())
    assert await dns.addresses("mixed.test", 1965) == ("1.1.1.1",)
    with pytest.raises(AddressRefused, match=r"inward.test is not a public address \(loopback\)"):
        await dns.addresses("inward.test", 1965)
    with pytest.raises(AddressRefused):
        await dns.addresses("[::1]", 1965)
    assert await DnsCache(lookup=lookup).addresses("inward.test", 1965) == ("127.0.0.1", "::1")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--allow-address", "10.0.0.1/8"], "not an address or a network"),
        (["--allow-address", "127.0.0.2", "--test-range"], "--allow-address is for crawls"),
    ],
)
def test_allow_address_usage_errors(tmp_path: Path, argv: list[str], said: str) -> None:
    done = run_main(["crawl", "gemini://127.0.0.1:1/", "--db", str(tmp_path / "x.db"), *argv])
    assert done.returncode == 2 and said in done.stderr
