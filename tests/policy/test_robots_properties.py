"""Properties of the robots.txt engine, checked on generated files with hypothesis.

- any bytes parse, and every query on the result answers, without an exception;
- ``/robots.txt`` is always allowed, whatever the file says;
- the decision does not depend on where the groups for other crawlers sit in the file;
- with no group for the bot's own token, strict mode never allows what precedence mode
  forbids (strict applies a superset of the groups);
- over generated patterns with ``*`` and ``$`` and generated paths, the engine agrees with
  a small independent reference of RFC 9309's longest-match rule written here;
- ``path_of`` agrees with a step-by-step reference of Google's ``GetPathParamsQuery`` on
  generated URLs (ASCII without ``%``, where our normalisation changes nothing).
"""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from geminibot.policy import VIRTUAL_AGENTS, parse_robots
from geminibot.policy.ext20 import parse_ext20
from geminibot.policy.paths import path_of
from geminibot.urls import normalise_path_query

BOT = "geminibot"
#: Tokens whose groups can apply to the bot: its own, the virtual agents, the default.
RELEVANT = (BOT, *VIRTUAL_AGENTS, "*")

# Hypothesis defaults, with no deadline: the machine is shared, timings are noisy.
PROPERTY = settings(deadline=None)

# --------------------------------------------------------------------------------------
# Generators
# --------------------------------------------------------------------------------------

#: A small alphabet so that generated patterns and paths often meet.
PATH_CHARS = "ab/."
#: Paths; ``$`` and ``*`` are ordinary characters in a URL path. They are asked about as
#: absolute URLs, since a bare "//a/b" would read as a scheme-relative URL (path "/b").
paths = st.text(alphabet=PATH_CHARS + "$*", max_size=8).map(lambda s: "/" + s)


def url(path: str) -> str:
    return "gemini://host.test" + path


#: Rule patterns: a leading ``/`` or ``*``, wildcards anywhere, ``$`` anywhere (it anchors
#: only at the end; elsewhere it is a literal).
patterns = st.builds(
    lambda head, body: head + body,
    st.sampled_from(["/", "*", "/*"]),
    st.text(alphabet=PATH_CHARS + "*$", max_size=6),
)


@dataclass(frozen=True)
class GroupSpec:
    tokens: tuple[str, ...]
    rules: tuple[tuple[bool, str], ...]  # (allow, pattern); never empty
    delay: int | None = None

    def render(self) -> str:
        head = "".join(f"User-agent: {t}\n" for t in self.tokens)
        body = "".join(f"{'Allow' if a else 'Disallow'}: {p}\n" for a, p in self.rules)
        tail = "" if self.delay is None else f"Crawl-delay: {self.delay}\n"
        return head + body + tail


rules = st.lists(st.tuples(st.booleans(), patterns), min_size=1, max_size=4).map(tuple)
#: Other crawlers' tokens: letters only (a product token), never one of RELEVANT.
other_tokens = st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=6).filter(
    lambda t: t not in RELEVANT
)


def groups_for(tokens: st.SearchStrategy[str]) -> st.SearchStrategy[GroupSpec]:
    return st.builds(
        GroupSpec,
        st.lists(tokens, min_size=1, max_size=2, unique=True).map(tuple),
        rules,
        st.none() | st.integers(0, 30),
    )


relevant_groups = groups_for(st.sampled_from(RELEVANT))
other_groups = groups_for(other_tokens)
virtual_agent_sets = st.lists(st.sampled_from(VIRTUAL_AGENTS), max_size=4, unique=True)


def render(groups: list[GroupSpec]) -> str:
    # Every group has at least one rule, so each User-agent run starts a new group.
    return "".join(g.render() for g in groups)


# --------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------


@PROPERTY
@given(st.binary(max_size=2048), paths)
def test_any_bytes_parse_and_answer(data: bytes, path: str) -> None:
    robots = parse_robots(data)
    for strict in (False, True):
        robots.allowed(url(path), BOT, VIRTUAL_AGENTS, strict=strict)
        decision = robots.decide(url(path), BOT, ("indexer",), strict=strict)
        assert decision.reason
        robots.crawl_delay(BOT, VIRTUAL_AGENTS, strict=strict)
    assert isinstance(robots.sitemaps, tuple)
    assert all(d.line >= 0 for d in robots.diagnostics)


#: Lines that look like robots.txt, mangled: to reach deeper than random bytes do.
robotsish_lines = st.one_of(
    st.builds(
        lambda key, sep, value: f"{key}{sep}{value}",
        st.sampled_from(
            [
                *("User-agent", "user agent", "Allow", "Disallow", "disalow"),
                *("Sitemap", "Crawl-delay", "Foo", "", "#"),
            ]
        ),
        st.sampled_from([": ", ":", " ", "\t", " : "]),
        st.text(max_size=12),
    ),
    st.text(max_size=20),
)


