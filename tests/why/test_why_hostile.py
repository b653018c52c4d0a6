"""Hostile text in what the crawl recorded, and hostile input to every face of
``geminibot why``: text from the network is escaped for the terminal, gemtext and HTML;
what is asked about is bounded (:data:`geminibot.why.MAX_TARGET_LENGTH`) and each face's
own limits (the portal's per-client rate) hold for ``/check`` as for every request. The
database is a real SQLite crawl database, its rows written as a crawl writes them."""

from __future__ import annotations

import html
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import trio
from commands import answer_of, run_main

from geminibot.census.host import host_census
from geminibot.gemini.errors import RequestTooLong
from geminibot.gemini.status import Status
from geminibot.gemini.urls import parse_request
from geminibot.portal.app import PortalApp
from geminibot.portal.limits import PortalLimits
from geminibot.portal.upstream import Upstream, UpstreamGuard
from geminibot.searchcap.app import SearchCapsule
from geminibot.store.crawlstore import SqliteStore
from geminibot.store.database import open_database
from geminibot.store.db import connect
from geminibot.store.records import TLSRecord
from geminibot.store.traps import FrontierLimits
from geminibot.why import MAX_TARGET_LENGTH
from geminibot.why.reads import CheckReads
from geminibot.why.render import MAX_COUNTS, MAX_LABEL, census_row, census_sections, one_line

EVIL = "\x1b[31mred\x1b]0;title\x07\n=> gemini://evil.test/ click\n# owned <script>x</script>\u202e"
PAGE = "gemini://bad.test/page.gmi"
REFUSED = "gemini://bad.test/no.gmi"
REFUSED_BY = f"robots.txt: disallowed by '{EVIL}' (line 2)"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "crawl.db"
    conn = connect(path)
    conn.execute("INSERT INTO hosts (host, first_seen) VALUES ('bad.test', 0)")
    for url, state, reason in (
        (PAGE, "done", None),
        (REFUSED, "refused", REFUSED_BY),
    ):
        conn.execute(
            "INSERT INTO urls (url, host, path, has_query, depth, state, reason, updated_at)"
            " VALUES (?, 'bad.test', '/', 0, 1, ?, ?, 0)",
            (url, state, reason),
        )
    conn.execute(
        "INSERT INTO pages (url, host, status, meta, size, fetched_at, title, text_indexed)"
        " VALUES (?, 'bad.test', 20, ?, 1, 0, ?, 1)",
        (PAGE, EVIL, EVIL),
    )
    conn.execute(
        "INSERT INTO fetches (url, host, status, meta, error, started_at, duration)"
        " VALUES (?, 'bad.test', NULL, '', ?, 0, 1)",
        (PAGE, EVIL),
    )
    conn.execute(
        "INSERT INTO robots (host, name, fetched_at, expires_at, outcome, reason, status, body)"
        " VALUES ('bad.test', 'robots.txt', 0, 1, 'success', ?, 20, ?)",
        (EVIL, f"User-agent: *\nDisallow: /no.gmi\n# {EVIL}\n".encode()),
    )
    conn.execute(  # its MIME type: the census shows it
        "INSERT INTO fetches (url, host, status, meta, started_at, duration)"
        " VALUES ('gemini://bad.test/robots.txt', 'bad.test', 20, ?, 0, 1)",
        (EVIL,),
    )
    store = SqliteStore(conn, lambda: 0.0, FrontierLimits())
    store.saw_tls(  # a certificate whose names are the attacker's
        TLSRecord("bad.test", "TLSv1.3", "TLS_AES_256_GCM_SHA384", "AB:CD", "EF:01",
                  f"CN={EVIL}", f"O={EVIL}", (EVIL,), "self-signed", "EC secp256r1", 256,
                  0.0, 4e9, False, True, 0.0)
    )  # fmt: skip
    store.flush()
    conn.close()
    return path


def capsule(db: Path, query: str | None) -> tuple[int, str, str]:
    url = "gemini://localhost/check" + ("" if query is None else "?" + quote(query, safe=""))
    with closing(SearchCapsule.of(str(db), checks=CheckReads.of(str(db)))) as handler:
        answer = answer_of(handler, parse_request(url.encode()))
    return int(answer.status), answer.meta, (answer.body or b"").decode()


def portal(
    db: Path | None, *queries: str | None, limits: PortalLimits | None = None
) -> list[httpx.Response]:
    async def main() -> list[httpx.Response]:
        checks = None if db is None else CheckReads.of(str(db))
        upstream = Upstream(limits or PortalLimits(), guard=UpstreamGuard([], test_range=True))
        app = PortalApp(upstream, checks=checks)
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))  # type: ignore[arg-type]
        out = []
        async with httpx.AsyncClient(transport=transport, base_url="http://portal.test") as web:
            for q in queries:
                out.append(await web.get("/check", params={} if q is None else {"q": q}))
        return out

    return trio.run(main)


@pytest.mark.parametrize("target", [PAGE, REFUSED, "bad.test"])
def test_network_text_is_escaped_on_every_face(db: Path, target: str) -> None:
    proc = run_main(["why", target, "--db", str(db)])
    assert proc.returncode in (0, 1), proc.stderr
    assert "\x1b" not in proc.stdout and "\u202e" not in proc.stdout
    assert not any(line.startswith("=>") for line in proc.stdout.splitlines())
    assert all(len(line) <= 80 for line in proc.stdout.splitlines() if "://" not in line)

    status, _, body = capsule(db, target)
    assert status == Status.SUCCESS
    lines = body.splitlines()
    ours = [line for line in lines if line.startswith("=> ")]
    assert not any("evil.test" in line.split(" ")[1] for line in ours)
    headings = [line for line in lines if line.startswith("#")]
    assert headings == [lines[0], *(_census_headings(db) if target == "bad.test" else [])]
    assert not any(c in body for c in "\x1b\x07")

    (page,) = portal(db, target)
    assert page.status_code == 200
    assert "<script>x" not in page.text
    assert "&lt;script&gt;x" in page.text
    assert 'href="gemini://evil.test/' not in page.text


