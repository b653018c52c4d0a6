"""What the fuzz targets found, one test each (the inputs are also in fuzz/corpus/)."""

from __future__ import annotations

import pytest

from geminibot.http.html import parse_html
from geminibot.policy.agents_txt import parse_agents
from geminibot.policy.render import PolicyError, load_policy, render
from geminibot.policy.robots20 import parse_v2


def test_render_refuses_an_agents_path_its_own_parser_rejects() -> None:
    """render_roundtrip: '/pub%ic/' was written into agents.txt, whose parser then closed
    the whole site ("syntax error"). A '%' must start a %XX escape."""
    bad = load_policy('default_policy = "allow"\n[default]\nrules = [{ disallow = "/pub%ic/" }]\n')
    with pytest.raises(PolicyError, match="%XX"):
        render(bad, "agents")
    good = load_policy('default_policy = "allow"\n[default]\nrules = [{ disallow = "/a%20b/" }]\n')
    assert parse_agents(render(good, "agents")).valid


def test_a_javascript_base_url_is_ignored() -> None:
    """html: <base href='javascript:x'> made every relative link a javascript: URL."""
    for base in ("javascript:x", "data:text/html,x", "JavaScript:x", "mailto:a@b"):
        doc = parse_html(f"<base href='{base}'><a href=/z>z</a><area href=y>", "https://h.test/a/")
        assert [link.url for link in doc.links] == ["https://h.test/z", "https://h.test/a/y"]


def test_a_2_0_regex_that_is_not_utf8_is_a_broken_rule() -> None:
    """robots20: a regex with bytes that are not UTF-8 made parse_v2 raise
    UnicodeEncodeError (from RE2). It is now a bad regex: a Disallow matches every path."""
    v2 = parse_v2(b"User-agent: *\nRobot-version: 2.0\nDisallow: ~ /a\xff\xfe\n")
    assert [d.code for d in v2.diagnostics if d.level == "error"] == ["bad-regex"]
    assert not v2.decide("gemini://h.test/anything", "geminibot").allowed