@PROPERTY
@given(
    st.lists(robotsish_lines, max_size=12),
    st.sampled_from(["\n", "\r\n", "\r"]),
    st.sampled_from(["", "\ufeff"]),
    paths,
)
def test_robots_like_text_parses_and_answers(
    lines: list[str], eol: str, bom: str, path: str
) -> None:
    robots = parse_robots(bom + eol.join(lines))
    for strict in (False, True):
        assert isinstance(robots.allowed(url(path), BOT, ("archiver",), strict=strict), bool)
        robots.decide(url(path), BOT, VIRTUAL_AGENTS, strict=strict)


#: A version 2.0 group for a crawler that is not the bot.
VERSION_GROUP = "User-agent: alfred\nRobot-version: 2.0\nDisallow: *.cgi\n\n"


#: Lines Google's parser reads in its own ways: typos, key prefixes, a missing colon,
#: comments, lines that do not end a group.
google_lines = st.one_of(
    st.builds(
        lambda key, sep, value: f"{key}{sep}{value}",
        st.sampled_from(["Allow", "Disallow", "disalow", "diasllow", "Disallowed", "dissallow"]),
        st.sampled_from([": ", ":", " ", "\t"]),
        st.builds(lambda p, c: p + c, patterns, st.sampled_from(["", "#x", " # c"])),
    ),
    st.builds(
        lambda key, sep, token: f"{key}{sep}{token}",
        st.sampled_from(["User-agent", "user agent", "useragent"]),
        st.sampled_from([": ", ":", " "]),
        st.sampled_from([*RELEVANT, "other", "geminibot/1.0", "* junk"]),
    ),
    st.sampled_from(["", "# comment", "Sitemap: https://h.test/s.xml", "Crawl-delay: 2"]),
)


@PROPERTY
@given(
    st.lists(st.one_of(google_lines, robotsish_lines), max_size=14),
    virtual_agent_sets,
    st.booleans(),
    st.lists(paths, min_size=1, max_size=4),
)
def test_a_version_group_leaves_the_rfc_reading_of_the_others(
    lines: list[str], vas: list[str], strict: bool, asked: list[str]
) -> None:
    """With a Robot-version group for another crawler in the file, the 2.0 engine decides
    the bot's (1.0) groups exactly as the RFC 9309 engine (Google's reading) does, typos,
    missing colons and odd groupings included."""
    text = VERSION_GROUP + "\n".join(lines) + "\n"
    rfc, ext = parse_robots(text), parse_ext20(text)
    assert ext.has_version_lines
    for path in asked:
        expected = rfc.allowed(url(path), BOT, vas, strict=strict)
        assert ext.decide(url(path), BOT, vas, strict=strict).allowed is expected, text


@PROPERTY
@given(
    st.lists(st.one_of(relevant_groups, other_groups), max_size=6),
    virtual_agent_sets,
    st.booleans(),
    st.sampled_from(["/robots.txt", "gemini://host.test/robots.txt", "https://h.test/robots.txt"]),
)
def test_robots_txt_always_allowed(
    groups: list[GroupSpec], vas: list[str], strict: bool, target: str
) -> None:
    robots = parse_robots(render([*groups, GroupSpec(("*", BOT), ((False, "/"),))]))
    assert robots.allowed(target, BOT, vas, strict=strict)
    decision = robots.decide(target, BOT, vas, strict=strict)
    assert decision.allowed
    assert decision.rule is None


@PROPERTY
@given(
    st.lists(relevant_groups, max_size=4),
    st.lists(other_groups, max_size=5),
    st.randoms(use_true_random=False),
    virtual_agent_sets,
    st.lists(paths, min_size=1, max_size=6),
)
def test_unrelated_group_order_does_not_matter(
    relevant: list[GroupSpec],
    others: list[GroupSpec],
    rnd: random.Random,
    vas: list[str],
    probe: list[str],
) -> None:
    # The same file twice: the other crawlers' groups shuffled and moved around between
    # the relevant ones, whose own order is kept.
    first = render(relevant + others)
    shuffled = others[:]
    rnd.shuffle(shuffled)
    mixed = relevant[:]
    for group in shuffled:
        mixed.insert(rnd.randint(0, len(mixed)), group)
    second = render(mixed)
    a, b = parse_robots(first), parse_robots(second)
    for strict in (False, True):
        for path in probe:
            assert a.allowed(url(path), BOT, vas, strict=strict) == b.allowed(
                url(path), BOT, vas, strict=strict
            ), (first, second, path, vas, strict)
        assert a.crawl_delay(BOT, vas, strict=strict) == b.crawl_delay(BOT, vas, strict=strict)