def _census_headings(db: Path) -> list[str]:
    """The headings of the census a host's /check shows (its sections': ours)."""
    with open_database(str(db)) as database:
        census = host_census(database, "bad.test", 0.0)
    return ["## Capsule health", *(f"### {title}" for title, _ in census_sections(census))]


def test_the_census_of_a_hostile_capsule_is_escaped_and_bounded(db: Path) -> None:
    """The census on a host's /check: the certificate's subject and issuer, robots.txt's
    MIME type and each reason to be left out (text from the network) escaped on each
    face, each on a line of its own."""
    status, _, body = capsule(db, "bad.test")
    assert status == Status.SUCCESS
    lines = body.splitlines()
    subject = [line for line in lines if line.startswith("subject (the last connection): ")]
    assert subject == [f"subject (the last connection): {one_line('CN=' + EVIL)}"]
    assert f"its MIME type (of a 20): {one_line(EVIL)}" in lines
    (reason,) = [line for line in lines if line.startswith("* robots.txt: disallowed by")]
    assert reason == f"* {one_line(REFUSED_BY)}: 1"
    (page,) = portal(db, "bad.test")
    health = page.text.split("<h2>Capsule health</h2>")[1]
    assert "<script>" not in health and "\x1b" not in health
    assert f"<dd>{html.escape(one_line('O=' + EVIL))}</dd>" in health
    assert health.count("&lt;script&gt;x") == 4  # subject, issuer, MIME type, a reason


def test_a_target_too_long_is_refused_by_every_face(db: Path) -> None:
    long = "gemini://bad.test/" + "a" * MAX_TARGET_LENGTH
    proc = run_main(["why", long, "--db", str(db)])
    assert proc.returncode == 2 and "longer than" in proc.stderr
    # the capsule's request line is bounded first: 1024 bytes, so the server answers 59
    with pytest.raises(RequestTooLong):
        capsule(db, long)
    (page,) = portal(db, long)
    assert page.status_code == 400 and "longer than" in page.text


@pytest.mark.parametrize("target", ['"><script>x</script>', "bad.test\u202e<b>", "a b.test"])
def test_a_hostile_host_asked_about_is_escaped_on_the_portal(db: Path, target: str) -> None:
    """What is asked about comes back in the form and the refusal, escaped."""
    (page,) = portal(db, target)
    assert page.status_code == 400
    assert "<script>" not in page.text and "<b>" not in page.text
    assert html.escape(target, quote=True) in page.text  # the form's value, as asked
    status, _, _ = capsule(db, target)
    assert status == Status.BAD_REQUEST


def test_what_is_not_a_url_is_refused(db: Path) -> None:
    proc = run_main(["why", "gemini://[oops/", "--db", str(db)])
    assert proc.returncode == 2 and "not a URL" in proc.stderr
    status, _, _ = capsule(db, "ftp://x.test/")
    assert status == Status.BAD_REQUEST


@pytest.mark.parametrize("labels", [MAX_COUNTS, MAX_COUNTS + 1])
def test_a_census_distribution_is_cut_at_its_limits(labels: int) -> None:
    """A distribution shows its first MAX_COUNTS items, then counts the others; a label
    of MAX_LABEL characters is shown whole, a longer one cut there."""
    value: dict[str, int | float] = {
        f"{n:03}".ljust(MAX_LABEL + n % 2, "x"): labels - n for n in range(labels)
    }
    row = census_row("what", value)
    assert len(row.items) == MAX_COUNTS and row.more == labels - MAX_COUNTS
    assert row.items[0] == f"{'000'.ljust(MAX_LABEL, 'x')}: {labels}"
    assert row.items[1] == f"{'001'.ljust(MAX_LABEL - 1, 'x')}…: {labels - 1}"
    assert census_row("what", {}).text == "none" and census_row("what", None).text == "not known"


def test_check_asks_for_its_input(db: Path) -> None:
    status, meta, _ = capsule(db, None)
    assert status == Status.INPUT and "URL" in meta
    (form,) = portal(db, None)
    assert form.status_code == 200 and '<form method="get" action="/check">' in form.text


def test_the_portal_without_a_crawl_database_has_no_check(db: Path) -> None:
    (page,) = portal(None, PAGE)
    assert page.status_code == 404


def test_checks_count_against_the_portals_rate_limit(db: Path) -> None:
    limits = PortalLimits(rate_per_second=0.001, rate_burst=2)
    answers = portal(db, PAGE, PAGE, PAGE, limits=limits)
    assert [a.status_code for a in answers] == [200, 200, 429]


def test_home_and_about_link_to_check(db: Path) -> None:
    with closing(SearchCapsule.of(str(db))) as capsule_app:
        for path in ("/", "/about"):
            answer = answer_of(capsule_app, parse_request(f"gemini://localhost{path}".encode()))
            assert "=> /check " in (answer.body or b"").decode()

    async def home(path: str) -> str:
        app = PortalApp(
            Upstream(PortalLimits(), guard=UpstreamGuard([], test_range=True)),
            checks=CheckReads.of(str(db)),
        )
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://portal.test") as web:
            text = (await web.get(path)).text
        return text

    assert 'href="/check"' in trio.run(home, "/")
    assert 'href="/check"' in trio.run(home, "/about")
