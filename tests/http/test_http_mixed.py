"""A mixed crawl through the command line (``geminibot crawl`` run in the test's trio
run): a capsule (capsule_server) and a website (a loopback HTTP server) that link to each
other, both hosts' policies obeyed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from commands import crawl_in_trio
from webserver import html, serve, text

from capsule_server.testing import running_server
from geminibot.gemini.accesslog import AccessRecord
from geminibot.gemini.server import ServerLimits

CAPSULE = {
    "robots.txt": "User-agent: indexer\nDisallow: /private/\n",
    "index.gmi": "# Capsule home\nlichen on the gemini side\n=> /page.gmi page\n"
    "=> /private/secret.gmi secret\n=> http://web.test/ the website\n",
    "page.gmi": "# Page\nmoss\n",
    "back.gmi": "# Back from the web\nreturned\n",
    "private/secret.gmi": "# Honeypot\n",
}
WEBSITE = {
    "/robots.txt": text("User-agent: *\nDisallow: /private/\n"),
    "/": html(
        "<title>Web home</title><p>fern on the web side</p><a href=/w.html>w</a>"
        "<a href=/private/x.html>x</a><a href='gemini://capsule.test/back.gmi'>back</a>"
    ),
    "/w.html": html("<title>W</title><p>bracken</p>"),
    "/private/x.html": html("<p>honeypot</p>"),
}
LIMITS = ServerLimits(rate_burst=1000, rate_per_second=1000.0)


async def crawl(
    tmp_path: Path, seed: str, *extra: str
) -> tuple[dict[str, object], sqlite3.Connection, set[str], set[str]]:
    root = tmp_path / "capsules" / "capsule.test"
    for name, body in CAPSULE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(body)
    gemini_hits: list[AccessRecord] = []
    db = tmp_path / "mixed.db"
    with serve(WEBSITE) as web:
        async with running_server(
            tmp_path / "capsules", tmp_path / "certs", LIMITS, gemini_hits.append
        ) as capsule:
            command = [
                seed,
                "--db", str(db), "--test-range", "--json",
                "--allow-host", "capsule.test", "--allow-host", "web.test",
                "--connect-to", f"capsule.test:1965:127.0.0.1:{capsule.port}",
                "--connect-to", f"web.test:80:127.0.0.1:{web.port}",
                *extra,
            ]  # fmt: skip
            done = await crawl_in_trio(command)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    gemini_paths = {r.path for r in gemini_hits if r.path}
    return summary, sqlite3.connect(db), gemini_paths, set(web.paths())


def indexed(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT url FROM pages WHERE status IN (20, 200)")}


async def test_follow_http_indexes_both_and_obeys_both_policies(tmp_path: Path) -> None:
    summary, conn, gemini, web = await crawl(tmp_path, "gemini://capsule.test/", "--follow", "http")
    assert indexed(conn) == BOTH
    assert "/private/secret.gmi" not in gemini and "/private/x.html" not in web
    assert "/robots.txt" in gemini and "/robots.txt" in web
    refused = {r[0] for r in conn.execute("SELECT url FROM urls WHERE state = 'refused'")}
    assert refused == {"gemini://capsule.test/private/secret.gmi", "http://web.test/private/x.html"}
    words = conn.execute("SELECT url FROM pages_fts WHERE pages_fts MATCH 'bracken OR lichen'")
    assert {r[0] for r in words} == {"http://web.test/w.html", "gemini://capsule.test/"}
    assert summary["pages"] == 5


async def test_follow_gemini_from_a_web_seed(tmp_path: Path) -> None:
    _, conn, gemini, web = await crawl(tmp_path, "http://web.test/", "--follow", "gemini")
    assert indexed(conn) == {
        "http://web.test/",
        "http://web.test/w.html",
        "gemini://capsule.test/back.gmi",
    }
    assert gemini == {"/robots.txt", "/robots2.txt", "/agents.txt", "/back.gmi"}
    assert "/private/secret.gmi" not in gemini and "/private/x.html" not in web


BOTH = {
    "gemini://capsule.test/",
    "gemini://capsule.test/page.gmi",
    "gemini://capsule.test/back.gmi",
    "http://web.test/",
    "http://web.test/w.html",
}


async def test_without_follow_the_web_is_left_alone(tmp_path: Path) -> None:
    _, conn, _gemini, web = await crawl(tmp_path, "gemini://capsule.test/")
    assert web == set()
    assert indexed(conn) == {"gemini://capsule.test/", "gemini://capsule.test/page.gmi"}
