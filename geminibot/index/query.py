"""User search queries as data, parsed once and rendered by each engine.

The syntax (all engines): words are all required; ``"a phrase"``; ``word*`` (prefix);
``-word`` or ``-"a phrase"`` excludes; ``a OR b``; ``lang:CODE`` keeps pages in that
language (an ISO 639-1 code such as ``de``; the last one given counts). A query is read
as a query whatever it begins with (``-word`` first is an exclusion, not an option).
Nothing here knows any engine.

The query budget: what one query may ask of an engine is bounded before any engine sees
it, so that no query is slow however it is written (a prefix of one letter matches most
of the dictionary, each term and phrase word is a list of postings to merge). A query
over :data:`MAX_TERMS` terms, :data:`MAX_PREFIXES` prefixes, a prefix shorter than
:data:`MIN_PREFIX_CHARS` or a phrase over :data:`MAX_PHRASE_WORDS` words raises
:class:`QueryTooCostly`, which says what to change. :func:`query_cost` is what an
accepted query costs in units, for budgets of work per client.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Longest query accepted, in characters.
MAX_QUERY_LENGTH = 500
#: Most terms (words, phrases and prefixes, excluded ones included) in one query.
MAX_TERMS = 12
#: Most prefix terms (``word*``) in one query: each one merges the postings of every
#: word it expands to.
MAX_PREFIXES = 3
#: Fewest letters or digits in the word a prefix's ``*`` ends (``a*`` matches most words).
MIN_PREFIX_CHARS = 3
#: Most words in one phrase (``"a b c"``).
MAX_PHRASE_WORDS = 8
#: Units of work of a query (:func:`query_cost`): one for the search, one per word
#: (each word of a phrase), and PREFIX_COST per prefix, which expands to many words.
SEARCH_COST = 1
PREFIX_COST = 4

_TERM = re.compile(r'(-?)(?:"([^"]*)"?|(\S+))')
_WORDLIKE = re.compile(r"\w", re.UNICODE)
_WORD = re.compile(r"\w+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_LANG = re.compile(r"lang:([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]{1,8})*", re.IGNORECASE)


class QueryError(ValueError):
    """A search query that cannot be run; the message says why."""


class QueryTooCostly(QueryError):
    """A query over the query budget (see the module docstring); the message says which
    limit and what to change."""


@dataclass(frozen=True)
class Term:
    """One searched item: a word or a phrase (``text``), a prefix when ``prefix``."""

    text: str
    prefix: bool = False


@dataclass(frozen=True)
class ParsedQuery:
    """A user query as data: OR-separated groups of terms all required, and excluded terms.

    Each engine renders it in its own syntax (:func:`to_fts_query`, and
    :mod:`geminibot.index.tantivy_index`)."""

    groups: tuple[tuple[Term, ...], ...]
    excluded: tuple[Term, ...] = ()
    lang: str | None = None  # lang:CODE, the primary subtag in lower case


def parse_query(query: str) -> ParsedQuery:
    """The user's query as a :class:`ParsedQuery` (see module docstring for the syntax)."""
    if len(query) > MAX_QUERY_LENGTH:
        raise QueryError(f"query too long ({len(query)} characters, at most {MAX_QUERY_LENGTH})")
    query = _CONTROL.sub(" ", query)
    positive: list[list[Term]] = [[]]  # OR-separated groups of ANDed terms
    lang: str | None = None
    negative: list[Term] = []
    for match in _TERM.finditer(query):
        neg, phrase, word = match.group(1), match.group(2), match.group(3)
        lang_match = _LANG.fullmatch(word or "")
        if lang_match is not None and not neg:
            lang = lang_match.group(1).lower()
            continue
        if word == "OR" and not neg:
            if positive[-1]:
                positive.append([])
            continue
        text = phrase if phrase is not None else word
        if not _WORDLIKE.search(text):
            continue
        prefix = phrase is None and text.endswith("*")
        term = Term(text.rstrip("*") if prefix else text, prefix)
        chosen = negative if neg else positive[-1]
        if term not in chosen:  # a word twice asks for it once
            chosen.append(term)
    groups = tuple(tuple(g) for g in positive if g)
    if not groups:
        raise QueryError(
            "nothing to search for: give at least one word (not only -excluded words or symbols)"
        )
    parsed = ParsedQuery(groups, tuple(negative), lang)
    check_budget(parsed)
    return parsed


def _terms(parsed: ParsedQuery) -> list[Term]:
    return [t for group in parsed.groups for t in group] + list(parsed.excluded)


def _words(term: Term) -> int:
    return len(_WORD.findall(term.text))


def check_budget(parsed: ParsedQuery) -> None:
    """Raise :class:`QueryTooCostly` when ``parsed`` is over the query budget."""
    terms = _terms(parsed)
    if len(terms) > MAX_TERMS:
        raise QueryTooCostly(
            f"too many terms ({len(terms)}, at most {MAX_TERMS}): search for fewer words"
        )
    prefixes = [t for t in terms if t.prefix]
    if len(prefixes) > MAX_PREFIXES:
        raise QueryTooCostly(
            f"too many prefixes ({len(prefixes)} word* terms, at most {MAX_PREFIXES}):"
            " write some words out in full"
        )
    for t in prefixes:
        if len(_WORD.findall(t.text)[-1]) < MIN_PREFIX_CHARS:
            raise QueryTooCostly(
                f"prefix {t.text}* too short (at least {MIN_PREFIX_CHARS} letters before *)"
            )
    for t in terms:
        if _words(t) > MAX_PHRASE_WORDS:
            raise QueryTooCostly(
                f"phrase too long ({_words(t)} words, at most {MAX_PHRASE_WORDS}):"
                " quote a shorter part of it"
            )


def query_cost(parsed: ParsedQuery) -> int:
    """The units of work ``parsed`` costs (:data:`SEARCH_COST`, one per word,
    :data:`PREFIX_COST` per prefix); at most that of a query at every limit."""
    return SEARCH_COST + sum(PREFIX_COST if t.prefix else _words(t) for t in _terms(parsed))
