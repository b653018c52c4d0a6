"""Both matchers agree with a direct transcription of Google's algorithm.

Google's ``Matches`` keeps the set of path positions the pattern prefix can reach; the
longest matching pattern decides, an allow wins a tie, and among equal rules the first
line is the one reported (``matching_line``). A merged rule list is matched either by one
compiled expression (small lists) or by the head index (long ones): each is checked here
against the transcription on the deciding rule, not only the verdict, and on URLs of every
form, not only bare paths.
"""

from __future__ import annotations

import pytest
from fresh_python import run_python
from hypothesis import given, settings
from hypothesis import strategies as st

from geminibot.policy import Rule, parse_robots
from geminibot.policy import robots_match as engine
from geminibot.policy.paths import path_of


def google_matches(path: str, pattern: str) -> bool:
    positions = [0]
    for i, ch in enumerate(pattern):
        if ch == "$" and i == len(pattern) - 1:
            return positions[-1] == len(path)
        if ch == "*":
            positions = list(range(positions[0], len(path) + 1))
        else:
            positions = [p + 1 for p in positions if p < len(path) and path[p] == ch]
            if not positions:
                return False
    return True


def reference_rule(rules: list[Rule], path: str) -> Rule | None:
    """Google's deciding rule: per verdict the first line of the highest priority, then
    the allow unless the disallow's priority is higher. Priority 0 never decides."""
    best: dict[bool, Rule] = {}
    for rule in rules:
        if rule.pattern and google_matches(path, rule.pattern):
            held = best.get(rule.allow)
            if held is None or len(rule.pattern) > len(held.pattern):
                best[rule.allow] = rule
    allow, disallow = best.get(True), best.get(False)
    if disallow is not None and (allow is None or len(disallow.pattern) > len(allow.pattern)):
        return disallow
    return allow


def matchers(rules: list[Rule]) -> dict[str, engine.Matcher]:
    ranked = sorted((r for r in rules if r.pattern), key=engine._rank)
    return {
        "expression": engine._ExpressionMatcher(ranked),
        "indexed": engine._IndexedMatcher(ranked),
    }


def robots_text(rules: list[tuple[bool, str]]) -> str:
    return "User-agent: *\n" + "".join(f"{'Allow' if a else 'Disallow'}: {p}\n" for a, p in rules)


def parsed_rules(rules: list[tuple[bool, str]]) -> list[Rule]:
    return [rule for group in parse_robots(robots_text(rules)).groups for rule in group.rules]


ALPHABET = "ab/$*"
patterns = st.text(alphabet=ALPHABET, min_size=0, max_size=7).map(lambda s: "/" + s)
rule_sets = st.lists(st.tuples(st.booleans(), patterns), min_size=1, max_size=30)
paths = (
    st.text(alphabet="ab/$", max_size=12)
    .map(lambda s: "/" + s)
    .filter(lambda p: not p.startswith("//"))
)
#: URLs of every form path_of reads: absolute (some with a scheme the simple form does
#: not take), scheme-relative, bare; with queries, params, fragments, escapes, non-ASCII.
urls = st.builds(
    lambda scheme, authority, path: scheme + authority + path,
    st.sampled_from(["gemini://", "https://", "HTTP://", "git+ssh://", "//", ""]),
    st.sampled_from(["", "h", "h:1965", "u@h", "h?q", "h;p", "h#f"]),
    st.text(alphabet="ab/$?;#%é*", max_size=12),
)


@settings(max_examples=300, deadline=None)
@given(rule_sets, st.lists(paths, min_size=1, max_size=10))
def test_both_matchers_pick_googles_rule(rules: list[tuple[bool, str]], probe: list[str]) -> None:
    parsed = parsed_rules(rules)
    for name, matcher in matchers(parsed).items():
        for path in probe:
            assert matcher.best(path) == reference_rule(parsed, path), (name, rules, path)


@settings(max_examples=300, deadline=None)
@given(rule_sets, st.lists(urls, min_size=1, max_size=10))
def test_a_url_is_matched_on_its_path(rules: list[tuple[bool, str]], probe: list[str]) -> None:
    """The expression matches a plain URL as it stands, skipping scheme and authority;
    whatever the URL's form, the answer is the one for its path."""
    parsed = parsed_rules(rules)
    for name, matcher in matchers(parsed).items():
        for url in probe:
            want = reference_rule(parsed, path_of(url))
            assert matcher.best(url) == want, (name, rules, url, path_of(url))


