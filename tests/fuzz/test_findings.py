"""What the fuzz targets found, one test each (the inputs are also in fuzz/corpus/)."""

from __future__ import annotations

import pytest

from geminibot.http.html import parse_html
from geminibot.policy.agents_txt import parse_agents
from geminibot.policy.ext20 import parse_ext20
from geminibot.policy.render import PolicyError, load_policy, render


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


def test_a_2_0_regex_that_is_not_utf8_does_not_raise() -> None:
    """ext20 (then robots20): a regex with bytes that are not UTF-8 made the parser raise
    UnicodeEncodeError (from RE2). Whatever the rule then means, parsing and deciding
    must not raise."""
    v2 = parse_ext20(b"User-agent: *\nRobot-version: 2.0\nDisallow: ~ /a\xff\xfe\n")
    for url in ("gemini://h.test/a%FF%FE", "gemini://h.test/b"):
        decision = v2.decide(url, "geminibot")
        assert decision.allowed == all(g.allowed for g in decision.groups)
