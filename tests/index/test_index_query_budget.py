"""The query budget at each of its edges (:mod:`geminibot.index.query`): one under a
limit is parsed, one over it is refused with what to change."""

from __future__ import annotations

import pytest

from geminibot.index.query import (
    MAX_PHRASE_WORDS,
    MAX_PREFIXES,
    MAX_TERMS,
    MIN_PREFIX_CHARS,
    PREFIX_COST,
    SEARCH_COST,
    QueryTooCostly,
    Term,
    parse_query,
    query_cost,
)
from geminibot.index.search import SNIPPET_SCAN_CHARS, text_snippet
from geminibot.index.text import MARK
from geminibot.searchcap.app import CLIENT_BUDGET
from geminibot.store.pages import MAX_INDEXED_CHARS, indexed_text


def words(n: int, prefix: str = "w") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def test_terms_at_and_over_the_limit() -> None:
    assert len(parse_query(" ".join(words(MAX_TERMS))).groups[0]) == MAX_TERMS
    with pytest.raises(QueryTooCostly, match=rf"too many terms .{MAX_TERMS + 1}, at most"):
        parse_query(" ".join(words(MAX_TERMS + 1)))


def test_excluded_terms_and_or_groups_count_repeated_words_once() -> None:
    half = MAX_TERMS // 2
    parse_query(" OR ".join(words(half)) + " " + " ".join("-" + w for w in words(half, "x")))
    with pytest.raises(QueryTooCostly, match="too many terms"):
        parse_query(" OR ".join(words(half + 1)) + " " + " ".join("-" + w for w in words(half)))
    assert len(parse_query("tomato " * 50).groups[0]) == 1


def test_prefixes_at_and_over_the_limit() -> None:
    parse_query(" ".join(w + "xx*" for w in words(MAX_PREFIXES)))
    with pytest.raises(QueryTooCostly, match=r"too many prefixes .* write some words out"):
        parse_query(" ".join(w + "xx*" for w in words(MAX_PREFIXES + 1)))


def test_a_prefix_needs_its_letters() -> None:
    parse_query("x" * MIN_PREFIX_CHARS + "*")
    parse_query("ab-" + "x" * MIN_PREFIX_CHARS + "*")
    for short in ("x" * (MIN_PREFIX_CHARS - 1) + "*", "abcdef-x*"):
        with pytest.raises(QueryTooCostly, match="too short"):
            parse_query(short)


def test_phrases_at_and_over_the_limit() -> None:
    parse_query('"' + " ".join(words(MAX_PHRASE_WORDS)) + '"')
    with pytest.raises(QueryTooCostly, match=r"phrase too long .* quote a shorter part"):
        parse_query('"' + " ".join(words(MAX_PHRASE_WORDS + 1)) + '"')


def test_the_cost_of_a_query() -> None:
    assert query_cost(parse_query("gemini")) == SEARCH_COST + 1
    assert query_cost(parse_query('gem* "a b c" -x')) == SEARCH_COST + PREFIX_COST + 3 + 1


def test_a_client_budget_pays_for_the_costliest_query() -> None:
    phrase = '"' + " ".join(words(MAX_PHRASE_WORDS)) + '"'
    prefixes = [w + "xx*" for w in words(MAX_PREFIXES, "p")]
    costliest = " ".join([*prefixes, *[phrase.replace("w", f"q{n}w") for n in range(9)]])
    assert query_cost(parse_query(costliest)) <= CLIENT_BUDGET


def test_indexed_text_at_the_limit() -> None:
    at = "x " * (MAX_INDEXED_CHARS // 2)
    assert indexed_text(at) == at
    over = at[:-1] + "yz"
    assert len(over) == MAX_INDEXED_CHARS + 1
    assert indexed_text(over) == over.rsplit(" ", 1)[0]  # cut before the partial word
    assert len(indexed_text("y" * (MAX_INDEXED_CHARS * 2))) == MAX_INDEXED_CHARS


def test_a_snippet_is_looked_for_in_the_first_characters_only() -> None:
    term = [Term("needle")]
    inside = "a " * ((SNIPPET_SCAN_CHARS - len("needle")) // 2) + "needle"
    assert len(inside) == SNIPPET_SCAN_CHARS
    assert MARK[0] + "needle" + MARK[1] in text_snippet(inside, term)
    outside = "a " * (SNIPPET_SCAN_CHARS // 2) + "needle"
    assert text_snippet(outside, term) == ""
    assert text_snippet("é " * (SNIPPET_SCAN_CHARS // 2) + "needle", term) == ""  # not ASCII


def test_operators_count_in_the_budget() -> None:
    """Each operator is a term; a site: pattern with a wildcard is a prefix; each costs."""
    sites = " ".join(f"site:h{n}.test" for n in range(MAX_TERMS - 1))
    parse_query("tomato " + sites)
    with pytest.raises(QueryTooCostly, match="operators included"):
        parse_query("tomato lang:de " + sites)
    patterns = " ".join(f"site:*.h{n}.test" for n in range(MAX_PREFIXES))
    parse_query(patterns)
    with pytest.raises(QueryTooCostly, match="site patterns"):
        parse_query("tomat* " + patterns)
    assert query_cost(parse_query("tomato site:a.test size:<1k")) == 1 + 1 + 2
    assert query_cost(parse_query("site:*.a.test")) == 1 + PREFIX_COST
