"""User search queries as data, parsed once and rendered by each engine.

The syntax (all engines): words are all required; ``"a phrase"``; ``word*`` (prefix);
``-word`` or ``-"a phrase"`` excludes; ``a OR b``. A query is read as a query whatever
it begins with (``-word`` first is an exclusion, not an option). Nothing here knows any
engine.

Stop words (:data:`STOP_WORDS`: ``about``, ``the``...) are not required in a query
that has other words: ``poems about stars`` finds what ``poems stars`` finds, and the
words as typed side by side rank a page that has them so higher (``runs``).

Operators narrow a search (:data:`OPERATORS`); a query of operators alone lists the
pages in their scope:

- ``site:HOST`` keeps pages of that host, a shell pattern as ``--host`` takes
  (``site:*.example.org``: its subdomains); several are any of them; ``-site:HOST``
  leaves a host out;
- ``intitle:WORD`` (or ``intitle:"a phrase"``) requires the word in the title,
  ``inurl:WORD`` in the URL (its words: ``inurl:poems``), both scored as words;
  ``-intitle:``/``-inurl:`` exclude;
- ``mime:TYPE`` keeps pages of that MIME type (``mime:text/gemini``) or major type
  (``mime:image``); ``filetype:EXT`` is the type of that extension
  (``filetype:pdf`` = ``mime:application/pdf``); ``-mime:``/``-filetype:`` leave one out;
- ``size:<N`` / ``size:>N`` keeps pages smaller / larger than N bytes (``10k``:
  10 KiB, ``1m``: 1 MiB);
- ``lang:CODE`` keeps pages in that language (an ISO 639-1 code such as ``de``; the
  last one given counts).

A malformed operator (``site:`` without a host, ``size:10k`` without ``<`` or ``>``, an
unknown file type) raises :class:`QueryMalformed`, whose message shows the right form;
a word with a colon that names no operator (``http://x``) is a word.

The query budget: what one query may ask of an engine is bounded before any engine sees
it, so that no query is slow however it is written (a prefix of one letter matches most
of the dictionary, each term and phrase word is a list of postings to merge). A query
over :data:`MAX_TERMS` terms (each operator counts as one), :data:`MAX_PREFIXES`
prefixes (a ``site:`` pattern with a wildcard counts as one), a prefix shorter than
:data:`MIN_PREFIX_CHARS` or a phrase over :data:`MAX_PHRASE_WORDS` words raises
:class:`QueryTooCostly`, which says what to change. :func:`query_cost` is what an
accepted query costs in units, for budgets of work per client.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import ClassVar

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
_LANG = re.compile(r"([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]{1,8})*")
#: Words a query does not require when it has others (``poems about stars`` asks for
#: ``poems stars``): the commonest English function words. A query of them alone
#: (``the who``) requires them; quoted (``"the who"``) they always count.
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers him his how i if in into is
    it its itself just me more most my no nor not of off on once only or other our ours
    out over own same she should so some such than that the their theirs them then there
    these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours""".split()  # noqa: SIM905
)
#: The operators (see the module docstring).
OPERATORS = ("site", "intitle", "inurl", "mime", "filetype", "size", "lang")
_OPERATOR = re.compile(r"(-?)(" + "|".join(OPERATORS) + r'):("[^"]*"?|\S*)', re.IGNORECASE)
_HOST_PATTERN = re.compile(r"[a-z0-9.*?:\[\]-]+")
_MIME = re.compile(r"([a-z0-9][a-z0-9.+-]*)(?:/([a-z0-9][a-z0-9.+-]*|\*))?")
_SIZE = re.compile(r"([<>])(\d{1,15}(?:\.\d{1,6})?)([kmg]?)i?b?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_EXTENSION = re.compile(r"\.?([a-z0-9]{1,10})")
#: MIME types of the extensions Python does not know (Gemini's own).
_OWN_TYPES = {"gmi": "text/gemini", "gemini": "text/gemini", "gmni": "text/gemini"}


class QueryError(ValueError):
    """A search query that cannot be run; the message says why."""


class QueryMalformed(QueryError):
    """A query with an operator written wrong; the message shows the right form."""


class QueryTooCostly(QueryError):
    """A query over the query budget (see the module docstring); the message says which
    limit and what to change."""


@dataclass(frozen=True)
class Term:
    """One searched item: a word or a phrase (``text``), a prefix when ``prefix``."""

    text: str
    prefix: bool = False
    #: Only in this field: "title" (``intitle:``), "url" (``inurl:``); None: anywhere.
    field: str | None = None


@dataclass(frozen=True)
class Scope:
    """The pages the operators keep (see the module docstring); empty: all of them.

    ``sites``: shell patterns on host keys, lower case (any of them); ``mimes``: MIME
    types or major types (``image``), lower case (any of them); sizes in bytes, both
    bounds excluded."""

    sites: tuple[str, ...] = ()
    excluded_sites: tuple[str, ...] = ()
    mimes: tuple[str, ...] = ()
    excluded_mimes: tuple[str, ...] = ()
    larger_than: int | None = None
    smaller_than: int | None = None

    def __bool__(self) -> bool:
        return self != Scope()

    def items(self) -> int:
        """How many operators this scope holds (for the query budget)."""
        bounds = (self.larger_than, self.smaller_than)
        return (
            len(self.sites)
            + len(self.excluded_sites)
            + len(self.mimes)
            + len(self.excluded_mimes)
            + sum(b is not None for b in bounds)
        )

    def patterns(self) -> list[str]:
        """The site patterns with a wildcard (each expands to many hosts)."""
        return [s for s in self.sites + self.excluded_sites if "*" in s or "?" in s]


@dataclass(frozen=True)
class ParsedQuery:
    """A user query as data: OR-separated groups of terms all required, and excluded terms.

    Each engine renders it in its own syntax (:func:`to_fts_query`, and
    :mod:`geminibot.index.tantivy_index`)."""

    groups: tuple[tuple[Term, ...], ...]
    excluded: tuple[Term, ...] = ()
    lang: str | None = None  # lang:CODE, the primary subtag in lower case
    scope: Scope = field(default_factory=Scope)
    #: Per group, its longest run of plain words as typed (``poems about stars``; fewer
    #: than two: none): a page holding them side by side ranks higher.
    runs: tuple[tuple[str, ...], ...] = ()
    #: Stop words left out of the required words (:data:`STOP_WORDS`).
    ignored: tuple[str, ...] = ()

    @property
    def scope_only(self) -> bool:
        """A query of operators alone: it lists the pages in its scope."""
        return not self.groups


def parse_query(query: str) -> ParsedQuery:
    """The user's query as a :class:`ParsedQuery` (see module docstring for the syntax)."""
    if len(query) > MAX_QUERY_LENGTH:
        raise QueryError(f"query too long ({len(query)} characters, at most {MAX_QUERY_LENGTH})")
    query = _CONTROL.sub(" ", query)
    positive: list[list[Term]] = [[]]  # OR-separated groups of ANDed terms
    negative: list[Term] = []
    reading = _Operators()
    at = 0
    while at < len(query):
        operator = _OPERATOR.match(query, at)
        if operator is not None and (at == 0 or query[at - 1].isspace()):
            at = operator.end()
            neg, name, value = operator.group(1), operator.group(2).lower(), operator.group(3)
            term = reading.read(name, value, negated=bool(neg))
            if term is not None:
                _add_term(negative if neg else positive[-1], term)
            continue
        match = _TERM.match(query, at)
        if match is None:  # white space
            at += 1
            continue
        at = match.end()
        neg, phrase, word = match.group(1), match.group(2), match.group(3)
        if word == "OR" and not neg:
            if positive[-1]:
                positive.append([])
            continue
        text = phrase if phrase is not None else word
        if not _WORDLIKE.search(text):
            continue
        prefix = phrase is None and text.endswith("*")
        _add_term(
            negative if neg else positive[-1], Term(text.rstrip("*") if prefix else text, prefix)
        )
    positive = [g for g in positive if g]
    runs = tuple(_plain_run(g) for g in positive)
    kept = [[w for w in g if not (_is_stop(w) and _has_more(g))] for g in positive]
    ignored = tuple(w.text for g, k in zip(positive, kept, strict=True) for w in g if w not in k)
    groups = tuple(tuple(k) for k in kept)
    if not groups and not reading.scope and reading.lang is None:
        raise QueryError(
            "nothing to search for: give at least one word or operator"
            " (not only -excluded words or symbols)"
        )
    parsed = ParsedQuery(groups, tuple(negative), reading.lang, reading.scope, runs, ignored)
    check_budget(parsed)
    return parsed


def _is_stop(term: Term) -> bool:
    return not term.prefix and term.field is None and term.text.casefold() in STOP_WORDS


def _has_more(group: list[Term]) -> bool:
    """Whether ``group`` asks for more than stop words (else they are what it asks)."""
    return not all(_is_stop(t) for t in group)


def _plain_run(group: list[Term]) -> tuple[str, ...]:
    """The longest run of plain words (one word each, not prefixes nor operators) in
    ``group``, as typed."""
    best: list[str] = []
    run: list[str] = []
    for term in group:
        if term.prefix or term.field or len(_WORD.findall(term.text)) != 1:
            run = []
            continue
        run.append(term.text)
        if len(run) > len(best):
            best = list(run)
    return tuple(best) if len(best) > 1 else ()


def _add_term(terms: list[Term], term: Term) -> None:
    if term not in terms:  # a word twice asks for it once
        terms.append(term)


def _malformed(name: str, value: str, form: str) -> QueryMalformed:
    shown = value if len(value) <= 40 else value[:40] + "…"
    return QueryMalformed(f"{name}:{shown} is not understood: write {form}")


class _Operators:
    """The operators of one query as :func:`parse_query` meets them."""

    FORMS: ClassVar[dict[str, str]] = {
        "site": "site:example.org or site:*.example.org",
        "intitle": 'intitle:word or intitle:"two words"',
        "inurl": "inurl:word",
        "mime": "mime:image or mime:text/gemini",
        "filetype": "filetype:pdf",
        "size": "size:<10k or size:>1m",
        "lang": "lang:de",
    }

    def __init__(self) -> None:
        self.scope = Scope()
        self.lang: str | None = None

    def read(self, name: str, value: str, *, negated: bool) -> Term | None:
        """Take in ``name:value``; the term it searches for (``intitle:``, ``inurl:``),
        else None. Raises :class:`QueryMalformed`."""
        quoted = value.startswith('"')
        text = value.strip('"')
        if not text.strip():
            raise _malformed(name, value, self.FORMS[name])
        if name in ("intitle", "inurl"):
            if not _WORDLIKE.search(text):
                raise _malformed(name, value, self.FORMS[name])
            prefix = not quoted and text.endswith("*")
            return Term(text.rstrip("*") if prefix else text, prefix, _FIELDS[name])
        if quoted:
            raise _malformed(name, value, self.FORMS[name])
        if name == "lang":
            match = _LANG.fullmatch(text)
            if match is None or negated:
                form = self.FORMS[name] + (" (one language, not -lang:)" if negated else "")
                raise _malformed(name, value, form)
            self.lang = match.group(1).lower()
        elif name == "site":
            pattern = text.lower()
            if not _HOST_PATTERN.fullmatch(pattern):
                raise _malformed(name, value, self.FORMS[name])
            kind = "excluded_sites" if negated else "sites"
            self._add(kind, pattern)
        elif name in ("mime", "filetype"):
            kind = "excluded_mimes" if negated else "mimes"
            self._add(kind, _mime_of(name, text.lower()))
        else:  # size
            self._size(text, negated)
        return None

    def _add(self, kind: str, value: str) -> None:
        have: tuple[str, ...] = getattr(self.scope, kind)
        if value not in have:
            changed: dict[str, tuple[str, ...]] = {kind: (*have, value)}
            self.scope = replace(self.scope, **changed)  # type: ignore[arg-type]

    def _size(self, text: str, negated: bool) -> None:
        match = _SIZE.fullmatch(text)
        if match is None or negated:
            form = self.FORMS["size"] + (" (not -size:)" if negated else "")
            raise _malformed("size", text, form)
        bound = int(float(match.group(2)) * _SIZE_UNITS[match.group(3).lower()])
        if match.group(1) == ">":
            low = self.scope.larger_than
            self.scope = replace(self.scope, larger_than=max(bound, low or 0))
        else:
            high = self.scope.smaller_than
            self.scope = replace(
                self.scope, smaller_than=bound if high is None else min(bound, high)
            )


_FIELDS = {"intitle": "title", "inurl": "url"}


def _mime_of(name: str, text: str) -> str:
    """The MIME type (or major type) ``mime:TEXT`` or ``filetype:TEXT`` keeps."""
    if name == "mime":
        match = _MIME.fullmatch(text)
        if match is None:
            raise _malformed(name, text, _Operators.FORMS[name])
        return match.group(1) if match.group(2) in (None, "*") else text
    match = _EXTENSION.fullmatch(text)
    if match is None:
        raise _malformed(name, text, _Operators.FORMS[name])
    ext = match.group(1)
    known = _OWN_TYPES.get(ext) or _known_types().get("." + ext)
    if known is None:
        raise QueryMalformed(
            f"filetype:{ext} is not a file type known here: write filetype:pdf,"
            " filetype:png... or mime:TYPE"
        )
    return known


def _known_types() -> dict[str, str]:
    """Extensions to MIME types: Python's own table, not the machine's files."""
    import mimetypes  # a filetype: query's alone

    return mimetypes.MimeTypes().types_map[True]


def with_site(parsed: ParsedQuery, pattern: str | None) -> ParsedQuery:
    """``parsed`` kept to the hosts matching ``pattern`` too (``--host``: as ``site:``)."""
    if pattern is None:
        return parsed
    reading = _Operators()
    reading.read("site", pattern.strip(), negated=False)
    sites = parsed.scope.sites
    if parsed.scope.sites:  # both must hold: the pattern's hosts among those of site:
        raise QueryMalformed("give the hosts either with --host or with site:, not both")
    scope = replace(parsed.scope, sites=(*sites, *reading.scope.sites))
    return replace(parsed, scope=scope)


def _terms(parsed: ParsedQuery) -> list[Term]:
    return [t for group in parsed.groups for t in group] + list(parsed.excluded)


def _words(term: Term) -> int:
    return len(_WORD.findall(term.text))


def check_budget(parsed: ParsedQuery) -> None:
    """Raise :class:`QueryTooCostly` when ``parsed`` is over the query budget."""
    terms = _terms(parsed)
    count = len(terms) + parsed.scope.items() + (parsed.lang is not None)
    if count > MAX_TERMS:
        raise QueryTooCostly(
            f"too many terms ({count}, at most {MAX_TERMS}, operators included):"
            " search for fewer words"
        )
    prefixes = [t for t in terms if t.prefix]
    patterns = len(parsed.scope.patterns())
    if len(prefixes) + patterns > MAX_PREFIXES:
        sites = f" and {patterns} site patterns" if patterns else ""
        raise QueryTooCostly(
            f"too many prefixes ({len(prefixes)} word* terms{sites}, at most {MAX_PREFIXES}):"
            " write some words out in full" + (" (or the hosts of site:)" if patterns else "")
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
    """The units of work ``parsed`` costs (:data:`SEARCH_COST`, one per word and per
    operator, :data:`PREFIX_COST` per prefix and per site pattern); at most that of a
    query at every limit."""
    words = sum(PREFIX_COST if t.prefix else _words(t) for t in _terms(parsed))
    patterns = len(parsed.scope.patterns())
    scope = parsed.scope.items() - patterns + PREFIX_COST * patterns + (parsed.lang is not None)
    return SEARCH_COST + words + scope
