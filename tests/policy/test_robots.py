"""The robots.txt engine: parsing edges, matching, the two virtual-agent modes, limits.

Google-reference agreement is proved case by case in test_google_conformance.py; this file
covers our own surface: modes, explanations, diagnostics, limits.
"""

import pytest

from geminibot.policy import MAX_ROBOTS_BYTES, VIRTUAL_AGENTS, RobotsFile, parse_robots
from geminibot.policy.robots_parse import MAX_LINE_BYTES

VA_FILE = b"""\
User-agent: *
Disallow: /private/

User-agent: archiver
Disallow: /journal/

User-agent: indexer
Disallow: /drafts/

User-agent: researcher
Disallow: /
"""

OWN_FILE = (
    VA_FILE
    + b"""
User-agent: geminibot
Disallow: /own-only/
"""
)


class TestPrecedenceMode:
    def test_star_applies_when_no_virtual_agent_group_matches(self) -> None:
        robots = parse_robots(VA_FILE)
        decision = robots.decide("gemini://h/private/a", "bot", ("webproxy",))
        assert not decision.allowed
        assert [(g.token, g.role) for g in decision.groups] == [("*", "default")]

    def test_virtual_agent_group_replaces_star(self) -> None:
        robots = parse_robots(VA_FILE)
        # indexer's group says nothing about /private/, and * no longer applies.
        assert robots.allowed("gemini://h/private/a", "bot", ("indexer",))
        assert not robots.allowed("gemini://h/drafts/a", "bot", ("indexer",))

    def test_every_matching_virtual_agent_must_allow(self) -> None:
        robots = parse_robots(VA_FILE)
        both = ("indexer", "archiver")
        decision = robots.decide("/journal/x", "bot", both)
        assert not decision.allowed
        assert decision.rule is not None and decision.rule.line == 5
        assert "archiver" in decision.reason
        assert not robots.allowed("/drafts/x", "bot", both)
        assert robots.allowed("/other", "bot", both)

    def test_own_token_group_decides_alone(self) -> None:
        robots = parse_robots(OWN_FILE)
        assert robots.allowed("/drafts/x", "geminibot", ("indexer",))
        assert robots.allowed("/private/x", "GeminiBot", ("researcher",))
        decision = robots.decide("/own-only/x", "geminibot", ("indexer",))
        assert not decision.allowed
        assert [g.role for g in decision.groups] == ["own"]

    def test_no_groups_at_all_allows_everything(self) -> None:
        robots = parse_robots(b"User-agent: other\nDisallow: /\n")
        decision = robots.decide("/x", "bot", ("indexer",))
        assert decision.allowed
        assert decision.groups == ()
        assert "no group names" in decision.reason


class TestStrictMode:
    def test_own_virtual_and_star_all_apply(self) -> None:
        robots = parse_robots(OWN_FILE)
        decision = robots.decide("/private/x", "geminibot", ("indexer",), strict=True)
        assert not decision.allowed
        assert [(g.token, g.role) for g in decision.groups] == [
            ("geminibot", "own"),
            ("indexer", "virtual"),
            ("*", "default"),
        ]
        assert decision.mode == "strict"
        assert not robots.allowed("/drafts/x", "geminibot", ("indexer",), strict=True)
        assert not robots.allowed("/own-only/x", "geminibot", ("indexer",), strict=True)
        assert robots.allowed("/open", "geminibot", ("indexer",), strict=True)

    def test_strict_without_virtual_agents_is_own_plus_star(self) -> None:
        robots = parse_robots(OWN_FILE)
        assert robots.allowed("/private/x", "geminibot")
        assert not robots.allowed("/private/x", "geminibot", strict=True)


