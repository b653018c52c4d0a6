"""Matching a URL against a list of robots.txt rules (RFC 9309: ``*`` any run, a final
``$`` anchors, the longest pattern wins, an allow wins a tie), in time linear in the
path for any rules: one compiled expression for a small list, an index of the
patterns' literal heads for a long one."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Protocol

from geminibot.policy.paths import SCHEME_AND_AUTHORITY, path_of
from geminibot.policy.robots_model import Rule
from geminibot.urls import PLAIN_CHARACTERS

#: A rule list of at most this many rules is matched by one compiled expression
#: (:class:`_ExpressionMatcher`); a longer one by the head index (:class:`_IndexedMatcher`).
#: Both give the same answers; the expression is faster up to several hundred rules.
EXPRESSION_MAX_RULES = 512
#: ... and with at most this many characters after the first ``*`` of its patterns, all
#: rules together. The expression looks for each ``*`` segment at every position of the
#: path, so its worst case grows with this text; ``str.find`` in the index does not.
EXPRESSION_MAX_WILD_TEXT = 256

#: How rules rank when several match: the longer pattern first, then an allow, then the
#: earlier line (the line Google's parser reports when two rules tie).
_Rank = tuple[int, int, int]


def _rank(rule: Rule) -> _Rank:
    return (-len(rule.pattern), 0 if rule.allow else 1, rule.line)


def _wild_text(pattern: str) -> int:
    """How many characters of ``pattern`` follow its first ``*`` (0 without one)."""
    star = pattern.find("*")
    return 0 if star == -1 else len(pattern) - star - 1


class Matcher(Protocol):
    """Finds the rule of a rule list that decides a URL."""

    def best(self, url: str) -> Rule | None:
        """The rule that decides ``url`` (a URL or a path, as :func:`path_of` takes it):
        the best by :func:`_rank` of those matching its path, or None if none matches."""
        ...


def matcher_for(rules: Iterable[Rule]) -> Matcher:
    """The matcher for one merged rule list: an expression when it is small enough, else
    the head index. Linear in the path for any rules; the version 2.0 engine uses it too
    (its 1.0 sets, and the ``*``-only globs of a 2.0 set, anchored with ``$``)."""
    ranked = sorted((rule for rule in rules if rule.pattern), key=_rank)
    # An empty pattern matches with priority 0, which never decides: it is left out.
    if (
        len(ranked) <= EXPRESSION_MAX_RULES
        and sum(_wild_text(rule.pattern) for rule in ranked) <= EXPRESSION_MAX_WILD_TEXT
    ):
        return _ExpressionMatcher(ranked)
    return _IndexedMatcher(ranked)


def _expression(pattern: str) -> str:
    """One rule as a regular expression for ``re.match`` with DOTALL, read as
    :func:`_match_segments` reads it: the head (up to the first ``*``) literally, each
    middle segment at its left-most occurrence, the last segment anywhere after that
    (or, with ``$``, at the very end). No part ever gives back what it matched, so no
    backtracking can multiply work: a path of n characters costs at most n comparisons
    per character of the segments after ``*``.
    """
    anchored = pattern.endswith("$")
    head, *rest = (pattern[:-1] if anchored else pattern).split("*")
    if not rest:
        return re.escape(head) + (r"\Z" if anchored else "")
    *middle, tail = rest
    parts = [re.escape(head)]
    parts += [_left_most(segment) for segment in middle if segment]
    if tail and anchored:
        # Jump to the end, at least len(tail) characters on, and look back at them.
        parts.append(f"(?>.{{{len(tail)},}})(?<={re.escape(tail)})")
    elif tail:
        # Any occurrence will do: from the end backwards, which ``re`` scans fastest.
        parts.append(f"(?>.*{re.escape(tail)})")
    return "".join(parts)


def _left_most(segment: str) -> str:
    """Up to and over the first occurrence of ``segment``: runs without its first
    character, and that character where the rest does not follow, taken possessively."""
    first, rest = re.escape(segment[0]), re.escape(segment[1:])
    skip = f"[^{first}]*+"
    if rest:
        skip += f"(?:{first}(?!{rest})[^{first}]*+)*+"
    return skip + re.escape(segment)


#: Before the rules, to match a URL as it stands: its scheme and authority as
#: :func:`path_of` drops them, then a path that starts with ``/``.
_URL_HEAD = SCHEME_AND_AUTHORITY + "(?=/)"
#: ... and before that, that the URL is already normalised but for dot segments (which
#: the caller looks for): only characters that normalisation leaves as they are, so no
#: escape, no fragment, nothing to escape (:func:`geminibot.urls.is_normalised`).
_PLAIN = rf"(?={PLAIN_CHARACTERS}*\Z)"


class _ExpressionMatcher:
    """A small rule list as one alternation of :func:`_expression` branches, best first.

    ``re`` tries branches in order and stops at the first that matches, which is then the
    best matching rule; each branch ends in an empty group, so ``lastindex`` says which
    (None: no rule matched). Branches start with their literal head, so ``re`` rejects
    most of them after a character or two.

    A plain URL (nothing to normalise, no fragment, not scheme-relative) is matched
    as it stands, by a second expression that first checks its characters and skips its
    scheme and authority, so the common call costs one ``re`` match. Anything else, and a URL whose authority is
    not followed by ``/``, is matched on :func:`path_of`.
    """

    __slots__ = ("_in_path", "_in_plain_path", "_in_url", "_rules")

    def __init__(self, ranked: Sequence[Rule]) -> None:
        branches = "|".join(_expression(rule.pattern) + "()" for rule in ranked)
        rules = f"(?:{branches})?" if ranked else ""
        self._in_path = re.compile(rules, re.DOTALL).match
        self._in_plain_path = re.compile(_PLAIN + rules, re.DOTALL).match
        self._in_url = re.compile(_PLAIN + _URL_HEAD + rules, re.DOTALL).match
        #: Group n closes branch n; there is no group 0.
        self._rules: tuple[Rule | None, ...] = (None, *ranked)

    def best(self, url: str) -> Rule | None:
        found = None
        if "/." not in url:  # no dot segment; the expressions check the characters
            found = self._in_url(url)
            if found is None and url[:1] == "/" and url[1:2] != "/":
                found = self._in_plain_path(url)  # a bare path, not scheme-relative
        if found is None:
            found = self._in_path(path_of(url))
        return self._rules[found.lastindex or 0] if found is not None else None


#: A bucket with more wildcard rules than this gets a trigram index (see _Bucket).
_INDEX_AT = 8
_GRAM = 3

#: (rank, rule, literal segments or None for a plain prefix, anchored by ``$``)
_Entry = tuple[_Rank, Rule, tuple[str, ...] | None, bool]


class _Bucket:
    """The rules that share one literal head, sorted best first (see :func:`_rank`).

    Plain literal rules need no work once the head matched: the best non-anchored one
    matches any path here, the best anchored one only the head itself. Wildcard rules are
    tried best first and the first match decides. When a bucket holds many wildcard rules
    (``Disallow: /*.pdf$``, ``Disallow: /*?session=`` ...), each is filed under the least
    common three-character piece of its later segments, which must occur in any path it
    matches; a path then tries only the rules whose piece it contains.
    """

    __slots__ = ("always", "exact", "grams", "plain", "simple", "top", "wild")

    def __init__(self, entries: list[_Entry]) -> None:
        entries.sort(key=lambda e: e[0])
        self.top = entries[0][0]
        self.plain = next((e for e in entries if e[2] is None and not e[3]), None)
        self.exact = next((e for e in entries if e[2] is None and e[3]), None)
        self.wild = [e for e in entries if e[2] is not None]
        #: The deciding rule when the best entry is a plain prefix (it always matches here).
        self.simple = entries[0][1] if entries[0][2] is None and not entries[0][3] else None
        self.grams: dict[str, list[int]] | None = None
        self.always: list[int] = []
        if len(self.wild) > _INDEX_AT:
            self._index()

    def _index(self) -> None:
        pieces: list[set[str]] = []
        frequency: dict[str, int] = {}
        for entry in self.wild:
            segments = entry[2] or ()
            grams = {
                seg[i : i + _GRAM] for seg in segments[1:] for i in range(len(seg) - _GRAM + 1)
            }
            pieces.append(grams)
            for gram in grams:
                frequency[gram] = frequency.get(gram, 0) + 1
        index: dict[str, list[int]] = {}
        for position, grams in enumerate(pieces):
            if grams:
                rarest = min(grams, key=lambda g: (frequency[g], g))
                index.setdefault(rarest, []).append(position)
            else:
                self.always.append(position)
        self.grams = index

    def best(self, path: str, head_length: int, bound: _Rank | None) -> _Entry | None:
        """The best entry matching ``path`` that beats ``bound``, or None."""
        found: _Entry | None = None
        for entry in (self.plain, self.exact):
            if entry is None or (bound is not None and entry[0] >= bound):
                continue
            if entry[3] and len(path) != head_length:
                continue
            found, bound = entry, entry[0]
        if self.grams is None:
            candidates: Iterable[int] = range(len(self.wild))
        else:
            grams = self.grams
            chosen = set(self.always)
            for i in range(head_length, len(path) - _GRAM + 1):
                hit = grams.get(path[i : i + _GRAM])
                if hit is not None:
                    chosen.update(hit)
            candidates = sorted(chosen)
        wild = self.wild
        for position in candidates:
            entry = wild[position]
            if bound is not None and entry[0] >= bound:
                break
            if _match_segments(path, head_length, entry[2] or ("",), entry[3]):
                return entry
        return found


class _IndexedMatcher:
    """Longest-match evaluation of a long rule list, indexed by each pattern's literal head.

    A pattern is split at ``*`` into literal segments; the first segment (the head) must be
    a prefix of the path, so rules are bucketed by it and only the buckets of the path's
    own prefixes are looked at: one dict lookup per distinct head length. Later segments
    are found left-most first with ``str.find``, which is exact for ``*``-only patterns
    and linear in the path, however long the segments: a hostile pattern cannot make
    matching slow.
    """

    __slots__ = ("_buckets", "_lengths")

    def __init__(self, ranked: Iterable[Rule]) -> None:
        grouped: dict[str, list[_Entry]] = {}
        for rule in ranked:
            pattern = rule.pattern
            anchored = pattern.endswith("$")
            body = pattern[:-1] if anchored else pattern
            segments = tuple(body.split("*")) if "*" in body else None
            head = segments[0] if segments is not None else body
            grouped.setdefault(head, []).append((_rank(rule), rule, segments, anchored))
        self._buckets = {head: _Bucket(entries) for head, entries in grouped.items()}
        self._lengths = sorted({len(k) for k in grouped})

    def best(self, url: str) -> Rule | None:
        path = path_of(url)
        bound: _Rank | None = None
        best: Rule | None = None
        buckets = self._buckets
        n = len(path)
        for length in self._lengths:
            if length > n:
                break
            bucket = buckets.get(path[:length])
            if bucket is None or (bound is not None and bucket.top >= bound):
                continue
            if bucket.simple is not None:
                bound, best = bucket.top, bucket.simple
                continue
            entry = bucket.best(path, length, bound)
            if entry is not None:
                bound, best = entry[0], entry[1]
        return best


def match_length(pattern: str, path: str) -> int:
    """The priority of ``pattern`` against ``path``: its length in octets if it matches
    under RFC 9309 (``*`` any run, a final ``$`` anchors), else -1. An empty pattern gives
    -1: it matches with priority 0, which never decides. Linear in the path for any
    pattern; the matchers from :func:`matcher_for` give the same answers over many rules."""
    if not pattern:
        return -1
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    if "*" not in body:
        matched = path == body if anchored else path.startswith(body)
    else:
        segments = tuple(body.split("*"))
        matched = path.startswith(segments[0]) and _match_segments(
            path, len(segments[0]), segments, anchored
        )
    return len(pattern) if matched else -1


def _match_segments(path: str, pos: int, segments: tuple[str, ...], anchored: bool) -> bool:
    """Match ``segments[1:]`` (separated by ``*``) from ``pos``; the head already matched."""
    last = len(segments) - 1
    for i in range(1, last):
        found = path.find(segments[i], pos)
        if found < 0:
            return False
        pos = found + len(segments[i])
    tail = segments[last]
    if anchored:
        return len(path) - len(tail) >= pos and path.endswith(tail)
    return path.find(tail, pos) >= 0
