"""geminibot compare: worked cases, every reported example path re-decided by both sides."""

from __future__ import annotations

import json
import sys
import threading
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from pathlib import Path

import certs
import pytest
import trio
from webserver import WebServer, _handler, text

from capsule_server.testing import running_server
from geminibot.cli import main
from geminibot.gemini.server import ServerLimits
from geminibot.policy.candidates import candidate_paths, pattern_paths
from geminibot.policy.compare import Comparison, PathDifference, bot_classes, compare
from geminibot.policy.robots_model import VIRTUAL_AGENTS
from geminibot.policy.site_policy import SitePolicy

AT = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
DATA = Path(__file__).resolve().parents[1] / "policy" / "data"
CAPSULES = Path(__file__).resolve().parents[2] / "capsules"
BASE = "User-agent: *\nDisallow: /private/\nAllow: /private/open.html\n"


def sides(
    web: tuple[str | None, str | None, str | None],
    gemini: tuple[str | None, str | None, str | None],
) -> tuple[SitePolicy, SitePolicy]:
    return SitePolicy.from_texts("http", *web), SitePolicy.from_texts("gemini", *gemini)


def run(
    web: SitePolicy, gemini: SitePolicy, agents: tuple[tuple[str, tuple[str, ...]], ...] = ()
) -> Comparison:
    result = compare(web, gemini, bot_classes((web, gemini), agents), AT)
    verify(web, gemini, result)
    return result


def verify(web: SitePolicy, gemini: SitePolicy, result: Comparison) -> None:
    """Every reported example: one side allows it, the other forbids it, as reported, for
    its class, and for every class a difference names."""
    for c in result.classes:
        for diff in c.paths:
            w = web.may_fetch(diff.path, c.bot_class.bot, AT)
            g = gemini.may_fetch(diff.path, c.bot_class.bot, AT)
            assert (w.allowed, g.allowed) == (diff.web_allowed, diff.gemini_allowed)
            assert w.allowed != g.allowed
            assert (w.reason, g.reason) == (diff.web_reason, diff.gemini_reason)
    by_name = {c.bot_class.name: c.bot_class.bot for c in result.classes}
    for d in result.differences:
        if isinstance(d, PathDifference):
            for name in d.classes:
                w = web.may_fetch(d.path, by_name[name], AT)
                g = gemini.may_fetch(d.path, by_name[name], AT)
                assert (w.allowed, g.allowed) == (d.web_allowed, d.gemini_allowed), name


def differing(result: Comparison) -> list[str]:
    return [c.bot_class.name for c in result.classes if not c.agree]


def test_classes_are_the_virtual_agents_star_and_given_agents() -> None:
    web, gemini = sides(("User-agent: anybot\nDisallow: /\n", None, None), (BASE, None, None))
    classes = bot_classes((web, gemini), (("mybot", ("indexer",)),))
    assert [c.name for c in classes] == [*VIRTUAL_AGENTS, "*", "mybot:indexer"]
    star = classes[len(VIRTUAL_AGENTS)].bot
    assert star.token == "anybot2" and star.virtual_agents == ()  # a token no file names
    assert classes[-1].bot.virtual_agents == ("indexer",)


def test_agree() -> None:
    robots2 = "crawl: ask\ntrain: no\n"  # ask on both sides: the same words, not a difference
    web, gemini = sides((BASE, robots2, None), (BASE, robots2, None))
    result = run(web, gemini)
    assert result.agree and differing(result) == []
    assert "agree for all 5 bot classes" in result.summary()


def test_differ_for_one_virtual_agent_only() -> None:
    gemini_robots = BASE + "\nUser-agent: archiver\nDisallow: /private/\nDisallow: /old/\n"
    web, gemini = sides((BASE, None, None), (gemini_robots, None, None))
    result = run(web, gemini)
    assert differing(result) == ["archiver"]
    archiver = result.classes[VIRTUAL_AGENTS.index("archiver")]
    assert not archiver.wait_differs and not archiver.usage
    found = {(d.path, d.web_allowed) for d in archiver.paths}
    # /old/ is the archiver's own; /private/open.html is allowed by * only (the archiver
    # group has no Allow line), each found from the rules themselves
    assert ("/old/", True) in found and ("/private/open.html", True) in found
    assert "2 paths differ for 1 of 5 bot classes (archiver)" in result.summary()


def test_differ_only_in_waiting_time() -> None:
    web, gemini = sides(
        (BASE + "Crawl-delay: 5\n", None, None), (BASE + "Crawl-delay: 20\n", None, None)
    )
    result = run(web, gemini)
    assert differing(result) == [*VIRTUAL_AGENTS, "*"]
    for c in result.classes:
        assert c.paths == () and c.usage == ()
        assert (c.web_wait.seconds, c.gemini_wait.seconds) == (5, 20)


def test_differ_only_in_ai_usage() -> None:
    web, gemini = sides(
        (BASE, "train: no\nquote: short-only\n", None),
        (BASE, "train: yes\nquote: short-only\n", None),
    )
    result = run(web, gemini)
    for c in result.classes:
        assert c.paths == () and not c.wait_differs
        assert [(u.directive, u.web.value, u.gemini.value) for u in c.usage] == [
            ("train", "no", "yes")
        ]


