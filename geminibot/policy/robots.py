"""robots.txt (RFC 9309) with Gemini's virtual user agents.

Parsing follows Google's open-source reference parser line for line (see docs/policy.md
for the list): lines end at CR, LF or CRLF; a UTF-8 byte order mark (or a prefix of one)
is skipped; ``#`` starts a comment anywhere; keys are matched by case-insensitive prefix,
with Google's accepted typos; a missing ``:`` is accepted when the line has exactly two
words; a ``User-agent`` line after an Allow or Disallow line starts a new group (other
lines, such as Sitemap or Crawl-delay, do not end a group); product
tokens are the leading run of ``[A-Za-z_-]`` of the value; ``*`` matches any run of
characters and a final ``$`` anchors; the longest matching pattern wins and an allow wins
a tie. Two intended differences: ``/robots.txt`` is always allowed, and the URL is
percent-encoding normalised before matching (:mod:`geminibot.policy.paths`).

Nothing here raises on any input: what the parser noticed is kept as diagnostics.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from geminibot.policy.diagnostics import Diagnostic, Level
from geminibot.policy.paths import SCHEME_AND_AUTHORITY, normalise_pattern, path_of

#: RFC 9309 section 2.5: crawlers must parse at least 500 KiB; we parse exactly that much.
MAX_ROBOTS_BYTES = 500 * 1024
#: Google's parser keeps at most this many bytes of one line (2083 * 8, less its NUL).
MAX_LINE_BYTES = 2083 * 8 - 1
#: The Gemini virtual user agents (gemini-robots-virtual-agents.txt).
VIRTUAL_AGENTS: tuple[str, ...] = ("archiver", "indexer", "researcher", "webproxy")
#: The path that is always allowed (RFC 9309 section 2.2.2).
ROBOTS_PATH = "/robots.txt"

Mode = Literal["precedence", "strict"]
Role = Literal["own", "virtual", "default"]

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
_PRODUCT_TOKEN = re.compile(rb"[A-Za-z_-]*")
_PRODUCT_TOKEN_TEXT = re.compile(r"[A-Za-z_-]*")
_WHITESPACE = b" \t"
_BOM = b"\xef\xbb\xbf"

_USER_AGENT_KEYS = (b"user-agent", b"useragent", b"user agent")
_DISALLOW_KEYS = (b"disallow", b"dissallow", b"dissalow", b"disalow", b"diasllow", b"disallaw")
_SITEMAP_KEYS = (b"sitemap", b"site-map")
#: Fields some crawlers read that RFC 9309 does not define: noted, not warned about.
_KNOWN_EXTENSIONS = {
    b"crawl-delay": "read as the group's crawl delay (not part of RFC 9309; Google ignores it)",
    b"host": "a Yandex extension; ignored",
    b"clean-param": "a Yandex extension; ignored",
    b"request-rate": "a robots 'version 2.0' extension; read by the site policy, not here",
    b"visit-time": "a robots 'version 2.0' extension; read by the site policy, not here",
    b"robot-version": "a robots 'version 2.0' extension; read by the site policy, not here",
    b"comment": "a robots 'version 2.0' extension; ignored",
    b"noindex": "not a robots.txt field (Google stopped reading it in 2019); ignored",
}


@dataclass(frozen=True, slots=True)
class Rule:
    """One Allow or Disallow line. ``pattern`` is percent-encoding normalised."""

    line: int
    allow: bool
    pattern: str
    #: Set on the extra rule Google derives from ``Allow: .../index.htm...`` (``.../$``).
    derived_from: str | None = None

    @property
    def directive(self) -> str:
        return "Allow" if self.allow else "Disallow"

    def text(self) -> str:
        return f"{self.directive}: {self.pattern}"

    def describe(self) -> str:
        text = f"'{self.directive}: {self.derived_from or self.pattern}' (line {self.line}"
        if self.derived_from is not None:
            text += f", read as '{self.pattern}' by Google's index.html rule"
        return text + ")"

    def as_dict(self) -> dict[str, object]:
        return {"line": self.line, "directive": self.directive, "pattern": self.pattern}


class DecidingRule(Protocol):
    """What a decision says of the rule that decided: a robots.txt :class:`Rule`, or a
    version 2.0 rule (:class:`geminibot.policy.ext20.Ext20Rule`)."""

    @property
    def line(self) -> int: ...
    @property
    def allow(self) -> bool: ...
    @property
    def pattern(self) -> str: ...
    @property
    def directive(self) -> str: ...
    def text(self) -> str:
        """The line as it reads: ``Disallow: /x``."""
        ...

    def describe(self) -> str:
        """The rule and its line, quoted for an explanation."""
        ...

    def as_dict(self) -> dict[str, object]: ...


@dataclass(frozen=True, slots=True)
class AgentLine:
    """One ``User-agent`` line: the value as written and the token it matches as."""

    line: int
    value: str
    #: ``*`` for the global group, else the lower-cased product token ("" matches nothing).
    token: str


@dataclass(frozen=True, slots=True)
class Group:
    """A group: consecutive User-agent lines and the lines that follow until the next group."""

    agents: tuple[AgentLine, ...]
    rules: tuple[Rule, ...]
    crawl_delay: float | None = None
    #: The line of the Crawl-delay that set ``crawl_delay`` (the largest of the group's).
    crawl_delay_line: int = 0

    @property
    def lines(self) -> tuple[int, ...]:
        return tuple(a.line for a in self.agents)


@dataclass(frozen=True, slots=True)
class AppliedGroup:
    """The rules for one token (all groups naming it, merged) and what they said.

    The one type for both engines: a version 2.0 file gives one per token and set kind
    (and one per Visit-time window that refuses), with its own ``reason``."""

    token: str
    role: Role
    lines: tuple[int, ...]
    rule: DecidingRule | None
    allowed: bool
    #: The group's own explanation (version 2.0 sets and Visit-time windows), else "".
    reason: str = ""
    #: The line that decided when it is not the rule's (a Visit-time line), else 0.
    line: int = 0

    @property
    def deciding_line(self) -> int:
        """The line that decided: a Visit-time's, the rule's, else the first User-agent's."""
        if self.line:
            return self.line
        if self.rule is not None:
            return self.rule.line
        return self.lines[0] if self.lines else 0

    def describe(self) -> str:
        where = ", ".join(str(n) for n in self.lines)
        plural = "s" if len(self.lines) > 1 else ""
        return f"the group for {self.token} (User-agent line{plural} {where})"

    def as_dict(self) -> dict[str, object]:
        return {
            "token": self.token,
            "role": self.role,
            "lines": list(self.lines),
            "allowed": self.allowed,
            "rule": self.rule.as_dict() if self.rule else None,
            **({"reason": self.reason} if self.reason else {}),
        }


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether a URL may be fetched, which groups applied, which rule decided, and why."""

    url: str
    path: str
    allowed: bool
    mode: Mode
    groups: tuple[AppliedGroup, ...]
    #: The deciding rule: for a refusal the first refusing group's rule; else the first rule
    #: that matched in an allowing group; None when no rule matched.
    rule: DecidingRule | None
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {
            "url": self.url,
            "path": self.path,
            "allowed": self.allowed,
            "reason": self.reason,
            "rule": self.rule.as_dict() if self.rule else None,
            "mode": self.mode,
            "groups": [g.as_dict() for g in self.groups],
        }

    @property
    def deciding(self) -> AppliedGroup | None:
        """The first group that refused, else the first group that applied."""
        refusing = next((g for g in self.groups if not g.allowed), None)
        return refusing or (self.groups[0] if self.groups else None)


# --------------------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------------------

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


class _ExpressionMatcher:
    """A small rule list as one alternation of :func:`_expression` branches, best first.

    ``re`` tries branches in order and stops at the first that matches, which is then the
    best matching rule; each branch ends in an empty group, so ``lastindex`` says which
    (None: no rule matched). Branches start with their literal head, so ``re`` rejects
    most of them after a character or two.

    A plain URL (ASCII, nothing to normalise, no fragment, not scheme-relative) is matched
    as it stands, by a second expression that first skips its scheme and authority, so
    the common call costs one ``re`` match. Anything else, and a URL whose authority is
    not followed by ``/``, is matched on :func:`path_of`.
    """

    __slots__ = ("_in_path", "_in_url", "_rules")

    def __init__(self, ranked: Sequence[Rule]) -> None:
        branches = "|".join(_expression(rule.pattern) + "()" for rule in ranked)
        rules = f"(?:{branches})?" if ranked else ""
        self._in_path = re.compile(rules, re.DOTALL).match
        self._in_url = re.compile(_URL_HEAD + rules, re.DOTALL).match
        #: Group n closes branch n; there is no group 0.
        self._rules: tuple[Rule | None, ...] = (None, *ranked)

    def best(self, url: str) -> Rule | None:
        found = None
        if url.isascii() and "%" not in url and "#" not in url:
            found = self._in_url(url)
            if found is None and url[:1] == "/" and url[1:2] != "/":
                found = self._in_path(url)  # a bare path, not scheme-relative
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


# --------------------------------------------------------------------------------------
# The parsed file
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _PlanEntry:
    token: str
    role: Role
    lines: tuple[int, ...]
    matcher: Matcher
    #: (seconds, line) of the largest Crawl-delay of the merged groups, or None.
    crawl_delay: tuple[float, int] | None


@dataclass(eq=False)
class RobotsFile:
    """A parsed robots.txt. Build it with :func:`parse_robots`; it is read-only after that."""

    groups: tuple[Group, ...] = ()
    sitemaps: tuple[str, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    #: Size of the input in bytes, and whether it was cut at MAX_ROBOTS_BYTES.
    size: int = 0
    truncated: bool = False
    #: For a policy that stands for a fetch outcome, not a file: True allows everything,
    #: False disallows everything but /robots.txt; ``blanket_reason`` says why.
    blanket: bool | None = None
    blanket_reason: str = ""
    _by_token: dict[str, list[Group]] = field(default_factory=dict, repr=False)
    _global: list[Group] = field(default_factory=list, repr=False)
    _matchers: dict[str, Matcher] = field(default_factory=dict, repr=False)
    _plans: dict[tuple[str, tuple[str, ...], bool], tuple[_PlanEntry, ...]] = field(
        default_factory=dict, repr=False
    )
    #: The last plan made or found, under the caller's own (agent, virtual agents, strict)
    #: objects, for :meth:`allowed` to know again by identity.
    _last_plan: tuple[str, tuple[str, ...], bool, tuple[_PlanEntry, ...]] | None = field(
        default=None, repr=False
    )

    def __post_init__(self) -> None:
        for group in self.groups:
            tokens = {a.token for a in group.agents}
            for token in tokens:
                if token == "*":
                    self._global.append(group)
                elif token:
                    self._by_token.setdefault(token, []).append(group)

    @classmethod
    def allow_all(cls, reason: str) -> RobotsFile:
        """The policy of a host whose robots.txt is unavailable: everything is allowed."""
        return cls(blanket=True, blanket_reason=reason)

    @classmethod
    def disallow_all(cls, reason: str) -> RobotsFile:
        """The policy of a host whose robots.txt is unreachable: nothing but /robots.txt."""
        return cls(blanket=False, blanket_reason=reason)

    @property
    def tokens(self) -> frozenset[str]:
        """Every product token a group names (lower-cased), without ``*``."""
        return frozenset(self._by_token)

    # -- deciding -----------------------------------------------------------------------

    def allowed(
        self,
        url: str,
        agent: str,
        virtual_agents: Iterable[str] = (),
        strict: bool = False,
    ) -> bool:
        """Whether ``agent`` (acting as ``virtual_agents``) may fetch ``url``."""
        if ROBOTS_PATH in url and path_of(url) == ROBOTS_PATH:
            return True
        if self.blanket is not None:
            return self.blanket
        # A bot asks about many URLs in a row with the same arguments: the plan _plan
        # made last is known again by identity, without a call (the per-URL hot path).
        last = self._last_plan
        if (
            last is not None
            and last[0] is agent
            and last[1] is virtual_agents
            and last[2] is strict
        ):
            plan = last[3]
        else:
            plan = self._plan(agent, virtual_agents, strict)
        for entry in plan:
            rule = entry.matcher.best(url)
            if rule is not None and not rule.allow:
                return False
        return True

    def decide(
        self,
        url: str,
        agent: str,
        virtual_agents: Iterable[str] = (),
        strict: bool = False,
    ) -> Decision:
        """Like :meth:`allowed`, with the groups that applied, the deciding rule and why."""
        path = path_of(url)
        vas = tuple(virtual_agents)
        mode: Mode = "strict" if strict else "precedence"
        if path == ROBOTS_PATH:
            reason = "allowed: /robots.txt itself is always allowed (RFC 9309 section 2.2.2)"
            return Decision(url, path, True, mode, (), None, reason)
        if self.blanket is not None:
            verdict = "allowed" if self.blanket else "disallowed"
            return Decision(
                url, path, self.blanket, mode, (), None, f"{verdict}: {self.blanket_reason}"
            )
        plan = self._plan(agent, vas, strict)
        applied = tuple(
            AppliedGroup(e.token, e.role, e.lines, rule, rule is None or rule.allow)
            for e in plan
            for rule in (e.matcher.best(url),)
        )
        allowed = all(g.allowed for g in applied)
        deciding = next((g for g in applied if not g.allowed), None) if not allowed else None
        if deciding is None:
            deciding = next((g for g in applied if g.rule is not None), None)
        rule = deciding.rule if deciding else None
        reason = _explain(agent, vas, path, allowed, applied, deciding, strict)
        return Decision(url, path, allowed, mode, applied, rule, reason)

    def crawl_delay(
        self, agent: str, virtual_agents: Iterable[str] = (), strict: bool = False
    ) -> float | None:
        """The largest Crawl-delay among the groups that apply, or None if none sets one."""
        found = self.crawl_delay_rule(agent, virtual_agents, strict)
        return found[0] if found is not None else None

    def crawl_delay_rule(
        self, agent: str, virtual_agents: Iterable[str] = (), strict: bool = False
    ) -> tuple[float, int] | None:
        """:meth:`crawl_delay` with the line of its ``Crawl-delay`` (the first, on a tie)."""
        delays = [e.crawl_delay for e in self._plan(agent, virtual_agents, strict)]
        present = [d for d in delays if d is not None]
        return max(present, key=lambda d: (d[0], -d[1])) if present else None

    def applicable_groups(
        self, agent: str, virtual_agents: Iterable[str] = (), strict: bool = False
    ) -> tuple[tuple[str, Role, tuple[int, ...]], ...]:
        """Which token groups apply to this bot: (token, role, User-agent lines) each."""
        return tuple((e.token, e.role, e.lines) for e in self._plan(agent, virtual_agents, strict))

    def _plan(
        self, agent: str, virtual_agents: Iterable[str], strict: bool
    ) -> tuple[_PlanEntry, ...]:
        vas = tuple(virtual_agents)
        key = (agent.lower(), vas, strict)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._build_plan(*key)
        if isinstance(virtual_agents, tuple):  # immutable: safe to know again by identity
            self._last_plan = (agent, virtual_agents, strict, plan)
        return plan

    def _build_plan(self, agent: str, vas: tuple[str, ...], strict: bool) -> tuple[_PlanEntry, ...]:
        unknown = [v for v in vas if v.lower() not in VIRTUAL_AGENTS]
        if unknown:
            known = ", ".join(VIRTUAL_AGENTS)
            raise ValueError(f"unknown virtual agent {unknown[0]!r}; known: {known}")
        own = self._entry(agent, "own", self._by_token.get(agent, []))
        virtual = [
            entry
            for va in dict.fromkeys(v.lower() for v in vas)
            if va != agent
            for entry in (self._entry(va, "virtual", self._by_token.get(va, [])),)
            if entry is not None
        ]
        default = self._entry("*", "default", self._global)
        if strict:
            return tuple(e for e in (own, *virtual, default) if e is not None)
        if own is not None:
            return (own,)
        if virtual:
            return tuple(virtual)
        return (default,) if default is not None else ()

    def _entry(self, token: str, role: Role, groups: Sequence[Group]) -> _PlanEntry | None:
        if not groups:
            return None
        matcher = self._matchers.get(token)
        if matcher is None:
            matcher = matcher_for(rule for g in groups for rule in g.rules)
            self._matchers[token] = matcher
        lines = tuple(line for g in groups for line in g.lines)
        delays = [(g.crawl_delay, g.crawl_delay_line) for g in groups if g.crawl_delay is not None]
        delay = max(delays, key=lambda d: (d[0], -d[1])) if delays else None
        return _PlanEntry(token, role, lines, matcher, delay)


def _explain(
    agent: str,
    vas: tuple[str, ...],
    path: str,
    allowed: bool,
    applied: tuple[AppliedGroup, ...],
    deciding: AppliedGroup | None,
    strict: bool,
) -> str:
    verdict = "allowed" if allowed else "disallowed"
    if not applied:
        names = ", ".join([agent, *vas, "*"])
        return f"allowed: no group names any of {names}, so nothing is disallowed"
    if len(applied) == 1:
        group = applied[0]
        if group.rule is None:
            return f"allowed: no rule in {group.describe()} matches {path}"
        return f"{verdict} by {group.rule.describe()} in {group.describe()}"
    mode = "strict mode" if strict else "precedence mode"
    tokens = ", ".join(g.token for g in applied)
    if not allowed and deciding is not None and deciding.rule is not None:
        return (
            f"disallowed by {deciding.rule.describe()} in {deciding.describe()}; "
            f"{mode} applies {tokens} and takes the most restrictive"
        )
    return f"allowed by every applicable group ({tokens}, {mode})"


# --------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------


class _Collector:
    """Accumulates groups and diagnostics while lines are read."""

    def __init__(self) -> None:
        self.groups: list[Group] = []
        self.sitemaps: list[str] = []
        self.diagnostics: list[Diagnostic] = []
        self._agents: list[AgentLine] = []
        self._rules: list[Rule] = []
        self._delay: float | None = None
        self._delay_line = 0
        self._open = False  # a group is being filled
        self._separator = False  # an Allow/Disallow line was seen since the last User-agent
        self._between: tuple[int, str] | None = None  # another line between User-agent lines

    def note(self, line: int, level: Level, code: str, message: str) -> None:
        self.diagnostics.append(Diagnostic(line, level, code, message))

    def close_group(self) -> None:
        if self._open:
            if not self._rules:
                first = self._agents[0].line
                self.note(
                    first,
                    "warning",
                    "empty-group",
                    "group has no Allow or Disallow rule: everything is allowed to the agents it names",
                )
            self.groups.append(
                Group(tuple(self._agents), tuple(self._rules), self._delay, self._delay_line)
            )
        self._agents, self._rules, self._delay, self._delay_line = [], [], None, 0
        self._open = False

    def _note_joining(self, line: int, what: str) -> None:
        """Remember a non-rule line between User-agent lines: it does not end the group."""
        if self._open and not self._separator and self._between is None:
            self._between = (line, what)

    def user_agent(self, line: int, raw: bytes) -> None:
        if self._open and self._separator:
            self.close_group()
        elif self._open and self._between is not None:
            where, what = self._between
            self.note(
                where,
                "warning",
                "group-not-closed",
                f"{what} does not end a group: the User-agent lines before it and line {line} "
                "share the rules that follow (as in Google's parser); add the rules in between",
            )
        self._between = None
        self._open = True
        self._separator = False
        value = _decode(raw)
        token = agent_token(value)
        if token == "*":
            if len(raw) > 1:
                self.note(line, "info", "agent-star-text", f"'{value}' is read as '*'")
            self._agents.append(AgentLine(line, value, "*"))
            return
        match = _PRODUCT_TOKEN.match(raw)
        if not token:
            self.note(
                line,
                "warning",
                "agent-no-token",
                f"User-agent '{value}' has no product token (letters, '-', '_'): it matches no crawler",
            )
        elif len(token) != len(raw):
            self.note(
                line,
                "warning",
                "agent-token-cut",
                f"User-agent '{value}' matches crawlers as '{match.group(0).decode() if match else ''}' "
                "(a product token is letters, '-' and '_' only)",
            )
        self._agents.append(AgentLine(line, value, token))

    def rule(self, line: int, allow: bool, raw: bytes) -> None:
        directive = "Allow" if allow else "Disallow"
        if not self._open:
            self.note(
                line,
                "error",
                "rule-outside-group",
                f"{directive} before any User-agent line belongs to no group and is ignored",
            )
            return
        self._separator = True
        pattern = normalise_pattern(raw)
        if pattern and pattern[0] not in "/*":
            self.note(
                line,
                "warning",
                "pattern-no-slash",
                f"{directive} pattern '{pattern}' does not start with '/' or '*': it can never match",
            )
        if not pattern and not allow:
            self.note(line, "info", "empty-disallow", "empty Disallow: allows everything")
        self._rules.append(Rule(line, allow, pattern))
        if allow:
            slash = pattern.rfind("/")
            if slash != -1 and pattern.startswith("/index.htm", slash):
                derived = pattern[: slash + 1] + "$"
                self._rules.append(Rule(line, True, derived, derived_from=pattern))

    def other(self, line: int, key: bytes, raw: bytes) -> None:
        self._note_joining(line, "'" + _decode(key) + "'")
        lowered = key.lower()
        if lowered == b"crawl-delay":
            self._crawl_delay(line, raw)
            return
        extension = _KNOWN_EXTENSIONS.get(lowered)
        if extension is not None:
            self.note(line, "info", "extension-field", f"'{_decode(key)}': {extension}")
        else:
            self.note(
                line, "warning", "unknown-field", f"unknown field '{_decode(key)}' is ignored"
            )

    def _crawl_delay(self, line: int, raw: bytes) -> None:
        text = _decode(raw)
        try:
            delay = float(text)
        except ValueError:
            delay = -1.0
        if not (0 <= delay < float("inf")):
            self.note(
                line,
                "warning",
                "bad-crawl-delay",
                f"Crawl-delay '{text}' is not a number of seconds; ignored",
            )
        elif not self._open:
            self.note(
                line,
                "warning",
                "delay-outside-group",
                "Crawl-delay before any User-agent line is ignored",
            )
        elif self._delay is None or delay > self._delay:
            self._delay, self._delay_line = delay, line

    def sitemap(self, line: int, raw: bytes) -> None:
        self._note_joining(line, "Sitemap")
        url = _decode(raw)
        if "://" not in url:
            self.note(
                line, "warning", "sitemap-not-absolute", f"Sitemap '{url}' is not an absolute URL"
            )
        self.sitemaps.append(url)


def agent_token(value: str) -> str:
    """The product token a User-agent value (or a bot's own ``--agent``) matches as, as
    Google's parser reads it: ``*`` for ``*`` alone or followed by whitespace, else the
    leading run of ``[A-Za-z_-]`` lower-cased (``MJ12bot/1.0`` -> ``mj12bot``; "" if none)."""
    if value[:1] == "*" and (len(value) == 1 or value[1:2].isspace()):
        return "*"
    match = _PRODUCT_TOKEN_TEXT.match(value)
    return match.group(0).lower() if match else ""


def own_token(agent: str) -> tuple[str, str | None]:
    """A bot's own product token (``--agent``) as it can match a User-agent line: cut as
    :func:`agent_token` cuts a User-agent value, and a warning to show when the cut changed
    it (None for a plain token). ValueError when ``agent`` has no product token."""
    stripped = agent.strip()
    token = agent_token(stripped)
    if not token or token == "*":
        raise ValueError(
            f"--agent {agent!r} has no product token (letters, '-', '_'), e.g. --agent geminibot"
        )
    if len(token) == len(agent):
        return agent, None
    cut = stripped[: len(token)]
    return cut, (
        f"--agent '{agent}' is matched as '{cut}': a product token is the leading letters, "
        f"'-' and '_', as Google's parser reads it (a 'User-agent: {stripped}' line is read "
        f"as '{cut}' too)"
    )


def read_field(text: str) -> tuple[str, str, str] | None:
    """(kind, key as written, value) of one comment-free line, its key read as Google's
    parser reads it: ``kind`` is ``user-agent``, ``allow``, ``disallow`` or ``sitemap``
    (accepting Google's typos and key prefixes such as ``Disallowed``), else the key
    lower-cased. A missing colon is accepted when the line is exactly two words. None for
    a line that is not ``field: value``. The version 2.0 reading uses this too, so both
    engines split a file into the same groups."""
    parts = _split_key_value(text.strip().encode("utf-8", "surrogateescape"))
    if parts is None:
        return None
    key, value, _ = parts
    kind, _ = _key_kind(key.lower())
    key_text = key.decode("utf-8", "surrogateescape")
    value_text = value.decode("utf-8", "surrogateescape")
    return (kind if kind != "other" else key_text.lower()), key_text, value_text


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _to_bytes(data: bytes | str) -> bytes:
    if isinstance(data, bytes):
        return data
    try:
        return data.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return data.encode("utf-8", "surrogatepass")


def _split_key_value(line: bytes) -> tuple[bytes, bytes, bool] | None:
    """(key, value, colon_missing) of a comment-stripped, whitespace-stripped line."""
    colon = line.find(b":")
    missing = colon == -1
    if missing:
        # Google: a forgotten colon is accepted when the line is exactly two words
        # separated by spaces or tabs.
        gaps = [i for i in (line.find(b" "), line.find(b"\t")) if i != -1]
        if not gaps:
            return None
        key, value = line[: min(gaps)], line[min(gaps) :].lstrip(_WHITESPACE)
        if b" " in value or b"\t" in value:
            return None
    else:
        key, value = line[:colon], line[colon + 1 :]
    key, value = key.strip(), value.strip()
    if not key:
        return None
    return key, value, missing


def _key_kind(lowered: bytes) -> tuple[str, str | None]:
    """(kind, canonical spelling if the key was accepted as a variant of it)."""
    for kind, canonical, variants in (
        ("user-agent", "User-agent", _USER_AGENT_KEYS),
        ("allow", "Allow", (b"allow",)),
        ("disallow", "Disallow", _DISALLOW_KEYS),
        ("sitemap", "Sitemap", _SITEMAP_KEYS),
    ):
        for variant in variants:
            if lowered.startswith(variant):
                exact = lowered == canonical.lower().encode()
                return kind, None if exact else canonical
    return "other", None


def parse_robots(data: bytes | str) -> RobotsFile:
    """Parse a robots.txt body. Never raises; see the module docstring for the rules."""
    raw = _to_bytes(data)
    out = _Collector()
    size = len(raw)
    truncated = size > MAX_ROBOTS_BYTES
    if truncated:
        cut = raw[:MAX_ROBOTS_BYTES]
        last_break = max(cut.rfind(b"\n"), cut.rfind(b"\r"))
        raw = cut[: last_break + 1] if last_break >= 0 else b""
    bom = 0
    while bom < 3 and bom < len(raw) and raw[bom] == _BOM[bom]:
        bom += 1
    if bom:
        out.note(1, "info", "bom", "a UTF-8 byte order mark was skipped")
        raw = raw[bom:]
    lines = _LINE_BREAK.split(raw)
    if truncated:
        out.note(
            len(lines),
            "warning",
            "size-limit",
            f"file is {size} bytes; only the first {MAX_ROBOTS_BYTES} bytes (whole lines) are read",
        )
    for number, line in enumerate(lines, start=1):
        if not line:
            continue
        _parse_line(out, number, line)
    out.close_group()
    return RobotsFile(
        groups=tuple(out.groups),
        sitemaps=tuple(out.sitemaps),
        diagnostics=tuple(out.diagnostics),
        size=size,
        truncated=truncated,
    )


def _parse_line(out: _Collector, number: int, line: bytes) -> None:
    line = _line_content(out, number, line)
    if not line:
        return
    parts = _split_key_value(line)
    if parts is None:
        out.note(
            number, "error", "no-separator", f"'{_decode(line)}' is not 'field: value'; ignored"
        )
        return
    key, value, colon_missing = parts
    kind, canonical = _key_kind(key.lower())
    if colon_missing:
        out.note(
            number,
            "warning",
            "missing-colon",
            f"no ':' after '{_decode(key)}'; read as '{_decode(key)}: {_decode(value)}'",
        )
    if canonical is not None:
        out.note(number, "warning", "typo-accepted", f"'{_decode(key)}' is read as '{canonical}'")
    if kind == "user-agent":
        out.user_agent(number, value)
    elif kind == "allow":
        out.rule(number, True, value)
    elif kind == "disallow":
        out.rule(number, False, value)
    elif kind == "sitemap":
        out.sitemap(number, value)
    else:
        out.other(number, key, value)


def _line_content(out: _Collector, number: int, line: bytes) -> bytes:
    """The line cut at MAX_LINE_BYTES, at a NUL byte and at its comment, stripped."""
    if len(line) > MAX_LINE_BYTES:
        out.note(number, "warning", "line-too-long", f"line is cut at {MAX_LINE_BYTES} bytes")
        line = line[:MAX_LINE_BYTES]
    nul = line.find(b"\0")
    if nul != -1:
        out.note(number, "error", "nul-byte", "NUL byte: the rest of the line is ignored")
        line = line[:nul]
    hash_at = line.find(b"#")
    if hash_at != -1:
        line = line[:hash_at]
    line = line.strip()
    if line:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            out.note(number, "warning", "not-utf8", "line is not valid UTF-8")
    return line
