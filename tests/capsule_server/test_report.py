"""The compliance report: pure over records, and its command line's input errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from capsule_fixtures import bundled_policies

from capsule_server.cli import main
from capsule_server.judge import (
    MAZE_MAX_DEPTH,
    HostPolicy,
    build_report,
    identity_names,
)
from capsule_server.report import render
from geminibot.gemini.accesslog import AccessRecord
from geminibot.policy.site_policy import SitePolicy

ROBOTS = (
    "User-agent: indexer\nDisallow: /no-index/\n\n"
    "User-agent: archiver\nDisallow: /no-archive/\nCrawl-delay: 5\n\n"
    "User-agent: *\nDisallow: /private/\nDisallow: /trap/\n"
)
POLICIES = {
    "x.test": HostPolicy(SitePolicy.from_texts("gemini", ROBOTS), honeypots=("/trap/",)),
    "y.test": HostPolicy(SitePolicy.from_texts("gemini", ""), maze_prefix="/maze/"),
}


def rec(
    second: float,
    path: str,
    client: str = "10.0.0.1",
    status: int = 20,
    meta: str | None = None,
    limited: str | None = None,
    host: str = "x.test",
) -> AccessRecord:
    time = f"2026-11-23T10:{int(second) // 60:02d}:{second % 60:06.3f}Z"
    return AccessRecord(client, host, path, status, meta=meta, limited=limited, time=time)


def test_compliant_indexer_leads_with_a_verdict() -> None:
    records = [rec(0, "/robots.txt"), rec(10, "/"), rec(20, "/private/a"), rec(30, "/no-archive/a")]
    [report] = build_report(records, POLICIES)
    assert report.consistent_with == ("indexer",)
    assert report.compliant and report.judged_as == "indexer"
    assert report.verdict() == "compliant as indexer"
    assert dict(report.scorecard()) == {"x.test": "pass", "y.test": "not visited"}
    # the archiver's breaches name the rule: robots.txt line 5, Disallow: /no-archive/
    [archiver] = report.by_identity["archiver"]
    assert (archiver.kind, archiver.file, archiver.line) == ("forbidden", "robots.txt", 5)
    # --as asks about one identity: as an archiver the same client is not compliant
    [as_archiver] = build_report(records, POLICIES, judge_as="archiver")
    assert not as_archiver.compliant
    assert as_archiver.verdict().startswith("not compliant: 1 forbidden request, first at ")


def test_each_rule_broken_is_one_line_with_a_count() -> None:
    records = [
        rec(0, "/"),  # before robots.txt
        rec(10, "/robots.txt"),
        rec(20, "/trap/x"),  # honeypot (not also "forbidden")
        rec(30, "/a", status=44, meta="10", limited="rate"),
        rec(31, "/a"),  # 9 s early ...
        rec(32, "/a"),  # ... and again: the same wait, one breach
        rec(50, "/no-index/a"),
        rec(60, "/no-index/b"),  # the same rule again
    ]
    [report] = build_report(records, POLICIES, judge_as="indexer")
    got = [(b.kind, b.path, b.line, b.count) for b in report.breaches]
    assert got == [
        ("before robots.txt", "/", 0, 1),
        ("honeypot", "/trap/x", 10, 1),
        ("during 44 wait", "/a", 0, 2),
        ("forbidden", "/no-index/a", 2, 2),
    ]
    assert report.forbidden_requests == 6
    assert len(report.rate_refused) == 1
    assert report.verdict().startswith(
        "not compliant: 6 forbidden requests, first at 2026-11-23 10:00:00 gemini://x.test/"
    )
    assert report.consistent_with == ()
    assert dict(report.scorecard())["x.test"].startswith("fail: before robots.txt / (")


def test_hammering_through_44s_is_one_breach() -> None:
    records = [rec(0, "/robots.txt"), rec(1, "/a", status=44, meta="5")]
    records += [rec(2 + i * 0.5, "/a", status=44, meta="5") for i in range(6)]
    records += [rec(20, "/a"), rec(21, "/b", status=44, meta="5"), rec(22, "/b")]
    [report] = build_report(records, POLICIES, judge_as="indexer")
    assert [(b.kind, b.rule, b.count) for b in report.breaches] == [
        ("during 44 wait", "44 at 10:00:01 asked for 5 s", 6),
        ("during 44 wait", "44 at 10:00:21 asked for 5 s", 1),
    ]


def test_crawl_delay_is_judged_for_the_identities_it_binds() -> None:
    records = [rec(0, "/robots.txt"), rec(10, "/"), rec(12, "/a"), rec(20, "/b")]
    [report] = build_report(records, POLICIES)
    [fast] = report.by_identity["archiver"]
    assert (fast.kind, fast.path, fast.rule) == ("too fast", "/a", "Crawl-delay: 5")
    assert "indexer" in report.consistent_with and "archiver" not in report.consistent_with


def test_maze_depth_edge() -> None:
    at_limit = "/maze/" + "a/" * (MAZE_MAX_DEPTH - 1)
    records = [
        rec(0, "/robots.txt", host="y.test"),
        rec(1, at_limit, host="y.test"),
        rec(2, at_limit + "b/", host="y.test"),
    ]
    [report] = build_report(records, POLICIES)
    [deep] = report.breaches
    assert (deep.kind, deep.path) == ("maze depth", at_limit + "b/")


def test_redirect_limit_edge() -> None:
    records = [rec(0, "/robots.txt")]
    for hop in range(1, 8):
        records.append(rec(hop * 10, f"/h/{hop}", status=31, meta=f"/h/{hop + 1}"))
    [report] = build_report(records, POLICIES)
    [too_many] = report.breaches
    assert (too_many.kind, too_many.path, too_many.detail) == ("redirects", "/h/7", "6 followed")


def test_clients_are_separate_and_unread_requests_skipped() -> None:
    records = [
        rec(0, "/robots.txt", client="a"),
        rec(1, "/robots.txt", client="b"),
        rec(2, "/no-index/x", client="b"),
        AccessRecord(client="c", error="header timeout", time="2026-11-23T10:00:00Z"),
    ]
    reports = build_report(records, POLICIES)
    assert [r.client for r in reports] == ["a", "b"]
    assert reports[0].consistent_with == identity_names()
    assert "indexer" not in reports[1].consistent_with


def test_policy_files_are_never_forbidden() -> None:
    deny = {"x.test": HostPolicy(SitePolicy.from_texts("gemini", "User-agent: *\nDisallow: /\n"))}
    [report] = build_report([rec(0, "/robots.txt"), rec(1, "/agents.txt")], deny)
    assert report.consistent_with == identity_names()


def test_records_are_ordered_by_accept_time() -> None:
    # the long robots.txt connection ended (and was logged) after the page request
    [report] = build_report([rec(2, "/"), rec(1, "/robots.txt")], POLICIES)
    assert report.robots_first == {"x.test": True}


def test_bundled_policies() -> None:
    policies = bundled_policies()  # load_policies of the bundled capsules
    assert not policies["robots-41.test"].robots.allowed("/", "geminibot")
    assert policies["honeypot.test"].honeypots == ("/trap/", "/secret-admin/")
    redirect = policies["robots-redirect.test"].policy_paths
    assert {"/old-robots.txt", "/policy/robots.txt"} <= redirect
    assert "/policies/robots2-c.txt" in policies["robots2-chain.test"].policy_paths
    assert policies["large-file.test"].large_files == {"/files/big.bin": 16 * 1024 * 1024}
    assert policies["maze.test"].maze_prefix == "/maze/"


# -- the command line ----------------------------------------------------------


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    [line] = captured.err.splitlines()
    return line


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "no requests in the log, nothing to judge"),
        ('{"foo": 1}\n', ":1: not an access log record (no client or time)"),
        ("not json\n", ":1: not JSON"),
        ("[1, 2]\n", ":1: not a JSON object"),
        ('{"client": "a", "time": "noon"}\n', ":1: time 'noon' is not ISO 8601"),
    ],
)
def test_report_refuses_what_is_not_an_access_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    log = tmp_path / "access.jsonl"
    log.write_text(content)
    assert main(["report", str(log)]) == 2
    assert message in one_error_line(capsys)


def test_report_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl: no such file" in one_error_line(capsys)
    assert main(["report", str(tmp_path)]) == 2
    assert "is a directory, expected an access log file" in one_error_line(capsys)
    log = tmp_path / "access.jsonl"
    log.write_text(json.dumps(rec(0, "/robots.txt", host="honeypot.test").as_dict()) + "\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(log), "--capsules", str(empty)]) == 2
    assert "no capsule folders" in one_error_line(capsys)
    assert main(["report", str(log), "--capsules", str(log)]) == 2
    assert "not a folder of capsules" in one_error_line(capsys)
    other = tmp_path / "other"
    (other / "z.test").mkdir(parents=True)
    assert main(["report", str(log), "--capsules", str(other)]) == 2
    assert "no request for any of these capsules" in one_error_line(capsys)
    assert main(["report", str(log), "--detail", "nobody"]) == 2
    assert "unknown identity 'nobody'" in one_error_line(capsys)
    assert main(["report", str(log), "--as", "nobody"]) == 2  # the old spelling
    assert "unknown identity 'nobody'" in one_error_line(capsys)


def test_every_capsule_says_what_the_range_judges_there(capsules_dir: Path) -> None:
    for host in bundled_policies():
        readme = (capsules_dir / host / "README.gmi").read_text(encoding="utf-8")
        assert "\n## What the range judges here\n" in readme, host


def test_clients_are_told_apart_by_address_an_ipv6_client_by_its_64() -> None:
    """As the range counts them (one routine): a bot moving inside its /64 is one client,
    and every scorecard says how clients are told apart."""
    records = [rec(0, "/robots.txt", "2001:db8:1:2::1"), rec(1, "/", "2001:db8:1:2::99")]
    [report] = build_report([*records, rec(2, "/", "10.0.0.1")], POLICIES)[:1]
    assert (report.client, report.requests) == ("2001:db8:1:2::/64", 2)
    assert report.as_dict()["client_is"] == "an IPv4 address or an IPv6 /64 network"
    text = render(report, "text").splitlines()
    span = text.index("  from 2026-11-23 10:00:00 to 10:00:01")
    assert text[span + 1] == (
        "  told apart by address: a client is an IPv4 address or an IPv6 /64 network"
    )
    assert (
        "Clients are told apart by address: a client is an IPv4 address or an IPv6 /64 "
        "network." in render(report, "gmi").splitlines()
    )