def test_allowed_agrees_with_the_reference_through_the_public_api() -> None:
    rules = [(i % 3 == 0, f"/*x{i}*y") for i in range(40)] + [(False, "/*x1*"), (True, "/*x1*y$")]
    parsed = parsed_rules(rules)
    robots = parse_robots(robots_text(rules))
    for path in ("/x1y", "/ax12by", "/x30_y", "/x39-y-z", "/nothing", "/x1", "/x1yz"):
        rule = reference_rule(parsed, path)
        assert robots.allowed(path, "bot") == (rule is None or rule.allow), path
        assert robots.decide(path, "bot").rule == rule, path


@pytest.mark.parametrize("strategy", ["expression", "indexed"])
def test_equal_rules_report_the_first_line(strategy: str) -> None:
    """Two Disallow rules of 7 octets match /admin/x.php: Google reports the earlier line,
    whichever head it has (the index used to report the one in the shorter bucket)."""
    for first, second in (("/*.php$", "/admin/"), ("/admin/", "/*.php$")):
        parsed = parsed_rules([(False, first), (False, second)])
        rule = matchers(parsed)[strategy].best("gemini://h/admin/x.php")
        assert rule is not None and (rule.line, rule.pattern) == (2, first)


# --------------------------------------------------------------------------------------
# Which matcher a rule list gets: the limits, at their edges
# --------------------------------------------------------------------------------------


def kind(rules: list[tuple[bool, str]]) -> str:
    return type(engine.matcher_for(parsed_rules(rules))).__name__


def test_rule_count_limit() -> None:
    at_limit = [(False, f"/p{i}") for i in range(engine.EXPRESSION_MAX_RULES)]
    assert kind(at_limit) == "_ExpressionMatcher"
    assert kind([*at_limit, (True, "/one-more")]) == "_IndexedMatcher"
    # Empty patterns never decide and do not count.
    assert kind([*at_limit, (False, "")]) == "_ExpressionMatcher"


def test_wildcard_text_limit() -> None:
    # "/*" then 254 characters: 254 after the star, plus "/*ab" (2): 256 in all.
    at_limit = [(False, "/*" + "a" * 253 + "b"), (False, "/*ab")]
    assert sum(engine._wild_text(p) for _, p in at_limit) == engine.EXPRESSION_MAX_WILD_TEXT
    assert kind(at_limit) == "_ExpressionMatcher"
    assert kind([*at_limit, (False, "/x*y")]) == "_IndexedMatcher"


#: Rule lists at the expression's limits that make its scans work hardest: long runs of
#: one character the path is made of, ending in one it lacks, as middle, last and
#: anchored segments. A backtracking matcher takes hours on some of them.
HOSTILE_PROGRAM = """
import sys
from geminibot.policy import parse_robots
rules = {
    "middle": ["/*" + "a" * 252 + "b*c"],
    "last": ["/*" + "a" * 253 + "b"],
    "anchored": ["/*" + "a" * 253 + "b$"],
    "many": [f"/*aa{i % 10}b" for i in range(64)],
    "stars": ["/" + "*a" * 127 + "*b"],
    "count": [f"/*{i % 10}" for i in range(256)] + [f"/p{i}" for i in range(256)],
}[sys.argv[1]]
robots = parse_robots("User-agent: *\\n" + "".join(f"Disallow: {p}\\n" for p in rules))
print(type(robots._plan("bot", (), False)[0].matcher).__name__)
for n in (1024, 8192):
    print(robots.allowed("gemini://h/" + "a" * n, "bot"))
"""


@pytest.mark.parametrize("case", ["middle", "last", "anchored", "many", "stars", "count"])
def test_hostile_rules_at_the_limits_cannot_stall_a_decision(case: str) -> None:
    """Each decision here takes milliseconds. It runs in a subprocess with a generous
    limit, so that a regression to a backtracking form fails instead of hanging."""
    out = run_python(HOSTILE_PROGRAM, case)
    # At the limits, still the expression; no rule matches a path of a's only.
    assert out.split() == ["_ExpressionMatcher", "True", "True"]
