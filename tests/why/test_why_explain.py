"""The reasons a crawl of capsules/why.test does not show (the routine is pure: the
records in, the answer out): failed requests, the per-host bound, a host's next turn and
its skip, a redirect, a link never queued by a run that did not record its options, and
the words of a policy line."""

from __future__ import annotations

from datetime import UTC, datetime

from geminibot.crawl.runrecord import RunOptions
from geminibot.policy.compare import bot_classes, compare
from geminibot.policy.site_policy import SitePolicy
from geminibot.why.explain import explain_url, policy_line
from geminibot.why.host import explain_host
from geminibot.why.records import (
    FetchRow,
    HostRecords,
    HostRow,
    PageRow,
    PolicyFileRow,
    Settings,
    UrlRecords,
    UrlRow,
)

URL = "gemini://h.test/a.gmi"
NOW = 1_800_000_000.0


def row(state: str, reason: str | None = None, next_visit: float | None = None) -> UrlRow:
    return UrlRow(7, state, reason, 1, "gemini://h.test/", NOW - 60, next_visit, 0)


def records(**kw: object) -> UrlRecords:
    return UrlRecords(URL, "h.test", Settings(), **kw)  # type: ignore[arg-type]


def test_failed_requests_name_the_error_and_count_the_failures() -> None:
    history = tuple(FetchRow(URL, None, "", "connection refused", NOW - i, 0.1) for i in (1, 2))
    answer = explain_url(
        records(row=row("failed", "connection refused", NOW + 3600), history=history), NOW
    )
    assert answer.code == "failed"
    assert answer.reason == "connection refused (2 of its last requests failed)"
    assert answer.next_visit == NOW + 3600


def test_the_per_host_bound_and_a_trap_are_told_apart() -> None:
    capped = explain_url(records(row=row("trapped", "more than 15000 URLs on the host")), NOW)
    assert capped.code == "host_bound"
    maze = explain_url(
        records(row=row("trapped", "a path segment repeated more than 3 times")), NOW
    )
    assert maze.code == "trap"


def test_a_queued_url_says_how_many_are_ahead_and_when_the_host_is_free() -> None:
    host = HostRow(NOW - 5, 0.2, NOW + 90, 1, "a wait of 700 s is beyond the longest")
    answer = explain_url(records(row=row("queued"), host_row=host, queued_before=12), NOW)
    assert answer.code == "queued"
    assert answer.reason.startswith("12 URLs of the capsule are ahead of it")
    assert "a wait of 700 s" in answer.reason
    assert answer.next_visit == NOW + 90


def test_a_page_not_found_says_since_when_and_when_it_is_asked_again() -> None:
    history = tuple(FetchRow(URL, 51, "not found", None, NOW - i * 86_400, 0.1) for i in (0, 1))
    missing = UrlRow(7, "not_found", "status 51", 1, None, NOW, NOW + 2 * 86_400, 0, 2, NOW)
    kept = PageRow(20, "text/gemini", "text/gemini", NOW - 3 * 86_400, None, None, True, "A")
    listed = explain_url(records(row=missing, page=kept, history=history), NOW)
    assert listed.code == "searchable" and listed.searchable  # still in, with its last answer
    assert "answered 51 (not found) 2 times in a row since" in listed.reason
    assert "leaves the index once it has stayed missing (3 answers" in listed.reason
    out = PageRow(51, "not found", None, NOW, None, None, False, "")
    gone_from_index = explain_url(records(row=missing, page=out, history=history), NOW)
    assert gone_from_index.code == "not_found" and not gone_from_index.searchable
    assert "the crawl asks again on" in gone_from_index.reason
    assert gone_from_index.next_visit == NOW + 2 * 86_400


def test_a_redirect_is_fetched_but_not_searchable() -> None:
    page = PageRow(31, "/b.gmi", None, NOW - 10, None, "gemini://h.test/b.gmi", False, "")
    answer = explain_url(records(row=row("done"), page=page), NOW)
    assert (answer.code, answer.reason) == ("not_text", "a redirect to gemini://h.test/b.gmi")
    assert answer.last_answer == "31 /b.gmi"


def test_a_link_never_queued_without_the_runs_record_says_what_it_may_be() -> None:
    answer = explain_url(records(linked_from=("gemini://h.test/",)), NOW)
    assert answer.code == "host_not_allowed"
    assert "--exclude" in answer.reason and answer.would_now is None


def test_the_runs_scope_is_the_crawlers() -> None:
    run = RunOptions(seed_hosts=("h.test",), allow_hosts=("*.example",), exclude=("*/d/*",))
    scope = run.scope()
    assert scope.host_allowed("h.test") and scope.host_allowed("A.example")
    assert not scope.host_allowed("other.test")
    assert scope.host_allowed("https://a.example") and scope.host_allowed("https://h.test")
    assert scope.excluded_by("gemini://h.test/d/x") == "*/d/*"


def test_a_policy_line_is_read_from_the_policy_cores_words() -> None:
    line = policy_line(
        "robots.txt: disallowed by 'Disallow: /x/' (line 5) in the group for Geminibot"
        " (User-agent line 4)",
        "geminibot",
        None,
    )
    assert (line.file, line.line, line.rule) == ("robots.txt", 5, "Disallow: /x/")
    assert (line.group, line.group_kind, line.mode) == (
        "Geminibot",
        "this crawler's product token",
        "precedence",
    )
    whole = policy_line("robots2.txt: crawl: no for this bot", "geminibot", True)
    assert (whole.file, whole.line, whole.group, whole.mode) == ("robots2.txt", 0, None, "strict")


def test_a_queued_url_waits_one_delay_per_url_ahead() -> None:
    robots = PolicyFileRow(
        "robots.txt", "success", "ok", 20, b"User-agent: *\nCrawl-delay: 30\n", NOW - 9, NOW + 9
    )
    host = HostRow(NOW - 5, 0.2, NOW + 90, 0, None)
    answer = explain_url(
        records(row=row("queued"), host_row=host, files=(robots,), queued_before=12), NOW
    )
    assert answer.next_visit == NOW + 90 + 12 * 30


def test_a_hosts_summary_says_where_its_web_policy_differs() -> None:
    gemini = PolicyFileRow(
        "robots.txt", "success", "ok", 20, b"User-agent: *\nDisallow: /private/\n", NOW, NOW + 9
    )
    web = PolicyFileRow(
        "robots.txt", "success", "ok", 200, b"User-agent: *\nDisallow: /\n", NOW, NOW + 9
    )
    same = HostRecords("h.test", Settings(), files=(gemini,), web_host="https://h.test")
    assert explain_host(same, NOW).differences is None
    both = HostRecords(
        "h.test", Settings(), files=(gemini,), web_host="https://h.test", web_files=(web,)
    )
    summary = explain_host(both, NOW)
    web_policy = SitePolicy.from_texts("http", web.body)
    gemini_policy = SitePolicy.from_texts("gemini", gemini.body)
    at = datetime.fromtimestamp(NOW, UTC)
    expected = compare(web_policy, gemini_policy, bot_classes([web_policy, gemini_policy]), at)
    assert summary.differences == expected.summary()
    assert summary.differences == "summary: 1 path differs for 5 of 5 bot classes"
