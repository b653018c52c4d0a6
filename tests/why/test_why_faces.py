"""The capsule owner's view end to end: ``geminibot crawl`` of capsules/why.test (and the
page of robots-41.test it links to) on loopback, then each page's reason from the three
faces: ``geminibot why --json``, the search capsule's ``/check`` (gemtext) and the
portal's ``/check`` (HTML). Each names the right reason (and the policy line where there
is one), and the three say the same; on SQLite and on PostgreSQL (a real cluster)."""

from __future__ import annotations

import html
import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
import trio
import trio.testing
from check_faces import assert_census_shown, capsule_check, plain, portal_check
from commands import crawl_in_trio, run_main
from db_rows import reading
from postgres_cluster import new_database

from capsule_server.testing import running_server
from geminibot.store.database import open_database
from geminibot.why.render import facts

CAPSULES = Path(__file__).resolve().parents[2] / "capsules"
TIMEOUT = 120.0
HOST = "why.test"

#: Each page, the reason code every face must give, and the policy line (file line) if any.
EXPECTED: dict[str, tuple[str, str | None]] = {
    "gemini://why.test/": ("searchable", None),
    "gemini://why.test/about.gmi": ("searchable", None),
    "gemini://why.test/copy.gmi": ("searchable", None),
    "gemini://why.test/not-for-indexers/a.gmi": ("policy", "robots.txt line 6"),
    "gemini://why.test/not-for-geminibot/a.gmi": ("policy", "robots.txt line 3"),
    "gemini://why.test/private/a.gmi": ("policy", "robots.txt line 9"),
    "gemini://robots-41.test/a.gmi": ("policy_file", None),
    "gemini://why.test/loop/loop/loop/loop/a.gmi": ("trap", None),
    "gemini://why.test/copy-of-copy.gmi": ("duplicate", None),
    "gemini://why.test/missing.gmi": ("not_found", None),
    "gemini://why.test/deep/3.gmi": ("depth", None),
    "gemini://why.test/drafts/a.gmi": ("excluded", None),
    "gemini://elsewhere.test/": ("host_not_allowed", None),
    "gemini://why.test/never-linked.gmi": ("not_linked", None),
}
#: The group named by each policy refusal, and its kind.
GROUPS = {
    "gemini://why.test/not-for-indexers/a.gmi": ("indexer", "a virtual agent"),
    "gemini://why.test/not-for-geminibot/a.gmi": ("geminibot", "this crawler's product token"),
    "gemini://why.test/private/a.gmi": ("*", "every robot"),
}

#: The keys of a rule object, in order, in every command's --json.
RULE_KEYS = ["file", "line", "directive", "pattern", "group"]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def crawled(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """why.test and robots-41.test crawled in strict mode, --max-depth 2, drafts excluded,
    into an SQLite file or a PostgreSQL database: what ``--db`` says."""
    tmp = tmp_path_factory.mktemp("why")
    root = tmp / "capsules"
    root.mkdir()
    for host in (HOST, "robots-41.test"):
        (root / host).symlink_to(CAPSULES / host, target_is_directory=True)
    db = str(tmp / "crawl.db")
    if request.param == "postgresql":
        db = new_database(request.getfixturevalue("pg_cluster"))

    async def main() -> None:
        async with running_server(root, tmp / "certs", clock=trio.current_time) as server:
            argv = [f"gemini://{HOST}/", "--db", db, "--test-range", "--json"]
            argv += ["--connect-to", f"*.test:1965:127.0.0.1:{server.port}"]
            argv += ["--strict", "--max-depth", "2", "--exclude", "*/drafts/*"]
            argv += ["--allow-host", "robots-41.test"]
            with trio.fail_after(TIMEOUT):
                proc = await crawl_in_trio(argv)
            assert proc.returncode == 0, proc.stderr

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0.005))
    return db


def why_json(db: str, target: str) -> dict[str, object]:
    proc = run_main(["why", target, "--db", db, "--json"])
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(proc.stdout)
    assert isinstance(data, dict)
    assert proc.returncode == (0 if data.get("searchable", True) else 1)
    return data


@pytest.mark.parametrize("url", sorted(EXPECTED))
def test_every_face_gives_the_right_reason(crawled: str, url: str) -> None:
    code, line = EXPECTED[url]
    answer = why_json(crawled, url)
    assert answer["code"] == code, answer
    headline, reason = str(answer["headline"]), str(answer["reason"])
    policy = answer["policy"]
    if line is not None:
        assert isinstance(policy, dict)
        assert f"{policy['file']} line {policy['line']}" == line
        assert (policy["group"], policy["group_kind"]) == GROUPS[url]
        assert policy["mode"] == "strict"
        rule = policy["rule"]  # the one shape of a rule in every --json
        assert isinstance(rule, dict) and list(rule) == RULE_KEYS
        assert f"{rule['file']} line {rule['line']}" == line
        assert rule["directive"] == "Disallow" and rule["group"] == GROUPS[url][0]
    gemtext = capsule_check(crawled, url)
    status, page = trio.run(portal_check, crawled, url)
    assert status == 200
    text = plain(page)
    for face in (gemtext, text):
        assert f"verdict: {headline}" in face or f"verdict{headline}" in face
        assert reason.split(" (", maxsplit=1)[0][:60] in face
        if line is not None:
            assert line in face


