"""The patterns of robots "version 2.0" rules: each Allow or Disallow value classified
(general, explicit, shell glob, ``~`` regular expression) and compiled into an
:class:`Ext20Rule` that matches paths in time linear in the path: RE2 for regexes and for
globs with ``?`` or ``[...]``, the RFC 9309 matcher for the rest. What the value reads
otherwise than a reader may expect is noted as diagnostics; a pattern that does not
compile never allows and always disallows."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

import re2

from geminibot.policy.diagnostics import Diagnostic
from geminibot.policy.robots_match import match_length
from geminibot.policy.robots_model import ROBOTS_FILE, rule_dict
from geminibot.policy.textlines import pattern_text
from geminibot.urls import normalise_escapes


class RegexLike(Protocol):
    """What a compiled rule pattern offers (RE2, for regexes and for globs with ``?`` or
    ``[...]``)."""

    def fullmatch(self, string: str) -> object | None: ...

    def search(self, string: str) -> object | None: ...


#: Regex rules run on RE2: linear time in the path whatever the pattern (Python's
#: backtracking ``re`` can be made to run for hours by a ten-character pattern).
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
#: Globs: ``*``, ``?`` and ``[...]`` match any character, a newline too.
_GLOB_OPTIONS = re2.Options()
_GLOB_OPTIONS.log_errors = False
_GLOB_OPTIONS.dot_nl = True


def _re2_message(exc: Exception) -> str:
    text = exc.args[0] if exc.args else str(exc)
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)


REGEX_PREFIX = "~"
#: Longest regular expression accepted in a rule; longer ones are an error (and ignored
#: for an allow, match-everything for a disallow).
MAX_REGEX_LENGTH = 256
#: Longest shell glob accepted in a rule (characters after percent-encoding normalisation);
#: longer ones are an error, treated as an over-long regex is. A glob of ``*`` and literal
#: text is matched as the RFC 9309 matcher matches (``str.find``, left-most segments: linear
#: in the path); one with ``?`` or ``[...]`` runs on RE2 (linear in the path too).
MAX_GLOB_LENGTH = 1024

MatchKind = Literal["general", "explicit", "glob", "regex"]

_GLOB_CHARS = frozenset("*?[")
_REGEX_HINTS = re.compile(r"\.\*|\.\+|\\[dws.]|[\^()|+{}]")
_MATCH_ALL_PATTERNS = frozenset({"*", "/*", "**"})
_MATCH_ALL_REGEXES = frozenset({"", ".*", "^.*", "^/", "^/.*", "/", ".*$", "^.*$"})


def rfc_match_length(pattern: str, path: str) -> int:
    """Octet length of ``pattern`` if it matches ``path`` under RFC 9309, else -1."""
    return match_length(pattern, path)


class PatternRule(Protocol):
    """A rule :func:`longest_match` can rank: whether it allows, and its pattern."""

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
class Ext20Rule:
    """One Allow or Disallow rule: its pattern, how the pattern matches (its kind) and its
    compiled form."""

    line: int
    allow: bool
    pattern: str
    kind: MatchKind
    default_deny: bool = False
    _regex: RegexLike | None = field(default=None, compare=False, repr=False)
    _broken: bool = False
    #: What the pattern is matched against: the path with its query (1.0 rules, and 2.0
    #: patterns that mention ``?``), else the path alone, so that a query string cannot
    #: slip past a 2.0 rule (``Disallow: *.cgi`` refuses ``/order.cgi?item=1``).
    with_query: bool = True

    def matches(self, path: str) -> bool:
        if self._broken:
            return not self.allow
        if self.kind == "general":
            return rfc_match_length(self.pattern, path) >= 0
        if not self.with_query:
            path = path.partition("?")[0]
        if self.kind == "explicit":
            return path == self.pattern
        if self._regex is None:  # a glob of '*' and literal text: the RFC matcher, anchored
            return rfc_match_length(self.pattern + "$", path) >= 0
        if self.kind == "glob":
            return self._regex.fullmatch(path) is not None
        return self._regex.search(path) is not None

    @property
    def broken(self) -> bool:
        """Whether the pattern did not compile: it then never allows and always disallows."""
        return self._broken

    @property
    def star_glob(self) -> bool:
        """A glob of ``*`` and literal text only: the RFC 9309 matcher matches it, anchored."""
        return self.kind == "glob" and not self._broken and self._regex is None

    @property
    def directive(self) -> str:
        return "Allow" if self.allow else "Disallow"

    def text(self) -> str:
        shown = f"{REGEX_PREFIX} {self.pattern}" if self.kind == "regex" else self.pattern
        return f"{self.directive}: {shown}"

    def describe(self) -> str:
        return f"'{self.text()}' (line {self.line}, {self.kind})"

    def as_dict(self, file: str = ROBOTS_FILE, group: str | None = None) -> dict[str, object]:
        """The rule's one JSON shape (:func:`~geminibot.policy.robots_model.rule_dict`);
        a regex's pattern keeps its ``~ `` prefix, as in the file."""
        shown = f"{REGEX_PREFIX} {self.pattern}" if self.kind == "regex" else self.pattern
        return rule_dict(file, self.line, self.directive, shown, group)


def make_rule(
    line: int, allow: bool, value: str, v2: bool, diags: list[Diagnostic]
) -> Ext20Rule | None:
    """Classify and compile one Allow/Disallow value (None for an empty value)."""
    if not value:
        return None
    if not v2:
        return Ext20Rule(line, allow, pattern_text(value), "general")
    if value.startswith(REGEX_PREFIX):
        return _regex_rule(line, allow, value, diags)
    return _glob_rule(line, allow, value, diags)


