"""The compliance report: pure over records, and end to end over a real server's log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capsule_server.cli import main
from capsule_server.log import AccessRecord, JsonLinesLog
from capsule_server.report import IDENTITIES, HostPolicy, build_report, load_policies
from capsule_server.server import Limits
from capsule_server.testing import raw_request, running_server
from geminibot.policy import parse_robots

ROBOTS = parse_robots(
    b"User-agent: indexer\nDisallow: /no-index/\n\n"
    b"User-agent: archiver\nDisallow: /no-archive/\nCrawl-delay: 5\n\n"
    b"User-agent: *\nDisallow: /private/\nDisallow: /trap/\n"
)
POLICIES = {"x.test": HostPolicy(ROBOTS, ("/trap/",))}


def rec(
    second: float,
    path: str,
    client: str = "10.0.0.1",
    status: int = 20,
    meta: str | None = None,
    limited: str | None = None,
) -> AccessRecord:
    time = f"2026-11-23T10:00:{second:06.3f}Z"
    return AccessRecord(client, "x.test", path, status, meta=meta, limited=limited, time=time)


def test_compliant_indexer() -> None:
    [report] = build_report(
        [rec(0, "/robots.txt"), rec(10, "/"), rec(20, "/private/a"), rec(30, "/no-archive/a")],
        POLICIES,
    )
    assert report.robots_first == {"x.test": True}
    assert [(v.path, v.identities) for v in report.forbidden] == [
        ("/private/a", ("researcher", "webproxy", "*")),  # no group of their own: `*`
        ("/no-archive/a", ("archiver",)),
    ]
    assert report.consistent_with == ("indexer",)
    assert report.compliant


def test_robots_not_first_honeypot_and_rate() -> None:
    records = [
        rec(0, "/"),
        rec(0.5, "/robots.txt"),
        rec(1, "/trap/x"),
        rec(2, "/a", status=44, meta="10", limited="rate"),
        rec(3, "/a"),  # 9 s early
        rec(13, "/a"),
    ]
    [report] = build_report(records, POLICIES)
    assert report.robots_first == {"x.test": False}
    assert [v.path for v in report.honeypots] == ["/trap/x"]
    assert [v.path for v in report.rate_refused] == ["/a"]
    assert [(v.path, v.detail) for v in report.during_wait] == [("/a", "9.0 s early")]
    # archiver's Crawl-delay of 5 s was broken by every request less than 5 s apart
    assert all("archiver" in v.identities for v in report.too_fast)
    assert report.consistent_with == ()


def test_clients_are_separate_and_unread_requests_skipped() -> None:
    records = [
        rec(0, "/robots.txt", client="a"),
        rec(1, "/no-index/x", client="b"),
        AccessRecord(client="c", error="header timeout"),
    ]
    reports = build_report(records, POLICIES)
    assert [r.client for r in reports] == ["a", "b"]
    assert reports[0].compliant and reports[0].consistent_with == IDENTITIES
    assert reports[1].forbidden[0].identities == ("indexer",)


def test_policy_files_are_never_forbidden() -> None:
    deny = {"x.test": HostPolicy(parse_robots(b"User-agent: *\nDisallow: /\n"))}
    [report] = build_report([rec(0, "/robots.txt"), rec(1, "/agents.txt")], deny)
    assert report.compliant


def test_bundled_policies_include_fetch_outcomes(capsules_dir: Path) -> None:
    policies = load_policies(capsules_dir)
    assert not policies["robots-41.test"].robots.allowed("/", "geminibot")
    assert policies["honeypot.test"].honeypots == ("/trap/", "/secret-admin/")


async def test_report_end_to_end(
    capsules_dir: Path, cert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_path = tmp_path / "access.jsonl"
    limits = Limits(rate_burst=6, rate_per_second=0.001)
    with open(log_path, "w", encoding="utf-8") as fh:
        async with running_server(capsules_dir, cert_dir, limits, JsonLinesLog(fh)) as srv:
            assert srv.port is not None

            async def get(path: str, client: str) -> None:
                line = f"gemini://honeypot.test{path}\r\n".encode()
                await raw_request(srv.port or 0, line, "honeypot.test", local_address=client)

            for path in ("/robots.txt", "/", "/articles/a.gmi"):  # a polite bot
                await get(path, "127.0.0.1")
            for path in ("/", "/trap/a.gmi", "/drafts/a.gmi", "/a", "/b", "/c", "/d"):
                await get(path, "127.0.0.2")  # a rude one, also over its rate
    assert main(["report", str(log_path), "--json"]) == 1
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    polite, rude = out
    assert polite["client"] == "127.0.0.1" and polite["compliant"]
    assert polite["consistent_with"] == list(IDENTITIES)
    assert rude["robots_first"] == {"honeypot.test": False}
    assert [h["path"] for h in rude["honeypots"]] == ["/trap/a.gmi"]
    assert {"path": "/drafts/a.gmi"}.items() <= rude["forbidden"][1].items()
    assert rude["forbidden"][1]["for"] == list(IDENTITIES)  # the geminibot group decides
    assert len(rude["rate"]["refused_with_44"]) == 1
    assert rude["consistent_with"] == []
    assert main(["report", str(log_path)]) == 1
    text = capsys.readouterr().out
    assert "127.0.0.2: 7 requests to 1 hosts" in text and "honeypot hits: 1" in text


def test_report_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "missing.jsonl")]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"client": "a"}\nnot json\n')
    assert main(["report", str(bad)]) == 2
    assert "bad.jsonl:2: not JSON" in capsys.readouterr().err


def test_records_are_ordered_by_accept_time() -> None:
    # the long robots.txt connection ended (and was logged) after the page request
    [report] = build_report([rec(2, "/"), rec(1, "/robots.txt")], POLICIES)
    assert report.robots_first == {"x.test": True}