def test_the_faces_render_the_same_facts(crawled: str) -> None:
    """Every fact the routine gives is on the capsule's page and the portal's, word for
    word (as each face escapes it)."""
    from geminibot.why import check

    for url in ("gemini://why.test/private/a.gmi", HOST):
        with open_database(crawled) as database:
            answer = check(database, url, 2e9)
        gemtext = capsule_check(crawled, url)
        _, page = trio.run(portal_check, crawled, url)
        for fact in facts(answer):
            if fact.label in ("next look", "today"):
                continue  # computed at each face's own "now"
            assert fact.text[:50] in gemtext, fact
            assert fact.text[:50] in html.unescape(page), fact


def test_a_host_summary_matches_stats_and_policy_check(crawled: str, tmp_path: Path) -> None:
    """The summary of why.test counts its URLs as ``geminibot stats --urls --host`` lists
    them (and its searchable pages and duplicates as ``stats`` counts them: the only host
    with pages), and says what each virtual agent may do at its root in both modes as
    ``geminibot policy check`` does on the robots.txt it holds; its lint findings are
    ``policy lint``'s."""
    summary = why_json(crawled, HOST)
    counts = summary["counts"]
    assert isinstance(counts, dict)
    listed = run_main(["stats", "--db", crawled, "--urls", "--host", HOST, "--json"])
    assert listed.returncode == 0, listed.stderr
    states: dict[str, int] = {}
    for line in listed.stdout.splitlines():
        state = json.loads(line)["state"]
        states[state] = states.get(state, 0) + 1
    assert {k: v for k, v in counts.items() if k not in ("searchable", "duplicates")} == states
    totals = json.loads(run_main(["stats", "--db", crawled, "--json"]).stdout)
    assert counts["searchable"] == totals["pages_with_text"] == 7
    assert counts["duplicates"] == totals["duplicates"] == 1

    with reading(crawled) as (conn, _):
        (body,) = conn.execute(
            "SELECT body FROM robots WHERE host = 'why.test' AND name = 'robots.txt'"
        ).fetchone()
    robots = tmp_path / "robots.txt"
    robots.write_bytes(bytes(body))
    permissions = summary["permissions"]
    assert isinstance(permissions, list) and len(permissions) == 8
    for p in permissions:
        argv = ["policy", "check", str(robots), f"gemini://{HOST}/", "--agent", "geminibot"]
        argv += ["--as", p["agent"], "--json"] + (["--strict"] if p["mode"] == "strict" else [])
        checked = json.loads(run_main(argv).stdout)
        assert (checked["allowed"], checked["reason"]) == (p["allowed"], p["reason"])
        for refused in p["refused"]:  # "/private/ (robots.txt line 9: Disallow: /private/)"
            path, _, rule = refused.partition(" (")
            argv[3] = f"gemini://{HOST}{path}"
            checked = json.loads(run_main(argv).stdout)
            assert not checked["allowed"] and f"(line {rule.split()[2][:-1]})" in checked["reason"]
            assert list(checked["rule"]) == RULE_KEYS
            assert checked["rule"]["line"] == int(rule.split()[2][:-1])
    indexer_strict = [p for p in permissions if (p["agent"], p["mode"]) == ("indexer", "strict")]
    assert len(indexer_strict[0]["refused"]) == 3
    linted = run_main(["policy", "lint", str(robots), "--json"])
    found = [json.loads(line) for line in linted.stdout.splitlines()]
    files = summary["files"]
    assert isinstance(files, list)
    (robots_file,) = [f for f in files if f["name"] == "robots.txt"]
    assert robots_file["findings"] == [
        {k: d[k] for k in ("line", "level", "code", "message", "hint")} for d in found
    ]
    assert found and robots_file["status"] == 20 and robots_file["size"] == len(body)


def test_a_host_check_shows_the_capsules_census(crawled: str) -> None:
    """``/check?why.test`` on both faces shows every figure ``census --host why.test``
    gives, word for word: its 5x answer (missing.gmi), robots.txt as fetched with its lint
    findings, its certificate's fingerprint, and its searchable pages beside each reason
    to be out."""
    got = assert_census_shown(crawled, HOST)
    assert got["host.errors"] == {"DNS": 0, "TLS": 0, "timeout": 0, "4x": 0, "5x": 1}
    assert (got["host.robots.status"], got["host.robots.outcome"]) == (20, "success")
    assert got["host.robots.mime"].startswith("text/plain")
    assert re.fullmatch(r"([0-9A-F]{2}:){31}[0-9A-F]{2}", got["host.cert.sha256"])
    assert got["host.searchable"] == 7 and got["host.duplicates"] == 1
    assert got["host.states"] == {"done": 8, "not_found": 1, "refused": 3, "trapped": 2}
    reasons = got["host.out_reasons"]
    assert sum(reasons.values()) == 5 and "deeper than 2 links" in reasons
    assert sum("robots.txt: disallowed by" in reason for reason in reasons) == 3


