"""The robots.txt model: rules, groups and the decision about a URL, shared by the
RFC 9309 engine (:mod:`geminibot.policy.robots`) and the version 2.0 engine
(:mod:`geminibot.policy.ext20`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

#: The Gemini virtual user agents (gemini-robots-virtual-agents.txt).
VIRTUAL_AGENTS: tuple[str, ...] = ("archiver", "indexer", "researcher", "webproxy")
#: The path that is always allowed (RFC 9309 section 2.2.2).
ROBOTS_PATH = "/robots.txt"

Mode = Literal["precedence", "strict"]
Role = Literal["own", "virtual", "default"]
#: The file a robots.txt rule comes from, as every ``--json`` output names it.
ROBOTS_FILE = "robots.txt"


def rule_dict(
    file: str, line: int, directive: str, pattern: str | None, group: str | None
) -> dict[str, object]:
    """A policy rule as every command's ``--json`` shows it: one object with these five
    keys, whatever the file. ``file`` is the policy file's well-known name (robots.txt,
    robots2.txt, agents.txt), ``directive`` the field in canonical case (``Disallow``,
    ``Visit-time``, ``crawl``...), ``pattern`` a path rule's pattern, percent-encoding
    normalised (None for a rule that is not a path rule: ``crawl: no``, ``Visit-time``,
    ``rate``), ``group`` the token of the group it sits in (``*`` for the global group, a
    robots2.txt category for an ``[agent: ...]`` block; None for a file without groups)."""
    return {"file": file, "line": line, "directive": directive, "pattern": pattern, "group": group}


def rule_from_text(
    file: str, line: int, text: str, group: str | None = None
) -> dict[str, object] | None:
    """A rule as it reads (``Disallow: /x``, ``crawl: no``, agents.txt's ``/x DISALLOW
    limit=5``) in its one JSON shape (:func:`rule_dict`); None for "" (no rule)."""
    if not text:
        return None
    if file == "agents.txt":  # "PATH ALLOW|DISALLOW [params]"
        path, _, rest = text.partition(" ")
        return rule_dict(
            file, line, "Allow" if rest.startswith("ALLOW") else "Disallow", path, group
        )
    directive, _, value = text.partition(": ")
    if directive in ("Allow", "Disallow"):
        return rule_dict(file, line, directive, value, group)
    return rule_dict(file, line, directive, None, group)


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

    def as_dict(self, file: str = ROBOTS_FILE, group: str | None = None) -> dict[str, object]:
        """The rule's one JSON shape (:func:`rule_dict`)."""
        return rule_dict(file, self.line, self.directive, self.pattern, group)


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

    def as_dict(self, file: str = ROBOTS_FILE, group: str | None = None) -> dict[str, object]:
        """The rule's one JSON shape (:func:`rule_dict`)."""
        ...


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
            "rule": self.rule.as_dict(group=self.token) if self.rule else None,
            **({"reason": self.reason} if self.reason else {}),
        }


class Verdict(Protocol):
    """What every decision about a URL states: the URL, its path, the verdict and why."""

    @property
    def url(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def allowed(self) -> bool: ...
    @property
    def reason(self) -> str: ...


def verdict_dict(verdict: Verdict) -> dict[str, object]:
    """The keys every decision's JSON starts with."""
    return {
        "url": verdict.url,
        "path": verdict.path,
        "allowed": verdict.allowed,
        "reason": verdict.reason,
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
            **verdict_dict(self),
            "rule": self._rule_dict(),
            "mode": self.mode,
            "groups": [g.as_dict() for g in self.groups],
        }

    def _rule_dict(self) -> dict[str, object] | None:
        return None if self.rule is None else self.rule.as_dict(group=self.rule_group)

    @property
    def rule_group(self) -> str | None:
        """The token of the group the deciding rule sits in (None without a rule)."""
        return next((g.token for g in self.groups if g.rule is self.rule), None)

    @property
    def deciding(self) -> AppliedGroup | None:
        """The first group that refused, else the first group that applied."""
        refusing = next((g for g in self.groups if not g.allowed), None)
        return refusing or (self.groups[0] if self.groups else None)
