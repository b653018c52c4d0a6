"""Robot exclusion "version 2.0" rule sets (Sean Conner's proposed extensions).

A robots.txt rule set becomes a 2.0 set when ``Robot-version: 2.x`` (even ``x``) directly
follows its ``User-agent:`` lines; every other set is a 1.0 set. This module parses a whole
robots.txt under that reading and decides URLs for the sets that apply to a bot.

Project readings (docs/dialects.md has the reasons):

* Match kinds in a 2.0 set: a pattern with none of ``* ? [`` is *explicit* (the whole path
  must equal it); a pattern with any of them is a shell *glob* (``*`` matches any run of
  characters including ``/``, ``?`` one character, ``[...]`` a class, ``[!...]`` its
  complement; the glob must match the whole path); a pattern written ``~ REGEX`` is a
  Perl-style *regular expression* (Python :mod:`re` syntax, searched anywhere in the path,
  anchor with ``^``/``$``). 1.0 sets keep RFC 9309 prefix matching (``*`` and ``$`` as there,
  longest match wins, allow wins ties).
* Precedence in a 2.0 set: explicit allow > disallow > pattern allow > default-deny
  (a disallow whose pattern matches every path: ``*``, ``/*``, ``~ .*`` ...). A URL that
  passes the disallows must match some allow if the set has allow rules; with no allow
  rules it is allowed.
* ``#`` starts a comment only at the start of a line or after whitespace, in every set.
* A set with an experimental (odd minor) or unknown version is ignored: the bot falls back
  to the sets it would use if that set did not exist.
* ``Request-rate`` and ``Visit-time`` are honoured in 1.0 sets too (they only restrict).
  Rates that apply at a time: every windowed rate whose window contains it and every
  unwindowed rate; the slowest (largest seconds per document) wins. Several
  ``Visit-time`` lines in one set (the document allows one) must all admit the time.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol, TypeVar

import re2

from geminibot.policy.diagnostics import Diagnostic
from geminibot.policy.paths import path_of
from geminibot.policy.robots import MAX_ROBOTS_BYTES, match_length
from geminibot.policy.textlines import numbered_lines, pattern_text, whole_lines_within


class RegexLike(Protocol):
    """What a compiled rule pattern offers: Python's ``re`` for globs, RE2 for regexes."""

    def match(self, string: str) -> object | None: ...

    def search(self, string: str) -> object | None: ...


#: Regex rules run on RE2: linear time in the path whatever the pattern (Python's
#: backtracking ``re`` can be made to run for hours by a ten-character pattern).
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


def _re2_message(exc: Exception) -> str:
    text = exc.args[0] if exc.args else str(exc)
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)


REGEX_PREFIX = "~"
#: Longest regular expression accepted in a rule; longer ones are an error (and ignored
#: for an allow, match-everything for a disallow).
MAX_REGEX_LENGTH = 256

MatchKind = Literal["general", "explicit", "glob", "regex"]
SetKind = Literal["1.0", "2.0", "ignored"]
Role = Literal["own", "virtual", "default"]

_GLOB_CHARS = frozenset("*?[")
_REGEX_HINTS = re.compile(r"\.\*|\.\+|\\[dws.]|[\^()|+{}]")
_MATCH_ALL_PATTERNS = frozenset({"*", "/*", "**"})
_MATCH_ALL_REGEXES = frozenset({"", ".*", "^.*", "^/", "^/.*", "/", ".*$", "^.*$"})
_TOKEN = re.compile(r"[A-Za-z_-]+")
_TIME = re.compile(r"^(\d{2}):?(\d{2})$")
_RATE = re.compile(r"^(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*([smh]?)$", re.IGNORECASE)
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}
_FIELD_ALIASES = {
    "user-agent": "user-agent",
    "useragent": "user-agent",
    "user agent": "user-agent",
    "allow": "allow",
    "disallow": "disallow",
    "dissallow": "disallow",
    "disalow": "disallow",
    "robot-version": "robot-version",
    "robots-version": "robot-version",
    "request-rate": "request-rate",
    "visit-time": "visit-time",
    "comment": "comment",
    "sitemap": "sitemap",
    "crawl-delay": "crawl-delay",
    "host": "host",
    "clean-param": "clean-param",
}
_SET_FIELDS = frozenset({"robot-version", "request-rate", "visit-time", "comment"})


