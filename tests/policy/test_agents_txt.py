"""agents.txt: hash verification, directives, limit=, and failing closed on any fault."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geminibot.policy.agents_txt import content_hash, draft_form_line, parse_agents

DIRECTIVES = ["/status ALLOW", "/dashboard ALLOW limit=50", "/admin DISALLOW"]
URLS = ["/status", "/status/x", "/dashboard/a", "/admin", "/admin/x", "/other", "/"]


def make_file(directives: list[str], *, crlf: bool = False) -> bytes:
    digest = hashlib.sha256("\n".join(directives).encode()).hexdigest()
    lines = ["# version: 1.0", "# generated-by: test", f"*{digest}", "", *directives, "# end"]
    nl = "\r\n" if crlf else "\n"
    return (nl.join(lines) + nl).encode()


GOOD = make_file(DIRECTIVES)


def test_correct_file_is_obeyed() -> None:
    f = parse_agents(GOOD)
    assert f.valid and f.diagnostics == ()
    assert f.metadata == (("version", "1.0"), ("generated-by", "test"))
    assert f.decide("https://h.example/status").allowed
    assert f.decide("/dashboard/x?y=1").allowed
    d = f.decide("/admin/panel")
    assert not d.allowed and d.directive is not None and d.directive.line == 7
    assert f.decide("/elsewhere").allowed  # no directive covers it


def test_content_hash_is_sha256_of_directive_lines_joined() -> None:
    assert content_hash([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert content_hash(["a", "b"]) == hashlib.sha256(b"a\nb").hexdigest()


def test_crlf_line_ends_hash_like_lf() -> None:
    assert parse_agents(make_file(DIRECTIVES, crlf=True)).valid


def test_limit_reading_requests_per_minute() -> None:
    f = parse_agents(GOOD)
    interval = f.limit_interval("/dashboard/x")
    assert interval is not None and interval[0] == 1.2 and interval[1].line == 6
    assert f.limit_interval("/status") is None
    assert f.limit_interval() is not None  # site-wide: the strictest limit


def test_longest_prefix_wins_and_disallow_wins_ties() -> None:
    f = parse_agents(make_file(["/a DISALLOW", "/a/b ALLOW", "/c ALLOW", "/c DISALLOW"]))
    assert not f.decide("/a/x").allowed
    assert f.decide("/a/b/c").allowed
    assert not f.decide("/c").allowed


def assert_restricted(data: bytes) -> None:
    f = parse_agents(data)
    assert not f.valid
    for url in URLS:
        assert not f.decide(url).allowed, url
    assert f.decide("/agents.txt").allowed  # so that a fixed file can be fetched
    assert f.limit_interval() is None


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_one_changed_byte_in_the_directives_restricts_the_whole_site(data: st.DataObject) -> None:
    start = GOOD.index(b"/status")
    end = GOOD.index(b"# end")
    positions = [i for i in range(start, end) if GOOD[i : i + 1] != b"\n"]
    pos = data.draw(st.sampled_from(positions), label="position")
    new = data.draw(st.integers(0, 255).filter(lambda b: b != GOOD[pos]), label="byte")
    changed = GOOD[:pos] + bytes([new]) + GOOD[pos + 1 :]
    assert_restricted(changed)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_one_changed_byte_in_the_hash_restricts_the_whole_site(data: st.DataObject) -> None:
    start = GOOD.index(b"*")
    pos = data.draw(st.integers(start, start + 64))
    new = data.draw(st.integers(0, 255).filter(lambda b: b not in (GOOD[pos], 10, 13)))
    changed = GOOD[:pos] + bytes([new]) + GOOD[pos + 1 :]
    if draft_form_line(changed):
        assert_restricted(changed)
    else:  # no longer '*' + 64 hex digits: not the draft's form at all (ignored)
        assert_ignored(changed)


def assert_ignored(data: bytes | str) -> None:
    f = parse_agents(data)
    assert f.valid and f.ignored is not None and not f.directives
    for url in URLS:
        assert f.decide(url).allowed, url
    assert [(d.level, d.code) for d in f.diagnostics] == [("info", "not-this-dialect")]


def test_faults_each_restrict_with_the_line() -> None:
    upper = GOOD.replace(GOOD[GOOD.index(b"*") + 1 : GOOD.index(b"*") + 65], b"E" * 64)
    assert_restricted(upper)
    syntax = make_file(["/status ALLOW", "/x allow"])
    f = parse_agents(syntax)
    assert f.fault_line == 6 and [d.line for d in f.diagnostics if d.level == "error"] == [0, 6]
    # Lint says what the fault does, not only which line is wrong.
    assert f.diagnostics[0].code == "site-restricted"
    assert "the whole site is restricted" in f.diagnostics[0].message
    assert_restricted(syntax)
    assert_restricted(make_file(["/d ALLOW limit=fast"]))
    assert_restricted(make_file(["/d ALLOW limit=0"]))
    assert_restricted(make_file(["status ALLOW"]))
    assert_restricted(make_file(["/a  ALLOW"]))
    assert_restricted(make_file(["/a ALLOW k=1 k=2"]))
    assert_restricted(GOOD + b"\xff\n")


@pytest.mark.parametrize(
    "body",
    [
        b"# only comments\n/status ALLOW\n",
        b"User-agent: *\nAllow: /\n",
        b"ai-train: yes\nai-index: no\n",
        b"# Welcome\n=> /about.gmi About this capsule\n",
        b"<!DOCTYPE html>\n<html><body>Not found</body></html>\n",
        b"\xff\xd8\xff\xe0 a JPEG",
        b"\xff" + GOOD,
        b"",
    ],
)
def test_a_file_not_in_the_drafts_form_is_ignored_not_closed(body: bytes) -> None:
    # Every real agents.txt follows another convention, and a
    # catch-all server answers a page; neither may close the whole site.
    assert_ignored(body)


def test_unknown_parameter_is_reported_not_fatal() -> None:
    f = parse_agents(make_file(["/a ALLOW burst=5"]))
    assert f.valid
    assert [(d.line, d.code) for d in f.diagnostics] == [(5, "unknown-parameter")]


def test_size_limit_edge() -> None:
    from geminibot.policy.agents_txt import MAX_AGENTS_BYTES

    def sized(total: int) -> bytes:
        head = make_file(["/a DISALLOW"])
        pad = total - len(head)
        return head[:-1] + b"\n#" + b"x" * (pad - 2) + b"\n" if pad > 2 else head

    at_limit = sized(MAX_AGENTS_BYTES)
    assert len(at_limit) == MAX_AGENTS_BYTES
    assert parse_agents(at_limit).valid
    over = sized(MAX_AGENTS_BYTES + 1)
    assert len(over) == MAX_AGENTS_BYTES + 1
    assert_restricted(over)