def test_anchor_and_boundaries_are_found() -> None:
    web, gemini = sides(
        ("User-agent: *\nDisallow: /a$\n", None, None),
        ("User-agent: *\nDisallow: /a\n", None, None),
    )
    result = run(web, gemini)
    for c in result.classes:  # past the anchor: one pair of deciding rules, one example
        assert [(d.path, d.web_allowed) for d in c.paths] == [("/ax", True)]


def test_pattern_paths_fill_stars_and_honour_dollar() -> None:
    paths = pattern_paths("/a*b$")
    assert {"/ab", "/axb", "/aa/bb", "/abx", "/a"} <= set(paths)
    assert all(p.startswith("/") for p in pattern_paths("*.pdf$"))


def test_big_files_every_example_verified() -> None:
    web_robots = (DATA / "frommitz-robots.txt").read_text()
    gemini_robots = (CAPSULES / "va-groups.test" / "robots.txt").read_text()
    web, gemini = sides((web_robots, None, None), (gemini_robots, None, None))
    result = run(web, gemini, (("geminibot", ("indexer",)), ("oddbot", ())))
    assert not result.agree
    assert sum(len(c.paths) for c in result.classes) >= 3
    assert result.candidates == len(candidate_paths(web, gemini)[0])


def test_agents_txt_and_robots2_paths_count() -> None:
    import hashlib

    directives = "/members DISALLOW"
    agents = f"*{hashlib.sha256(directives.encode()).hexdigest()}\n{directives}\n"
    web, gemini = sides((BASE, None, agents), (BASE, "User-agent: *\nDisallow: /drafts\n", None))
    result = run(web, gemini)
    star = result.classes[len(VIRTUAL_AGENTS)]
    found = {(d.path, d.web_allowed) for d in star.paths}
    assert ("/members", False) in found and ("/drafts", True) in found


# --- the command line -----------------------------------------------------------------


def write(folder: Path, files: dict[str, str]) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in files.items():
        (folder / name).write_text(body)
    return [str(folder / name) for name in files]


def test_cli_exit_codes_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    same_web = write(tmp_path / "w", {"robots.txt": BASE})
    same_gem = write(tmp_path / "g", {"robots.txt": BASE})
    assert main(["compare", "--web", *same_web, "--gemini", *same_gem]) == 0
    assert "agree for all" in capsys.readouterr().out
    other = write(
        tmp_path / "o", {"robots.txt": BASE + "Crawl-delay: 3\n", "robots2.txt": "train: no\n"}
    )
    assert (
        main(
            [
                "compare",
                "--web",
                *same_web,
                "--gemini",
                *other,
                "--json",
                "--agent",
                "mybot:indexer",
            ]
        )
        == 1
    )
    data = json.loads(capsys.readouterr().out)
    assert data["agree"] is False and data["classes"][-1]["name"] == "mybot:indexer"
    (wait,) = [d for d in data["differences"] if d["kind"] == "wait"]
    assert len(wait["classes"]) == len(data["classes"])
    for argv in (
        ["compare"],
        ["compare", "--web", *same_web],
        ["compare", "host.test", "--web", *same_web, "--gemini", *same_gem],
        ["compare", "--web", *same_web, "--gemini", *same_gem, "--agent", "bad token"],
        ["compare", "--web", *same_web, "--gemini", *same_gem, "--agent", "x:nosuchagent"],
        ["compare", "--web", str(tmp_path / "missing.txt"), "--gemini", *same_gem],
        ["compare", "https://host.test/"],
        ["compare", "bad host.test", "--timeout", "1"],
        ["compare", "host.test", "--connect-to", "nonsense"],
        ["compare", "host.test", "--web-ca", str(tmp_path / "no-ca.pem")],
    ):
        assert main(argv) == 2, argv
    capsys.readouterr()


async def test_compare_host_over_loopback(tmp_path: Path) -> None:
    """Both sides fetched: https (a loopback server with its own CA) and Gemini."""
    host = "dual.test"
    pair = certs.cert_pair(host)
    ca = tmp_path / "ca.pem"
    ca.write_bytes(pair.cert_pem)
    state = WebServer({"/robots.txt": text(BASE + "Crawl-delay: 7\n")})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.socket = pair.server_context().wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    write(tmp_path / "capsules" / host, {"robots.txt": BASE, "index.gmi": "# hi\n"})
    try:
        limits = ServerLimits(rate_burst=100, rate_per_second=100.0)
        async with running_server(tmp_path / "capsules", tmp_path / "certs", limits) as capsule:
            command = [
                sys.executable, "-m", "geminibot", "compare", host, "--json",
                "--web-ca", str(ca),
                "--connect-to", f"{host}:443:127.0.0.1:{httpd.server_address[1]}",
                "--connect-to", f"{host}:1965:127.0.0.1:{capsule.port}",
            ]  # fmt: skip
            done = await trio.run_process(
                command, capture_stdout=True, capture_stderr=True, check=False
            )
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
    assert done.returncode == 1, done.stderr.decode()
    data = json.loads(done.stdout)
    assert data["web"] == f"https://{host}/" and data["gemini"] == f"gemini://{host}/"
    (wait,) = data["differences"]  # one difference, for every class: the waiting time
    assert wait["kind"] == "wait" and len(wait["classes"]) == len(data["classes"])
    assert wait["web"]["seconds"] == 7
    assert [r.path for r in state.log][:3] == ["/robots.txt", "/robots2.txt", "/agents.txt"]
    assert all(r.headers["User-Agent"].startswith("geminibot/") for r in state.log)
