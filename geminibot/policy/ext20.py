"""Robot exclusion "version 2.0" rule sets (Sean Conner's proposed extensions to robots.txt).

Named ``ext20`` (and its types ``Ext20...``) so that no reader mistakes it for robots2.txt,
the unrelated AI usage policy file of :mod:`geminibot.policy.robots2`.

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

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Literal

from geminibot.policy.diagnostics import Diagnostic
from geminibot.policy.ext20_patterns import Ext20Rule, make_rule
from geminibot.policy.paths import path_of
from geminibot.policy.robots import RobotsFile
from geminibot.policy.robots_match import matcher_for
from geminibot.policy.robots_model import (
    ROBOTS_PATH,
    AppliedGroup,
    Decision,
    Group,
    Mode,
    Role,
    Rule,
)
from geminibot.policy.robots_parse import MAX_ROBOTS_BYTES, agent_token, parse_robots, read_field
from geminibot.policy.textlines import numbered_lines, whole_lines_within

SetKind = Literal["1.0", "2.0", "ignored"]

_TIME = re.compile(r"^(\d{2}):?(\d{2})$")
_RATE = re.compile(r"^(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*([smh]?)$", re.IGNORECASE)
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}
#: The fields of a 2.0 file besides those :func:`read_field` reads as Google does
#: (User-agent, Allow, Disallow, Sitemap, with Google's typos).
_FIELD_ALIASES = {
    "user-agent": "user-agent",
    "allow": "allow",
    "disallow": "disallow",
    "sitemap": "sitemap",
    "robot-version": "robot-version",
    "robots-version": "robot-version",
    "request-rate": "request-rate",
    "visit-time": "visit-time",
    "comment": "comment",
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
    """One ``Request-rate`` line: ``documents`` per ``seconds``, within a daily window or always."""

    line: int
    documents: int
    seconds: float
    window: Window | None

    @property
    def interval(self) -> float:
        """The normalised rate: seconds to wait per document."""
        return self.seconds / self.documents


@dataclass(frozen=True, slots=True)
class Ext20RuleSet:
    """One rule set of the file: its User-agent lines, its version (1.0, 2.0 or ignored) and
    what its lines say."""

    agents: tuple[str, ...]
    agent_lines: tuple[int, ...]
    kind: SetKind
    version: str | None
    rules: tuple[Ext20Rule, ...]
    rates: tuple[RequestRate, ...]
    visit_times: tuple[tuple[int, Window], ...]
    comments: tuple[tuple[int, str], ...]


@dataclass(frozen=True, slots=True)
class Ext20AppliedSets:
    """The sets one token of a bot selected, and the role of that token."""

    role: Role
    token: str
    sets: tuple[Ext20RuleSet, ...]


@dataclass(frozen=True)
class Ext20File:
    """A robots.txt read as version 2.0 rule sets. Build it with :func:`parse_ext20`."""

    sets: tuple[Ext20RuleSet, ...]
    diagnostics: tuple[Diagnostic, ...]
    _prepared: _Prepared = field(default_factory=dict, repr=False, compare=False)
    _selected: dict[tuple[str, tuple[str, ...], bool], tuple[Ext20AppliedSets, ...]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def has_version_lines(self) -> bool:
        """True if some set declares a Robot-version (then this engine decides paths)."""
        return any(s.version is not None for s in self.sets)

    def select(
        self, agent: str, virtual_agents: Iterable[str] = (), strict: bool = False
    ) -> tuple[Ext20AppliedSets, ...]:
        """The rule sets that apply to a bot, grouped by the token that selected them."""
        key = (agent.lower(), tuple(virtual_agents), strict)
        found = self._selected.get(key)
        if found is None:
            found = self._selected[key] = self._select(agent, key[1], strict)
        return found

    def _select(
        self, agent: str, virtual_agents: tuple[str, ...], strict: bool
    ) -> tuple[Ext20AppliedSets, ...]:
        usable = [s for s in self.sets if s.kind != "ignored"]

        def named(token: str) -> tuple[Ext20RuleSet, ...]:
            low = token.lower()
            return tuple(s for s in usable if low in (a.lower() for a in s.agents))

        own = named(agent) if agent and agent != "*" else ()
        virtual = [
            Ext20AppliedSets("virtual", va, found)
            for va in dict.fromkeys(virtual_agents)
            if (found := named(va))
        ]
        default = tuple(s for s in usable if "*" in s.agents)
        out: list[Ext20AppliedSets] = []
        if own:
            out.append(Ext20AppliedSets("own", agent, own))
        if strict or not own:
            out.extend(virtual)
        if default and (strict or not out):
            out.append(Ext20AppliedSets("default", "*", default))
        return tuple(out)

    def decide(
        self,
        url: str,
        agent: str,
        virtual_agents: Iterable[str] = (),
        *,
        at: datetime | None = None,
        strict: bool = False,
    ) -> Decision:
        """Allowed only if every applicable set allows; ``at`` (UTC) checks Visit-time.

        The same :class:`~geminibot.policy.robots_model.Decision` as the RFC 9309 engine gives:
        one :class:`~geminibot.policy.robots_model.AppliedGroup` per token and set kind (and per
        Visit-time window that refuses), each with its own reason."""
        path = path_of(url)
        mode: Mode = "strict" if strict else "precedence"
        if path == ROBOTS_PATH:
            return Decision(url, path, True, mode, (), None, "/robots.txt is always allowed")
        judged: list[AppliedGroup] = []
        for applied in self.select(agent, virtual_agents, strict):
            judged.extend(_judge(applied, path, at, self._prepared))
        if not judged:
            reason = "no rule set applies: everything allowed"
            return Decision(url, path, True, mode, (), None, reason)
        allowed = all(j.allowed for j in judged)
        first = next((j for j in judged if not j.allowed), judged[0])
        deciding = first if not allowed else next((j for j in judged if j.rule), first)
        return Decision(url, path, allowed, mode, tuple(judged), deciding.rule, first.reason)

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


#: The prepared rules of the sets one token selected, per set kind (built once per file).
_Prepared = dict[tuple[int, ...], "_Rules10 | _Rules20"]


def _judge(
    applied: Ext20AppliedSets, path: str, at: datetime | None, prepared: _Prepared
) -> list[AppliedGroup]:
    """One decision per set kind among the sets a token selected (merged per kind)."""
    out: list[AppliedGroup] = []
    sets = applied.sets
    for kind in ("1.0", "2.0"):
        group = [s for s in sets if s.kind == kind]
        if not group:
            continue
        key = tuple(id(s) for s in group)
        rules = prepared.get(key)
        if rules is None:
            merged = [r for s in group for r in s.rules]
            rules = prepared[key] = _Rules10(merged) if kind == "1.0" else _Rules20.of(merged)
        if isinstance(rules, _Rules10):
            allowed, rule, reason = _decide_10(rules, path)
        else:
            allowed, rule, reason = _decide_20(rules, path)
        lines = tuple(line for s in group for line in s.agent_lines)
        out.append(AppliedGroup(applied.token, applied.role, lines, rule, allowed, reason))
    if at is not None:
        for rule_set in sets:
            for line, window in rule_set.visit_times:
                if not window.contains(at):
                    reason = f"line {line}: Visit-time {window} UTC does not include {at:%H:%M}"
                    refusal = AppliedGroup(
                        applied.token,
                        applied.role,
                        rule_set.agent_lines,
                        None,
                        False,
                        reason,
                        line,
                    )
                    out.insert(0, refusal)
    return out


class _Rules10:
    """A merged 1.0 rule list on the robots.txt engine's matcher (longest match, allow
    wins a tie, the first line reported), mapped back to its rules."""

    __slots__ = ("_by_rule", "_matcher")

    def __init__(self, rules: list[Ext20Rule]) -> None:
        self._by_rule = {(r.line, r.allow, r.pattern): r for r in reversed(rules)}
        self._matcher = matcher_for(Rule(r.line, r.allow, r.pattern) for r in rules)

    def best(self, path: str) -> Ext20Rule | None:
        found = self._matcher.best(_AS_URL + path)
        return self._by_rule[found.line, found.allow, found.pattern] if found else None


def _decide_10(rules: _Rules10, path: str) -> tuple[bool, Ext20Rule | None, str]:
    best = rules.best(path)
    if best is None:
        return True, None, "no rule matches (1.0 set): allowed"
    verdict = "allowed" if best.allow else "disallowed"
    return best.allow, best, f"line {best.line}: {best.text()} (1.0 longest match): {verdict}"


#: Put before a path for the robots.txt engine's matchers, which take a URL: a bare path
#: starting with ``//`` would read as scheme-relative there.
_AS_URL = "robots://h"


class _Tier:
    """The rules of one precedence tier of a 2.0 set, in file order, and the first that
    matches a path without trying each: explicit rules by a dict lookup, ``*``-only globs
    (the hostile kind: thousands fit in 500 KiB) first asked of one RFC 9309 matcher
    (:func:`~geminibot.policy.robots_match.matcher_for`, the robots.txt engine's bounded
    index) whether any of them matches at all; the rest (regexes, RE2 globs) in order."""

    __slots__ = ("_explicit", "_others", "_star", "_stars")

    def __init__(self, rules: Iterable[Ext20Rule]) -> None:
        self._explicit: dict[str, tuple[int, Ext20Rule]] = {}
        self._stars: list[tuple[int, Ext20Rule]] = []
        self._others: list[tuple[int, Ext20Rule]] = []
        for index, rule in enumerate(rules):
            if rule.broken or rule.kind in ("general", "regex"):
                self._others.append((index, rule))
            elif rule.kind == "explicit":
                self._explicit.setdefault(rule.pattern, (index, rule))
            elif rule.star_glob:
                self._stars.append((index, rule))
            else:
                self._others.append((index, rule))
        anchored = (Rule(r.line, False, r.pattern + "$") for _, r in self._stars)
        self._star = matcher_for(anchored) if self._stars else None

    def first(self, path: str) -> Ext20Rule | None:
        """The first rule of the tier (in file order) that matches ``path``."""
        bare = path.partition("?")[0]
        best: tuple[int, Ext20Rule] | None = self._explicit.get(bare)
        for found in self._others:
            if best is not None and found[0] > best[0]:
                break
            if found[1].matches(path):
                best = found
                break
        if self._star is not None and self._star.best(_AS_URL + bare) is not None:
            for found in self._stars:
                if best is not None and found[0] > best[0]:
                    break
                if found[1].matches(path):
                    best = found
                    break
        return best[1] if best is not None else None


@dataclass(frozen=True, slots=True)
class _Rules20:
    """A merged 2.0 rule list split into its precedence tiers (built once per list)."""

    explicit_allows: _Tier
    disallows: _Tier
    pattern_allows: _Tier
    default_denies: _Tier
    first_allow_line: int

    @classmethod
    def of(cls, rules: list[Ext20Rule]) -> _Rules20:
        allows = [r for r in rules if r.allow]
        return cls(
            _Tier(r for r in allows if r.kind == "explicit"),
            _Tier(r for r in rules if not r.allow and not r.default_deny),
            _Tier(r for r in allows if r.kind != "explicit"),
            _Tier(r for r in rules if r.default_deny),
            allows[0].line if allows else 0,
        )


def _decide_20(rules: _Rules20, path: str) -> tuple[bool, Ext20Rule | None, str]:
    if rule := rules.explicit_allows.first(path):
        return True, rule, f"line {rule.line}: {rule.text()} (explicit allow): allowed"
    if rule := rules.disallows.first(path):
        return False, rule, f"line {rule.line}: {rule.text()} (disallow): disallowed"
    if rule := rules.pattern_allows.first(path):
        return True, rule, f"line {rule.line}: {rule.text()} (pattern allow): allowed"
    if rule := rules.default_denies.first(path):
        return False, rule, f"line {rule.line}: {rule.text()} (default deny): disallowed"
    if rules.first_allow_line:
        first = rules.first_allow_line
        return False, None, f"no allow rule of the 2.0 set (from line {first}) matches: disallowed"
    return True, None, "no rule of the 2.0 set matches: allowed"


def parse_ext20(data: bytes | str, rfc9309: RobotsFile | None = None) -> Ext20File:
    """Parse a robots.txt under the version 2.0 reading. Never raises.

    1.0 sets are read exactly as the RFC 9309 engine reads the file: ``rfc9309`` is its
    :func:`parse_robots` of the same ``data`` when the caller has it already."""
    diags: list[Diagnostic] = []
    sets: list[Ext20RuleSet] = []
    builder: _SetBuilder | None = None
    google = rfc9309 if rfc9309 is not None else parse_robots(data)
    # The robots.txt engine reports the size cut; read the same whole lines as it does.
    data, _ = whole_lines_within(data, MAX_ROBOTS_BYTES)
    lines = numbered_lines(data)
    for number, raw in lines:
        read = _read_line(number, raw, diags)
        if read is None:
            continue
        key, name, value = read
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
    groups = {agent.line: group for group in google.groups for agent in group.agents}
    diags.sort(key=lambda d: d.line)
    return Ext20File(tuple(_as_google(s, groups) for s in sets), tuple(diags))


def _read_line(number: int, raw: str, diags: list[Diagnostic]) -> tuple[str, str, str] | None:
    """A line's field (its canonical key), its name as written and its value; None for a
    blank or comment line and for a field 2.0 does not know."""
    text, hash_in_value = strip_comment(raw)
    text = text.strip()
    if not text:
        return None
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
    read = read_field(text)
    key = _FIELD_ALIASES.get(read[0]) if read is not None else None
    if read is None or key is None:
        diags.append(
            Diagnostic(number, "info", "unknown-field", f"unknown line ignored: {text[:60]!r}")
        )
        return None
    _, name, value = read
    return key, name, value


def _as_google(rule_set: Ext20RuleSet, groups: dict[int, Group]) -> Ext20RuleSet:
    """A 1.0 set with the rules Google's parser gives its User-agent lines.

    The two readings can group lines differently (a ``Request-rate`` line ends a set here,
    not a group there; ``#`` inside a value is a comment there): for a 1.0 set, the RFC
    9309 reading decides, whatever else the file holds.
    """
    if rule_set.kind != "1.0":
        return rule_set
    group = groups.get(rule_set.agent_lines[0]) if rule_set.agent_lines else None
    rules = tuple(
        Ext20Rule(rule.line, rule.allow, rule.pattern, "general")
        for rule in (group.rules if group is not None else ())
        if rule.pattern
    )
    return replace(rule_set, rules=rules)


class _SetBuilder:
    """Collects the lines of one rule set while the file is read."""

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
        token = agent_token(value)
        if not token:
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

    def build(self, diags: list[Diagnostic]) -> Ext20RuleSet:
        # Rules are classified once the set's version is known.
        rules = [
            make_rule(line, allow, value, self.kind == "2.0", diags)
            for line, allow, value in self.raw_rules
        ]
        return Ext20RuleSet(
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