def strip_comment(line: str) -> tuple[str, bool]:
    """The line without its comment (2.0 rule) and whether a ``#`` was left in the value.

    ``#`` starts a comment at the start of a line or after whitespace; anywhere else it
    is part of the value (the second item is then True: ambiguous with the 1.0 reading).
    """
    for i, ch in enumerate(line):
        if ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], "#" in line[:i]
    return line, "#" in line


def rfc_match_length(pattern: str, path: str) -> int:
    """Octet length of ``pattern`` if it matches ``path`` under RFC 9309, else -1."""
    return match_length(pattern, path)


class PatternRule(Protocol):
    @property
    def allow(self) -> bool: ...
    @property
    def pattern(self) -> str: ...


R = TypeVar("R", bound=PatternRule)


def longest_match(rules: Iterable[R], path: str) -> R | None:
    """The RFC 9309 deciding rule: the longest matching pattern, allow winning a tie."""
    best: R | None = None
    best_len = -1
    for rule in rules:
        n = rfc_match_length(rule.pattern, path)
        if n >= 0 and (n > best_len or (n == best_len and rule.allow)):
            best, best_len = rule, n
    return best


@dataclass(frozen=True, slots=True)
class Window:
    """A daily UTC time window, minutes of the day, both ends inclusive (may wrap)."""

    start: int
    end: int

    def contains(self, at: datetime) -> bool:
        utc = at.astimezone(UTC) if at.tzinfo is not None else at
        minute = utc.hour * 60 + utc.minute
        if self.start <= self.end:
            return self.start <= minute <= self.end
        return minute >= self.start or minute <= self.end

    def __str__(self) -> str:
        return (
            f"{self.start // 60:02d}{self.start % 60:02d}-{self.end // 60:02d}{self.end % 60:02d}"
        )


@dataclass(frozen=True, slots=True)
class RequestRate:
    line: int
    documents: int
    seconds: float
    window: Window | None

    @property
    def interval(self) -> float:
        """The normalised rate: seconds to wait per document."""
        return self.seconds / self.documents


@dataclass(frozen=True, slots=True)
class V2Rule:
    line: int
    allow: bool
    pattern: str
    kind: MatchKind
    default_deny: bool = False
    _regex: RegexLike | None = field(default=None, compare=False, repr=False)
    _broken: bool = False

    def matches(self, path: str) -> bool:
        if self._broken:
            return not self.allow
        if self.kind == "general":
            return rfc_match_length(self.pattern, path) >= 0
        if self.kind == "explicit":
            return path == self.pattern
        assert self._regex is not None
        if self.kind == "glob":
            return self._regex.match(path) is not None
        return self._regex.search(path) is not None

    def text(self) -> str:
        shown = f"{REGEX_PREFIX} {self.pattern}" if self.kind == "regex" else self.pattern
        return f"{'Allow' if self.allow else 'Disallow'}: {shown}"


@dataclass(frozen=True, slots=True)
class RuleSet:
    agents: tuple[str, ...]
    agent_lines: tuple[int, ...]
    kind: SetKind
    version: str | None
    rules: tuple[V2Rule, ...]
    rates: tuple[RequestRate, ...]
    visit_times: tuple[tuple[int, Window], ...]
    comments: tuple[tuple[int, str], ...]


@dataclass(frozen=True, slots=True)
class SetDecision:
    """How one rule set judged one path."""

    role: Role
    token: str
    rule_set: RuleSet
    allowed: bool
    rule: V2Rule | None
    reason: str
    #: The line that decided: the rule's, the Visit-time's, else the first User-agent line.
    line: int = 0


@dataclass(frozen=True, slots=True)
class V2Decision:
    allowed: bool
    path: str
    sets: tuple[SetDecision, ...]
    reason: str

    @property
    def deciding(self) -> SetDecision | None:
        """The first set that refused, else the first set that applied."""
        for s in self.sets:
            if not s.allowed:
                return s
        return self.sets[0] if self.sets else None