#: A capsule whose robots.txt answers a permanent failure other than 51: "unavailable".
ROBOTS_5X = "robots-52.test"


def crawl_unreadable_robots(tmp: Path, max_time: str) -> str:
    """robots-44.test (robots.txt answers ``44 60``) and a capsule of the test's own whose
    robots.txt answers ``52``, crawled into an SQLite file for ``max_time`` of the test's
    clock: its path."""
    root = tmp / "capsules"
    root.mkdir()
    (root / "robots-44.test").symlink_to(CAPSULES / "robots-44.test", target_is_directory=True)
    gone = root / ROBOTS_5X
    gone.mkdir()
    (gone / "index.gmi").write_text("# robots-52\n=> /a.gmi a page\n", encoding="utf-8")
    (gone / "a.gmi").write_text("# a page\nwords to index\n", encoding="utf-8")
    (gone / "serve.toml").write_text(
        '[[special]]\npath = "/robots.txt"\nstatus = 52\nmeta = "Gone for good"\n',
        encoding="utf-8",
    )
    db = str(tmp / "crawl.db")

    async def main() -> None:
        async with running_server(root, tmp / "certs", clock=trio.current_time) as server:
            argv = ["gemini://robots-44.test/", f"gemini://{ROBOTS_5X}/", "--db", db]
            argv += ["--test-range", "--json", "--strict", "--max-time", max_time]
            argv += ["--connect-to", f"*.test:1965:127.0.0.1:{server.port}"]
            with trio.fail_after(15 * 60):
                proc = await crawl_in_trio(argv)
            assert proc.returncode == 0, proc.stderr

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0.005))
    return db


@pytest.fixture(scope="module")
def unreadable_robots(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Crawled for two and a half minutes (of the test's clock): robots-44.test's robots.txt
    is asked again after each 60 s wait (a 44 is never read as its answer: the capsule
    waits, its URLs queued)."""
    return crawl_unreadable_robots(tmp_path_factory.mktemp("why-robots"), "150s")


def test_a_robots_txt_answering_44_is_the_reason_while_its_wait_is_sat_out(
    tmp_path: Path,
) -> None:
    """Crawled for 30 s, within robots.txt's first 44 wait: the capsule's root is queued,
    and the reason is robots.txt's 44, not the queue."""
    db = crawl_unreadable_robots(tmp_path, "30s")
    answer = why_json(db, "gemini://robots-44.test/")
    assert answer["code"] == "policy_file", answer
    reason = str(answer["reason"])
    assert reason.startswith("robots.txt answered 44 60 on "), reason
    assert "sits out the wait" in reason
    assert "robots.txt answered 44 60 " in capsule_check(db, "gemini://robots-44.test/")


def test_a_robots_txt_answering_44_keeps_the_capsule_out(unreadable_robots: str) -> None:
    """44: robots.txt is waited out and asked again, so nothing of the capsule is fetched,
    and every face says that its robots.txt answered 44 and nothing is fetched before it
    is read."""
    with closing(sqlite3.connect(unreadable_robots)) as conn:
        asked = conn.execute(
            "SELECT status, meta FROM fetches WHERE host = 'robots-44.test' ORDER BY id"
        ).fetchall()
    assert len(asked) >= 2 and set(asked) == {(44, "60")}, asked  # only robots.txt, again
    for url in ("gemini://robots-44.test/", "gemini://robots-44.test/a.gmi"):
        answer = why_json(unreadable_robots, url)
        if url.endswith("a.gmi"):  # never linked: the capsule's root was never read
            assert answer["code"] == "not_linked", answer
            continue
        assert answer["code"] == "policy_file", answer
        reason = str(answer["reason"])
        assert reason.startswith("robots.txt answered 44 "), reason
        assert "nothing else of the capsule is fetched before robots.txt is read" in reason
        gemtext = capsule_check(unreadable_robots, url)
        _, page = trio.run(portal_check, unreadable_robots, url)
        for face in (gemtext, plain(page)):
            assert "robots.txt answered 44 " in face


def test_a_robots_txt_answering_5x_lets_the_capsule_in(unreadable_robots: str) -> None:
    """52 (any 5x): robots.txt is unavailable, which allows everything: the capsule's
    pages are searchable, and the answer shows robots.txt as unavailable."""
    for url in (f"gemini://{ROBOTS_5X}/", f"gemini://{ROBOTS_5X}/a.gmi"):
        answer = why_json(unreadable_robots, url)
        assert answer["code"] == "searchable", answer
    summary = why_json(unreadable_robots, ROBOTS_5X)
    files = summary["files"]
    assert isinstance(files, list)
    (robots,) = [f for f in files if f["name"] == "robots.txt"]
    assert (robots["status"], robots["outcome"]) == (52, "unavailable"), robots
    permissions = summary["permissions"]
    assert isinstance(permissions, list) and all(p["allowed"] for p in permissions)
    gemtext = capsule_check(unreadable_robots, ROBOTS_5X)
    _, page = trio.run(portal_check, unreadable_robots, ROBOTS_5X)
    for face in (gemtext, plain(page)):
        assert "robots.txt: 52 (unavailable)" in face
