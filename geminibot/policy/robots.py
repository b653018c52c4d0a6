"""A parsed robots.txt (:class:`RobotsFile`) and its decisions: which groups apply to a
bot and its Gemini virtual user agents (precedence or strict mode), the rule that
decides a URL and why, and the Crawl-delay. :func:`geminibot.policy.robots_parse.parse_robots`
builds it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from geminibot.policy.diagnostics import Diagnostic
from geminibot.policy.paths import path_of
from geminibot.policy.robots_match import Matcher, matcher_for
from geminibot.policy.robots_model import (
    ROBOTS_PATH,
    VIRTUAL_AGENTS,
    AppliedGroup,
    Decision,
    Group,
    Mode,
    Role,
)


@dataclass(frozen=True, slots=True)
class _PlanEntry:
    """One token's merged groups, as a bot's plan applies them."""

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
        *,
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
        *,
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
        names = list(dict.fromkeys([agent.lower(), *(v.lower() for v in vas)]))
        named = names[0] if len(names) == 1 else f"any of {', '.join(names)}"
        return f"allowed: no group names {named} or '*', so nothing is disallowed"
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