@dataclass(frozen=True, slots=True)
class AppliedSets:
    role: Role
    token: str
    sets: tuple[RuleSet, ...]


@dataclass(frozen=True)
class V2File:
    sets: tuple[RuleSet, ...]
    diagnostics: tuple[Diagnostic, ...]
    _selected: dict[tuple[str, tuple[str, ...], bool], tuple[AppliedSets, ...]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def has_version_lines(self) -> bool:
        """True if some set declares a Robot-version (then this engine decides paths)."""
        return any(s.version is not None for s in self.sets)

    def select(
        self, agent: str, virtual_agents: Iterable[str] = (), strict: bool = False
    ) -> tuple[AppliedSets, ...]:
        """The rule sets that apply to a bot, grouped by the token that selected them."""
        key = (agent.lower(), tuple(virtual_agents), strict)
        found = self._selected.get(key)
        if found is None:
            found = self._selected[key] = self._select(agent, key[1], strict)
        return found

    def _select(
        self, agent: str, virtual_agents: tuple[str, ...], strict: bool
    ) -> tuple[AppliedSets, ...]:
        usable = [s for s in self.sets if s.kind != "ignored"]

        def named(token: str) -> tuple[RuleSet, ...]:
            low = token.lower()
            return tuple(s for s in usable if low in (a.lower() for a in s.agents))

        own = named(agent) if agent and agent != "*" else ()
        virtual = [
            AppliedSets("virtual", va, found)
            for va in dict.fromkeys(virtual_agents)
            if (found := named(va))
        ]
        default = tuple(s for s in usable if "*" in s.agents)
        out: list[AppliedSets] = []
        if own:
            out.append(AppliedSets("own", agent, own))
        if strict or not own:
            out.extend(virtual)
        if default and (strict or not out):
            out.append(AppliedSets("default", "*", default))
        return tuple(out)

    def decide(
        self,
        url: str,
        agent: str,
        virtual_agents: Iterable[str] = (),
        strict: bool = False,
        at: datetime | None = None,
    ) -> V2Decision:
        """Allowed only if every applicable set allows; ``at`` (UTC) checks Visit-time."""
        path = path_of(url)
        if path == "/robots.txt":
            return V2Decision(True, path, (), "/robots.txt is always allowed")
        judged: list[SetDecision] = []
        for applied in self.select(agent, virtual_agents, strict):
            judged.extend(_judge(applied, path, at))
        if not judged:
            return V2Decision(True, path, (), "no rule set applies: everything allowed")
        allowed = all(j.allowed for j in judged)
        first = next((j for j in judged if not j.allowed), judged[0])
        return V2Decision(allowed, path, tuple(judged), first.reason)

    def visit_refusals(
        self,
        agent: str,
        virtual_agents: Iterable[str] = (),
        strict: bool = False,
        at: datetime | None = None,
    ) -> tuple[tuple[int, Window], ...]:
        """The Visit-time windows (line, window) of the bot's sets that exclude ``at``."""
        if at is None:
            return ()
        return tuple(
            (line, window)
            for applied in self.select(agent, virtual_agents, strict)
            for rule_set in applied.sets
            for line, window in rule_set.visit_times
            if not window.contains(at)
        )

    def request_interval(
        self,
        agent: str,
        virtual_agents: Iterable[str] = (),
        strict: bool = False,
        at: datetime | None = None,
    ) -> RequestRate | None:
        """The slowest Request-rate in force at ``at`` for the bot (None if none)."""
        best: RequestRate | None = None
        for applied in self.select(agent, virtual_agents, strict):
            for rule_set in applied.sets:
                for rate in rule_set.rates:
                    if rate.window is not None and (at is None or not rate.window.contains(at)):
                        continue
                    if best is None or rate.interval > best.interval:
                        best = rate
        return best


def _judge(applied: AppliedSets, path: str, at: datetime | None) -> list[SetDecision]:
    """One decision per set kind among the sets a token selected (merged per kind)."""
    out: list[SetDecision] = []
    sets = applied.sets
    for kind in ("1.0", "2.0"):
        group = [s for s in sets if s.kind == kind]
        if not group:
            continue
        rules = [r for s in group for r in s.rules]
        if kind == "1.0":
            allowed, rule, reason = _decide_10(rules, path)
        else:
            allowed, rule, reason = _decide_20(rules, path)
        line = rule.line if rule else group[0].agent_lines[0] if group[0].agent_lines else 0
        out.append(SetDecision(applied.role, applied.token, group[0], allowed, rule, reason, line))
    if at is not None:
        for rule_set in sets:
            for line, window in rule_set.visit_times:
                if not window.contains(at):
                    reason = f"line {line}: Visit-time {window} UTC does not include {at:%H:%M}"
                    out.insert(
                        0,
                        SetDecision(
                            applied.role, applied.token, rule_set, False, None, reason, line
                        ),
                    )
    return out


def _decide_10(rules: list[V2Rule], path: str) -> tuple[bool, V2Rule | None, str]:
    best = longest_match(rules, path)
    if best is None:
        return True, None, "no rule matches (1.0 set): allowed"
    verdict = "allowed" if best.allow else "disallowed"
    return best.allow, best, f"line {best.line}: {best.text()} (1.0 longest match): {verdict}"


def _decide_20(rules: list[V2Rule], path: str) -> tuple[bool, V2Rule | None, str]:
    for rule in rules:
        if rule.allow and rule.kind == "explicit" and rule.matches(path):
            return True, rule, f"line {rule.line}: {rule.text()} (explicit allow): allowed"
    for rule in rules:
        if not rule.allow and not rule.default_deny and rule.matches(path):
            return False, rule, f"line {rule.line}: {rule.text()} (disallow): disallowed"
    for rule in rules:
        if rule.allow and rule.kind != "explicit" and rule.matches(path):
            return True, rule, f"line {rule.line}: {rule.text()} (pattern allow): allowed"
    for rule in rules:
        if rule.default_deny and rule.matches(path):
            return False, rule, f"line {rule.line}: {rule.text()} (default deny): disallowed"
    allows = [r for r in rules if r.allow]
    if allows:
        first = allows[0].line
        return False, None, f"no allow rule of the 2.0 set (from line {first}) matches: disallowed"
    return True, None, "no rule of the 2.0 set matches: allowed"


def parse_v2(data: bytes | str) -> V2File:
    """Parse a robots.txt under the version 2.0 reading. Never raises."""
    diags: list[Diagnostic] = []
    sets: list[RuleSet] = []
    builder: _SetBuilder | None = None
    # The robots.txt engine reports the size cut; read the same whole lines as it does.
    data, _ = whole_lines_within(data, MAX_ROBOTS_BYTES)
    lines = numbered_lines(data)
    for number, raw in lines:
        text, hash_in_value = strip_comment(raw)
        text = text.strip()
        if not text:
            continue
        if hash_in_value:
            diags.append(
                Diagnostic(
                    number,
                    "warning",
                    "ambiguous-comment",
                    "'#' not preceded by whitespace is part of the value in 2.0 but starts a "
                    "comment for RFC 9309 parsers",
                )
            )
        name, sep, value = text.partition(":")
        key = _FIELD_ALIASES.get(name.strip().lower())
        value = value.strip()
        if not sep or key is None:
            diags.append(
                Diagnostic(number, "info", "unknown-field", f"unknown line ignored: {text[:60]!r}")
            )
            continue
        if key == "user-agent":
            if builder is None or builder.has_body:
                if builder is not None:
                    sets.append(builder.build(diags))
                builder = _SetBuilder()
            builder.add_agent(number, value, diags)
            continue
        if key in ("sitemap", "crawl-delay", "host", "clean-param"):
            continue
        if builder is None:
            diags.append(
                Diagnostic(
                    number,
                    "warning",
                    "no-group",
                    f"{name.strip()} before any User-agent line ignored",
                )
            )
            continue
        builder.add(number, key, value, diags)
    if builder is not None:
        sets.append(builder.build(diags))
    diags.sort(key=lambda d: d.line)
    return V2File(tuple(sets), tuple(diags))


class _SetBuilder:
    def __init__(self) -> None:
        self.agents: list[str] = []
        self.agent_lines: list[int] = []
        self.has_body = False
        self.kind: SetKind = "1.0"
        self.version: str | None = None
        self.raw_rules: list[tuple[int, bool, str]] = []
        self.rates: list[RequestRate] = []
        self.visit_times: list[tuple[int, Window]] = []
        self.comments: list[tuple[int, str]] = []

    def add_agent(self, line: int, value: str, diags: list[Diagnostic]) -> None:
        if value.startswith("*"):
            token = "*"
        elif m := _TOKEN.match(value):
            token = m.group(0)
        else:
            diags.append(Diagnostic(line, "warning", "bad-agent", f"no product token in {value!r}"))
            return
        self.agents.append(token)
        self.agent_lines.append(line)

    def add(self, line: int, key: str, value: str, diags: list[Diagnostic]) -> None:
        first_body_line = not self.has_body
        self.has_body = True
        if key == "robot-version":
            self._version(line, value, first_body_line, diags)
        elif key in ("allow", "disallow"):
            self.raw_rules.append((line, key == "allow", value))
        elif key == "request-rate":
            rate = parse_rate(line, value, diags)
            if rate is not None:
                self.rates.append(rate)
        elif key == "visit-time":
            window = parse_window(value)
            if window is None:
                diags.append(
                    Diagnostic(
                        line,
                        "error",
                        "bad-visit-time",
                        f"Visit-time {value!r} is not HHMM-HHMM; ignored",
                    )
                )
            else:
                if self.visit_times:
                    diags.append(
                        Diagnostic(
                            line,
                            "warning",
                            "repeated-visit-time",
                            "more than one Visit-time: all must admit a visit",
                        )
                    )
                self.visit_times.append((line, window))
        elif key == "comment":
            self.comments.append((line, value))

    def _version(self, line: int, value: str, first: bool, diags: list[Diagnostic]) -> None:
        if self.version is not None:
            diags.append(
                Diagnostic(
                    line,
                    "error",
                    "repeated-version",
                    "only one Robot-version per rule set; ignored",
                )
            )
            return
        if not first:
            diags.append(
                Diagnostic(
                    line,
                    "warning",
                    "late-version",
                    "Robot-version must directly follow the User-agent lines; set read as 1.0",
                )
            )
            return
        self.version = value
        parts = value.split(".")
        wellformed = 2 <= len(parts) <= 3 and all(p.isdigit() for p in parts)
        major, minor = (int(parts[0]), int(parts[1])) if wellformed else (0, 0)
        if major == 1:
            self.kind = "1.0"
        elif major == 2 and minor % 2 == 0:
            self.kind = "2.0"
        elif major == 2:
            self.kind = "ignored"
            diags.append(
                Diagnostic(
                    line,
                    "info",
                    "experimental-version",
                    f"Robot-version {value} is experimental (odd minor): rule set ignored",
                )
            )
        else:
            self.kind = "ignored"
            diags.append(
                Diagnostic(
                    line,
                    "warning",
                    "bad-version",
                    f"unknown Robot-version {value!r}: rule set ignored",
                )
            )

    def build(self, diags: list[Diagnostic]) -> RuleSet:
        # Rules are classified once the set's version is known.
        rules = [
            make_rule(line, allow, value, self.kind == "2.0", diags)
            for line, allow, value in self.raw_rules
        ]
        return RuleSet(
            tuple(self.agents),
            tuple(self.agent_lines),
            self.kind,
            self.version,
            tuple(r for r in rules if r is not None),
            tuple(self.rates),
            tuple(self.visit_times),
            tuple(self.comments),
        )


def parse_window(value: str) -> Window | None:
    start, sep, end = value.strip().partition("-")
    a, b = _TIME.match(start.strip()), _TIME.match(end.strip())
    if not sep or a is None or b is None:
        return None
    h1, m1, h2, m2 = int(a.group(1)), int(a.group(2)), int(b.group(1)), int(b.group(2))
    if h1 > 23 or h2 > 23 or m1 > 59 or m2 > 59:
        return None
    return Window(h1 * 60 + m1, h2 * 60 + m2)


def parse_rate(line: int, value: str, diags: list[Diagnostic]) -> RequestRate | None:
    """``N/T[s|m|h] [HHMM-HHMM]``; the time unit defaults to seconds, T to 1."""
    rate_text, _, window_text = value.strip().partition(" ")
    m = _RATE.match(rate_text.strip())
    window: Window | None = None
    if window_text.strip():
        window = parse_window(window_text)
        if window is None:
            diags.append(
                Diagnostic(
                    line,
                    "error",
                    "bad-rate",
                    f"Request-rate window {window_text.strip()!r} is not HHMM-HHMM; ignored",
                )
            )
            return None
    if m is None:
        diags.append(
            Diagnostic(
                line, "error", "bad-rate", f"Request-rate {value!r} is not N/T[s|m|h]; ignored"
            )
        )
        return None
    documents = int(m.group(1))
    amount = float(m.group(2)) if m.group(2) else 1.0
    seconds = amount * _UNIT_SECONDS[m.group(3).lower()]
    if documents == 0 or seconds == 0:
        diags.append(
            Diagnostic(line, "error", "bad-rate", f"Request-rate {value!r} has a zero; ignored")
        )
        return None
    return RequestRate(line, documents, seconds, window)


def make_rule(
    line: int, allow: bool, value: str, v2: bool, diags: list[Diagnostic]
) -> V2Rule | None:
    """Classify and compile one Allow/Disallow value (None for an empty value)."""
    if not value:
        return None
    if not v2:
        return V2Rule(line, allow, pattern_text(value), "general")
    if value.startswith(REGEX_PREFIX):
        source = value[len(REGEX_PREFIX) :].strip()
        problem = None
        compiled: RegexLike | None = None
        if len(source) > MAX_REGEX_LENGTH:
            problem = f"regular expression longer than {MAX_REGEX_LENGTH} characters"
        else:
            try:
                compiled = re2.compile(source, options=_RE2_OPTIONS)
            except re2.error as exc:
                problem = f"not a regular expression RE2 accepts: {_re2_message(exc)}"
            except UnicodeEncodeError:  # bytes that are not UTF-8, kept as surrogates
                problem = "regular expression is not valid UTF-8"
        if problem is not None:
            effect = "never matches" if allow else "matches every path"
            diags.append(Diagnostic(line, "error", "bad-regex", f"{problem}; this rule {effect}"))
            return V2Rule(line, allow, source, "regex", False, None, True)
        return V2Rule(
            line, allow, source, "regex", (not allow) and source in _MATCH_ALL_REGEXES, compiled
        )
    # A literal '#' can only appear in a URL path escaped, as %23.
    pattern = pattern_text(value).replace("#", "%23")
    if _REGEX_HINTS.search(value):
        diags.append(
            Diagnostic(
                line,
                "warning",
                "ambiguous-pattern",
                f"{value!r} looks like a regular expression but is read as a shell glob; "
                f"write '{REGEX_PREFIX} {value}' for a regex",
            )
        )
    if value.endswith("$") and len(value) > 1:
        diags.append(
            Diagnostic(
                line,
                "warning",
                "ambiguous-pattern",
                "'$' is a literal character in a 2.0 glob, not an end anchor",
            )
        )
    if "?" in value:
        diags.append(
            Diagnostic(
                line,
                "info",
                "glob-question-mark",
                "'?' matches any one character in a 2.0 glob; write [?] for a literal '?'",
            )
        )
    if not _GLOB_CHARS.intersection(pattern):
        if pattern.endswith("/"):
            diags.append(
                Diagnostic(
                    line,
                    "warning",
                    "explicit-directory",
                    f"in a 2.0 set {pattern!r} matches that exact path only, nothing below it; "
                    f"write '{pattern}*' for everything below",
                )
            )
        return V2Rule(line, allow, pattern, "explicit")
    regex = re.compile(fnmatch.translate(pattern), re.DOTALL)
    return V2Rule(
        line, allow, pattern, "glob", (not allow) and pattern in _MATCH_ALL_PATTERNS, regex
    )