no_own_groups = groups_for(st.sampled_from([*VIRTUAL_AGENTS, "*"]))


@PROPERTY
@given(
    st.lists(st.one_of(no_own_groups, other_groups), max_size=6),
    virtual_agent_sets,
    st.lists(paths, min_size=1, max_size=6),
)
def test_strict_never_allows_what_precedence_forbids(
    groups: list[GroupSpec], vas: list[str], probe: list[str]
) -> None:
    robots = parse_robots(render(groups))  # no group names BOT: no token generated is BOT
    for path in probe:
        if robots.allowed(url(path), BOT, vas, strict=True):
            assert robots.allowed(url(path), BOT, vas, strict=False), (render(groups), path, vas)


# --------------------------------------------------------------------------------------
# An independent reference of the longest-match rule
# --------------------------------------------------------------------------------------


def reference_matches(pattern: str, path: str) -> bool:
    """RFC 9309 2.2.2/2.2.3: ``*`` is any run of characters, a final ``$`` ends the path."""
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    regex = ".*".join(re.escape(part) for part in body.split("*"))
    return re.match(regex + (r"\Z" if anchored else ""), path, re.DOTALL) is not None


def reference_allowed(rules: list[tuple[bool, str]], path: str) -> tuple[bool, int]:
    """(allowed, length of the deciding pattern or 0): longest pattern, allow on ties."""
    best_len, best_allow = 0, True
    for allow, pattern in rules:
        if not pattern or not reference_matches(pattern, path):
            continue
        n = len(pattern)
        if n > best_len or (n == best_len and allow):
            best_len, best_allow = n, allow
    return best_allow, best_len


@PROPERTY
@given(st.lists(st.tuples(st.booleans(), patterns), max_size=8), st.lists(paths, max_size=8))
def test_agrees_with_reference_longest_match(
    rule_list: list[tuple[bool, str]], probe: list[str]
) -> None:
    body = "".join(f"{'Allow' if a else 'Disallow'}: {p}\n" for a, p in rule_list)
    robots = parse_robots("User-agent: *\n" + body)
    for path in [*probe, "/", "/a", "/a/b.a"]:
        want, length = reference_allowed(rule_list, normalise_path_query(path))
        decision = robots.decide(url(path), BOT)
        assert decision.allowed == want, (body, path)
        if length:
            assert decision.rule is not None
            assert (len(decision.rule.pattern), decision.rule.allow) == (length, want)
        else:
            assert decision.rule is None


# --------------------------------------------------------------------------------------
# An independent reference of Google's path extraction
# --------------------------------------------------------------------------------------


def _first_of(url: str, start: int) -> int | None:
    found = [i for i in (url.find(c, start) for c in "/?;") if i != -1]
    return min(found) if found else None


def reference_path(url: str) -> str:
    """Google's ``GetPathParamsQuery`` (robots.cc), one step at a time.

    Skip a leading ``//``; the scheme ends at the first ``://`` unless a ``/``, ``?`` or
    ``;`` comes before it; the path starts at the next ``/``, ``?`` or ``;``; a ``#``
    before that start means no path, one after it ends the path; prepend ``/`` if needed.
    """
    start = 2 if url.startswith("//") else 0
    early = _first_of(url, start)
    scheme_end = url.find("://", start)
    if scheme_end == -1 or (early is not None and early < scheme_end):
        authority = start
    else:
        authority = scheme_end + 3
    path_start = _first_of(url, authority)
    if path_start is None:
        return "/"
    hash_pos = url.find("#", start)
    if hash_pos != -1 and hash_pos < path_start:
        return "/"
    path = url[path_start : len(url) if hash_pos == -1 else hash_pos]
    return path if path.startswith("/") else "/" + path


URL_CHARS = "ab1:/?;#."
urls = st.one_of(
    st.text(alphabet=URL_CHARS, max_size=14),
    st.builds(
        lambda lead, scheme, host, rest: f"{lead}{scheme}://{host}{rest}",
        st.sampled_from(["", "/", "//", "a/", "?"]),
        st.sampled_from(["gemini", "https", "a1", ""]),
        st.text(alphabet="ab1.:#", max_size=5),
        st.text(alphabet=URL_CHARS, max_size=10),
    ),
)


@PROPERTY
@given(urls)
def test_path_of_agrees_with_google_path_extraction(target: str) -> None:
    # Google's extraction, then the project's one normalisation (dot segments, escapes).
    assert path_of(target) == normalise_path_query(reference_path(target))
