"""User search queries as data, parsed once and rendered by each engine.

The syntax (all engines): words are all required; ``"a phrase"``; ``word*`` (prefix);
``-word`` or ``-"a phrase"`` excludes; ``a OR b``; ``lang:CODE`` keeps pages in that
language (an ISO 639-1 code such as ``de``; the last one given counts). A query is read
as a query whatever it begins with (``-word`` first is an exclusion, not an option).
Nothing here knows any engine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Longest query accepted, in characters.
MAX_QUERY_LENGTH = 500

_TERM = re.compile(r'(-?)(?:"([^"]*)"?|(\S+))')
_WORDLIKE = re.compile(r"\w", re.UNICODE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_LANG = re.compile(r"lang:([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]{1,8})*", re.IGNORECASE)


class QueryError(ValueError):
    """A search query that cannot be run; the message says why."""


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
        if neg:
            negative.append(term)
        else:
            positive[-1].append(term)
    groups = tuple(tuple(g) for g in positive if g)
    if not groups:
        raise QueryError(
            "nothing to search for: give at least one word (not only -excluded words or symbols)"
        )
    return ParsedQuery(groups, tuple(negative), lang)