class TestMatching:
    @pytest.mark.parametrize(
        ("pattern", "path", "matches"),
        [
            ("/fish", "/fish", True),
            ("/fish", "/fish.html", True),
            ("/fish", "/Fish.asp", False),
            ("/fish*", "/fishheads/yummy.html", True),
            ("/*.php", "/folder/filename.php?parameters", True),
            ("/*.php$", "/filename.php?parameters", False),
            ("/*.php$", "/filename.php", True),
            ("/fish*.php", "/fishheads/catfish.php?parameters", True),
            ("/a$b", "/a$b/c", True),
            ("*", "/anything", True),
            ("/a*b*c$", "/aXbYc", True),
            ("/a*b*c$", "/aXbYcZ", False),
            ("/a*b*c$", "/abcbc", True),
            ("/**x", "/yx", True),
            ("$", "/", False),
        ],
    )
    def test_pattern(self, pattern: str, path: str, matches: bool) -> None:
        robots = parse_robots(f"User-agent: *\nDisallow: {pattern}\n")
        assert robots.allowed(path, "bot") is not matches

    def test_longest_match_wins_and_allow_wins_ties(self) -> None:
        robots = parse_robots(
            b"User-agent: *\nDisallow: /a\nAllow: /a/b\nDisallow: /a/b/c\nAllow: /x\nDisallow: /x\n"
        )
        assert not robots.allowed("/a/x", "bot")
        assert robots.allowed("/a/b/x", "bot")
        assert not robots.allowed("/a/b/c", "bot")
        decision = robots.decide("/x", "bot")
        assert decision.allowed and decision.rule is not None and decision.rule.allow

    def test_empty_disallow_allows_everything(self) -> None:
        robots = parse_robots(b"User-agent: *\nDisallow:\n")
        assert robots.allowed("/anything", "bot")
        assert any(d.code == "empty-disallow" for d in robots.diagnostics)

    def test_percent_encoding_is_normalised_on_both_sides(self) -> None:
        robots = parse_robots("User-agent: *\nDisallow: /caf%c3%a9\nDisallow: /ツ\n")
        assert not robots.allowed("/café", "bot")
        assert not robots.allowed("/caf%C3%A9/x", "bot")
        assert not robots.allowed("gemini://h/%e3%83%84", "bot")
        # Unreserved characters are not decoded (as Google's parser).
        assert robots.allowed("/%61", "bot") is True

    def test_hostile_pattern_is_fast_enough_to_finish(self) -> None:
        pattern = "/" + "*a" * 200 + "b"
        robots = parse_robots(f"User-agent: *\nDisallow: {pattern}\n")
        assert robots.allowed("/" + "a" * 5000, "bot")

    def test_url_forms(self) -> None:
        robots = parse_robots(b"User-agent: *\nDisallow: /x?q\n")
        for url in ("gemini://host/x?q=1", "https://host:8443/x?q", "/x?q#frag", "//host/x?q"):
            assert not robots.allowed(url, "bot"), url
        assert robots.allowed("gemini://host/x#?q", "bot")

    def test_robots_txt_is_always_allowed(self) -> None:
        robots = parse_robots(b"User-agent: *\nDisallow: /\n")
        assert robots.allowed("gemini://h/robots.txt", "bot", ("indexer",), strict=True)
        assert not robots.allowed("gemini://h/robots.txt.bak", "bot")


class TestParsing:
    def test_never_raises_on_odd_input(self) -> None:
        for data in (b"", b"\x00\xff\xfe", b"\r\r\n\n", "\udcff".encode("utf-8", "surrogatepass")):
            assert isinstance(parse_robots(data), RobotsFile)
        assert isinstance(parse_robots("\ud800 lone surrogate"), RobotsFile)

    def test_line_endings_and_bom(self) -> None:
        for sep in (b"\n", b"\r", b"\r\n"):
            robots = parse_robots(b"\xef\xbb\xbfUser-agent: *" + sep + b"Disallow: /x" + sep)
            assert not robots.allowed("/x", "bot")
            assert robots.groups[0].rules[0].line == 2
        # A partial byte order mark is skipped too, as by Google's parser.
        assert not parse_robots(b"\xef\xbbUser-agent: *\nDisallow: /x\n").allowed("/x", "bot")

    def test_typos_are_accepted_and_reported(self) -> None:
        robots = parse_robots(b"useragent: *\ndisalow: /a\nDissallow: /b\nUser agent: x\n")
        assert not robots.allowed("/a", "bot")
        assert not robots.allowed("/b", "bot")
        typos = [d.line for d in robots.diagnostics if d.code == "typo-accepted"]
        assert typos == [1, 2, 3, 4]

    def test_missing_colon_accepted_for_two_words_only(self) -> None:
        robots = parse_robots(b"User-agent *\nDisallow /a\nDisallow /b c\n")
        assert not robots.allowed("/a", "bot")
        assert robots.allowed("/b", "bot")
        assert [d.code for d in robots.diagnostics if d.line == 3] == ["no-separator"]

    def test_only_rules_end_a_group(self) -> None:
        # As Google's ID_LineSyntax_Groups_OtherRules: Sitemap, Crawl-delay and unknown
        # lines between User-agent lines do not end the group.
        for between in (b"Foo: bar", b"Sitemap: gemini://h/s", b"Crawl-delay: 5"):
            robots = parse_robots(b"User-agent: a\n" + between + b"\nUser-agent: b\nDisallow: /\n")
            assert not robots.allowed("/x", "a"), between
            assert not robots.allowed("/x", "b"), between
            assert [d.line for d in robots.diagnostics if d.code == "group-not-closed"] == [2]
        split = parse_robots(b"User-agent: a\nDisallow: /x\nUser-agent: b\nDisallow: /\n")
        assert split.allowed("/y", "a") and not split.allowed("/y", "b")

    def test_groups_for_one_token_are_merged(self) -> None:
        robots = parse_robots(
            b"User-agent: a\nDisallow: /x\n\nUser-agent: b\nDisallow: /\n\nUser-agent: A\nDisallow: /y\n"
        )
        assert not robots.allowed("/x", "a") and not robots.allowed("/y", "a")
        assert robots.decide("/x", "a").groups[0].lines == (1, 7)

    def test_product_token_is_the_leading_letters(self) -> None:
        robots = parse_robots(b"User-agent: geminibot/1.0 (+gemini://x)\nDisallow: /\n")
        assert not robots.allowed("/x", "geminibot")
        # A version after the token is the harmless, intended form: an info.
        assert [(d.level, d.code) for d in robots.diagnostics] == [("info", "agent-token-suffix")]
        # A cut inside the name changes which crawlers the group names: a warning.
        cut = parse_robots(b"User-agent: AI2Bot\nDisallow: /\n").diagnostics
        assert [(d.level, d.code) for d in cut] == [("warning", "agent-token-cut")]
        assert "'AI'" in cut[0].message
        # '* text' still means '*'.
        assert not parse_robots(b"User-agent: * everyone\nDisallow: /\n").allowed("/x", "bot")

    def test_rules_before_any_user_agent_are_errors(self) -> None:
        robots = parse_robots(b"Disallow: /\nUser-agent: *\nAllow: /\n")
        assert robots.allowed("/x", "bot")
        assert [(d.line, d.level) for d in robots.diagnostics] == [(1, "error")]

    def test_nul_ends_a_line(self) -> None:
        robots = parse_robots(b"User-agent: *\nDisallow: /a\x00bc\n")
        assert not robots.allowed("/a", "bot")
        assert any(d.code == "nul-byte" and d.line == 2 for d in robots.diagnostics)

    def test_crawl_delay_and_sitemaps(self) -> None:
        robots = parse_robots(
            b"User-agent: *\nCrawl-delay: 3\nDisallow: /x\nUser-agent: indexer\nCrawl-delay: 7.5\nDisallow:\n"
            b"Sitemap: gemini://h/map.gmi\nCrawl-delay: soon\n"
        )
        assert robots.crawl_delay("bot") == 3
        assert robots.crawl_delay("bot", ("indexer",)) == 7.5
        assert robots.crawl_delay("bot", ("indexer",), strict=True) == 7.5
        assert robots.crawl_delay("other", ("webproxy",)) == 3
        assert robots.sitemaps == ("gemini://h/map.gmi",)
        assert any(d.code == "bad-crawl-delay" and d.line == 8 for d in robots.diagnostics)

    def test_unknown_fields_are_reported(self) -> None:
        robots = parse_robots(b"User-agent: *\nFrobnicate: yes\nHost: example.org\n")
        codes = {d.line: (d.level, d.code) for d in robots.diagnostics}
        assert codes[2] == ("warning", "unknown-field")
        assert codes[3] == ("info", "extension-field")


