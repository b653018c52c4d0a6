"""path_of agrees with Google's GetPathParamsQuery, plus RFC 9309 percent normalisation."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geminibot.policy.paths import normalise_pattern, path_of
from geminibot.urls import normalise_path_query


def google_get_path_params_query(url: str) -> str:
    """A direct transcription of Google's GetPathParamsQuery, for comparison."""

    def first_of(s: str, start: int) -> int:
        hits = [i for i in (s.find(c, start) for c in "/?;") if i != -1]
        return min(hits) if hits else -1

    search_start = 2 if url.startswith("//") else 0
    early_path = first_of(url, search_start)
    protocol_end = url.find("://", search_start)
    if early_path != -1 and (protocol_end == -1 or early_path < protocol_end):
        protocol_end = -1
    protocol_end = search_start if protocol_end == -1 else protocol_end + 3
    path_start = first_of(url, protocol_end)
    if path_start == -1:
        return "/"
    hash_pos = url.find("#", search_start)
    if hash_pos != -1 and hash_pos < path_start:
        return "/"
    path_end = len(url) if hash_pos == -1 else hash_pos
    path = url[path_start:path_end]
    return path if path.startswith("/") else "/" + path


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("gemini://h/a/b?x#f", "/a/b?x"),
        ("http://h", "/"),
        ("//h/x", "/x"),
        ("/p;q", "/p;q"),
        ("h?x", "/?x"),
        ("gemini://h?q/x", "/?q/x"),
        ("http://h#a/b", "/"),
        ("a/b://c", "/b://c"),
        ("/x?u=http://y#z", "/x?u=http://y"),
        ("gemini://h:1965", "/"),
        ("gemini://h/ツ", "/%E3%83%84"),
        ("/a%2fb%c3%a9", "/a%2Fb%C3%A9"),
    ],
)
def test_examples(url: str, path: str) -> None:
    assert path_of(url) == path


@given(st.text(alphabet="ab:/?;#.-%", max_size=20))
def test_agrees_with_google_on_ascii(url: str) -> None:
    # Google's extraction, then the one normalisation every decision uses (escapes, dot
    # segments: see test_normalisation_follows_rfc9309 below).
    assert path_of(url) == normalise_path_query(google_get_path_params_query(url))


@pytest.mark.parametrize(
    ("url", "path", "rule"),
    [
        ("/cv/a%5Fb.pdf", "/cv/a_b.pdf", "RFC 9309 2.2.2: unreserved escape decoded"),
        ("/%7ejoe/", "/~joe/", "RFC 9309 2.2.2: unreserved escape decoded"),
        ("/%62%61%7A", "/baz", "RFC 9309 2.2.2, its table's last row"),
        ("/a%2fb", "/a%2Fb", "both: reserved escape kept, hex upper-cased"),
        ("/a%24b$", "/a%24b$", "both: %24 is not $; $ is a plain path character"),
        ("/caf\u00e9", "/caf%C3%A9", "RFC 9309 2.2.2: non-ASCII as UTF-8"),
        ("/a b", "/a%20b", "RFC 3986: a space cannot appear in a URL"),
        ("/a/../private/x?q=/../y", "/private/x?q=/../y", "RFC 3986: dot segments, path only"),
        ("/100%", "/100%25", "RFC 3986: a % that starts no escape is escaped"),
    ],
)
def test_normalisation_follows_rfc9309(url: str, path: str, rule: str) -> None:
    """The one normalisation every decision uses (docs/policy.md, section 2); each row
    names the rule it follows. A pattern gets the same escape normalisation."""
    assert path_of(url) == path, rule
    assert path_of(path) == path  # idempotent
    if ".." not in url:
        assert normalise_pattern(url.encode("utf-8")) == path, rule


def test_version_2_patterns_are_normalised_as_paths() -> None:
    """A 2.0 regex's and glob's escapes read as in paths: ``%7E`` is ``~`` and ``%2E`` a
    literal ``.`` (not the regex's any-character); a glob keeps ``[...]`` as syntax."""
    from geminibot.policy.ext20 import parse_ext20

    robots = parse_ext20(
        "User-agent: *\nRobot-version: 2.0\nDisallow: ~ ^/%7Ejoe/a%2Eb\nDisallow: /[xy]%7E*\n"
    )
    assert not robots.decide("/~joe/a.b", "bot").allowed
    assert not robots.decide("/%7Ejoe/a.b", "bot").allowed
    assert robots.decide("/~joe/aXb", "bot").allowed  # %2E is a literal dot
    assert not robots.decide("/x~1", "bot").allowed and robots.decide("/z~1", "bot").allowed