def _regex_rule(line: int, allow: bool, value: str, diags: list[Diagnostic]) -> Ext20Rule:
    """A ``regex:`` value compiled by RE2; a bad one never allows and always disallows."""
    with_query = "?" in value
    source = value[len(REGEX_PREFIX) :].strip()
    problem = None
    compiled: RegexLike | None = None
    if len(source) > MAX_REGEX_LENGTH:
        problem = f"regular expression longer than {MAX_REGEX_LENGTH} characters"
    else:
        _note_class_non_ascii(line, source, diags)
        try:
            compiled = re2.compile(_regex_for_paths(source), options=_RE2_OPTIONS)
        except re2.error as exc:
            problem = f"not a regular expression RE2 accepts: {_re2_message(exc)}"
        except UnicodeEncodeError:  # bytes that are not UTF-8, kept as surrogates
            problem = "regular expression is not valid UTF-8"
    if problem is not None:
        effect = "never matches" if allow else "matches every path"
        diags.append(Diagnostic(line, "error", "bad-regex", f"{problem}; this rule {effect}"))
        return Ext20Rule(line, allow, source, "regex", False, None, True)
    default_deny = (not allow) and source in _MATCH_ALL_REGEXES
    return Ext20Rule(line, allow, source, "regex", default_deny, compiled, False, with_query)


#: The characters of a 2.0 glob that are syntax, not path characters to escape.
GLOB_SYNTAX = "[]^\\"


def _glob_rule(line: int, allow: bool, value: str, diags: list[Diagnostic]) -> Ext20Rule:
    """A shell glob (an explicit path if it has no glob characters)."""
    with_query = "?" in value
    # A literal '#' can only appear in a URL path escaped, as %23.
    pattern = pattern_text(value, GLOB_SYNTAX)
    _note_glob_ambiguities(line, value, diags)
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
        return Ext20Rule(line, allow, pattern, "explicit", with_query=with_query)
    default_deny = (not allow) and pattern in _MATCH_ALL_PATTERNS
    if len(pattern) > MAX_GLOB_LENGTH:
        effect = "never matches" if allow else "matches every path"
        diags.append(
            Diagnostic(
                line,
                "error",
                "bad-glob",
                f"shell glob longer than {MAX_GLOB_LENGTH} characters; this rule {effect}",
            )
        )
        return Ext20Rule(line, allow, pattern, "glob", False, None, True)
    if "?" not in pattern and "[" not in pattern:
        return Ext20Rule(line, allow, pattern, "glob", default_deny, with_query=with_query)
    try:
        compiled_glob = re2.compile(_glob_expression(pattern), options=_GLOB_OPTIONS)
    except re2.error as exc:
        effect = "never matches" if allow else "matches every path"
        message = f"not a shell glob: {_re2_message(exc)}; this rule {effect}"
        diags.append(Diagnostic(line, "error", "bad-glob", message))
        return Ext20Rule(line, allow, pattern, "glob", False, None, True)
    return Ext20Rule(line, allow, pattern, "glob", default_deny, compiled_glob, False, with_query)


def _note_glob_ambiguities(line: int, value: str, diags: list[Diagnostic]) -> None:
    """What a 2.0 glob reads otherwise than a reader may expect: regex-like characters,
    a final '$', a '?'."""
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


def _glob_expression(glob: str) -> str:
    """A shell glob as an RE2 expression for a whole-string match: ``*`` any run, ``?`` any
    one character, ``[...]``/``[!...]`` a class (``]`` first is literal), an unclosed
    ``[`` a literal ``[``; everything else literal."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        ch = glob[i]
        i += 1
        if ch == "*":
            if not out or out[-1] != ".*":
                out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            j = i + (glob[i : i + 1] == "!")
            j += glob[j : j + 1] == "]"
            end = glob.find("]", j)
            if end == -1:
                out.append(re.escape(ch))
                continue
            body = glob[i:end]
            i = end + 1
            negate = body.startswith("!")
            body = body[1:] if negate else body
            escaped = "".join("\\" + c if c in "\\^[]" else c for c in body)
            out.append(f"[{'^' if negate else ''}{escaped}]")
        else:
            out.append(re.escape(ch))
    return "".join(out)


_HEX_ESCAPE = re.compile(r"%[0-9a-f]{2}", re.IGNORECASE)


def _path_escape(match: re.Match[str]) -> str:
    """One ``%xx`` of a regex as paths read it: an unreserved character decoded (and
    escaped for the regex), else upper-case hex digits."""
    decoded = normalise_escapes(match.group(0))
    return re.escape(decoded) if len(decoded) == 1 else decoded


def _regex_for_paths(source: str) -> str:
    """A regex as it must read to match normalised paths: each non-ASCII character as its
    UTF-8 percent-encoding (in a group, so a quantifier after it still applies to the whole
    character), ``%xx`` escapes as the paths have them (an unreserved character decoded,
    others with upper-case hex digits)."""
    source = _HEX_ESCAPE.sub(_path_escape, source)
    if source.isascii():
        return source
    return "".join(
        ch
        if ch.isascii()
        else "(?:" + "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")) + ")"
        for ch in source
    )


def _note_class_non_ascii(line: int, source: str, diags: list[Diagnostic]) -> None:
    """Warn about a non-ASCII character inside ``[...]``: paths are percent-encoded, so a
    class can only match one octet escape character by character."""
    depth = 0
    for ch in source:
        if ch == "[":
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
        elif depth and not ch.isascii():
            diags.append(
                Diagnostic(
                    line,
                    "warning",
                    "non-ascii-class",
                    f"{ch!r} inside [...] cannot match: paths are percent-encoded UTF-8; "
                    "write alternatives instead, e.g. (?:é|è)",
                )
            )
            return