class TestLimits:
    def test_size_cut_off_at_500_kib_keeps_whole_lines(self) -> None:
        line = b"Disallow: /a-fairly-long-path-to-fill-the-file\n"
        head = b"User-agent: *\n"
        body = head + line * ((MAX_ROBOTS_BYTES - len(head)) // len(line))
        # The rule that straddles the limit is dropped whole, not cut into a shorter prefix.
        straddle = b"Allow: /" + b"x" * 100 + b"\n"
        tail = b"Disallow: /after-the-limit\n"
        robots = parse_robots(body + straddle + tail)
        assert robots.truncated and robots.size > MAX_ROBOTS_BYTES
        assert robots.allowed("/after-the-limit", "bot")
        assert not robots.allowed("/a-fairly-long-path-to-fill-the-file", "bot")
        assert robots.allowed("/" + "x" * 100, "bot")
        assert any(d.code == "size-limit" for d in robots.diagnostics)

    def test_exactly_500_kib_is_read_whole(self) -> None:
        head = b"User-agent: *\nDisallow: /last\n"
        data = b"#" * (MAX_ROBOTS_BYTES - len(head)) + b"\n" + head
        data = data[len(data) - MAX_ROBOTS_BYTES :]
        assert len(data) == MAX_ROBOTS_BYTES
        robots = parse_robots(data)
        assert not robots.truncated
        assert not robots.allowed("/last", "bot")

    def test_long_line_is_cut_at_the_line_limit(self) -> None:
        pattern = b"/" + b"p" * (MAX_LINE_BYTES + 100)
        robots = parse_robots(b"User-agent: *\nDisallow: " + pattern + b"\n")
        kept = robots.groups[0].rules[0].pattern
        assert len(b"Disallow: ") + len(kept) == MAX_LINE_BYTES
        assert any(d.code == "line-too-long" for d in robots.diagnostics)


class TestArguments:
    def test_unknown_virtual_agent_is_a_value_error(self) -> None:
        with pytest.raises(ValueError, match="unknown virtual agent 'crawler'"):
            parse_robots(b"").decide("/", "bot", ("crawler",))

    def test_virtual_agents_are_the_four_of_the_companion_spec(self) -> None:
        assert VIRTUAL_AGENTS == ("archiver", "indexer", "researcher", "webproxy")

    def test_blanket_policies(self) -> None:
        deny = RobotsFile.disallow_all("robots.txt unreachable")
        assert not deny.allowed("/x", "bot")
        assert deny.allowed("/robots.txt", "bot")
        assert "unreachable" in deny.decide("/x", "bot").reason
        assert RobotsFile.allow_all("gone").allowed("/x", "bot")
