"""What a classified bot must obey on one site: the groups and rules that apply to it in
each mode, what ``*`` gets, the files that apply as a whole (unreachable, unavailable, at
fault), the paths where its answer differs from what ``*`` gets, its waiting time and its
robots2.txt usage answers.

Pure: the site comes in as a :class:`~geminibot.policy.site_policy.SitePolicy` (built from
files or fetches at the edge), the time as a parameter.

The paths examined are derived from the policy files themselves by
:func:`geminibot.policy.candidates.candidate_paths`, the same paths ``compare`` decides:
every rule's pattern made concrete, plus a few variants around it, so that each rule is
exercised on both of its sides. Paths asked for explicitly are added to them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from geminibot.policy.candidates import candidate_paths
from geminibot.policy.compare import size_notes
from geminibot.policy.paths import path_of
from geminibot.policy.robots import RobotsFile
from geminibot.policy.robots2 import DIRECTIVE_VALUES, USAGE_DIRECTIVES
from geminibot.policy.robots_model import Mode, Rule
from geminibot.policy.site_policy import (
    ROBOTS,
    ROBOTS2,
    Bot,
    DelayAnswer,
    Reason,
    SitePolicy,
    UsageAnswer,
)

#: How a path rule's text begins (robots2.txt's are listed with its groups).
_PATH_RULES = ("Allow:", "Disallow:")
#: The token of the baseline bot: no group names it, so it gets exactly the ``*`` group.
BASELINE_TOKEN = ""


@dataclass(frozen=True, slots=True)
class PathVerdict:
    """One path: may the bot fetch it, may a ``*``-only bot, and why."""

    path: str
    #: Every policy file together (robots.txt, robots2.txt path rules and crawl:, agents.txt).
    allowed: bool
    #: robots.txt alone, read by RFC 9309 with the Gemini virtual agents (no dialect: a
    #: ``Robot-version: 2.0`` set or a Visit-time window shows in ``allowed`` only).
    robots_allowed: bool
    #: The same two answers for a bot with no own token, no virtual agent, no category.
    star_allowed: bool
    star_robots_allowed: bool
    reason: str
    explicit: bool = False
    #: The reasons that decided ``allowed`` (the refusing ones, else those with a rule).
    deciding: tuple[Reason, ...] = ()

    @property
    def differs(self) -> bool:
        return self.allowed != self.star_allowed or self.robots_allowed != self.star_robots_allowed

    def as_dict(self) -> dict[str, object]:
        rules = [r.rule_object() for r in self.deciding]
        return {
            "path": self.path,
            "allowed": self.allowed,
            "robots_allowed": self.robots_allowed,
            "star_allowed": self.star_allowed,
            "star_robots_allowed": self.star_robots_allowed,
            "reason": self.reason,
            "rules": [r for r in rules if r is not None],
            "explicit": self.explicit,
        }


@dataclass(frozen=True, slots=True)
class AppliedRules:
    """A group of a policy file that applies to a bot, with its rules as written."""

    #: The file: robots.txt, or robots2.txt for its path rules.
    file: str
    token: str
    role: str
    #: Its User-agent lines.
    lines: tuple[int, ...]
    rules: tuple[Rule, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "file": self.file,
            "token": self.token,
            "role": self.role,
            "lines": list(self.lines),
            "rules": [r.as_dict(self.file, self.token) for r in self.rules],
        }


@dataclass(frozen=True, slots=True)
class ModeReport:
    """The bot's effective policy in one mode."""

    mode: Mode
    #: The groups that apply, of robots.txt and of robots2.txt's path rules.
    groups: tuple[AppliedRules, ...]
    delay: DelayAnswer
    star_delay: DelayAnswer
    verdicts: tuple[PathVerdict, ...]
    #: Rules of other files (robots2.txt ``crawl:``, agents.txt, version 2.0 sets and
    #: Visit-time windows) that refuse paths robots.txt allows, each once.
    beyond: tuple[Reason, ...] = ()

    @property
    def differing(self) -> tuple[PathVerdict, ...]:
        return tuple(v for v in self.verdicts if v.differs)

    def verdict(self, path: str) -> PathVerdict | None:
        key = path_of(path)
        return next((v for v in self.verdicts if v.path == key), None)

    def as_dict(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "groups": [g.as_dict() for g in self.groups],
            "beyond": [r.rule_object() or {"file": r.file, "reason": r.text} for r in self.beyond],
            "delay": self.delay.as_dict(),
            "star_delay": self.star_delay.as_dict(),
            "differing": [v.as_dict() for v in self.differing],
            "explicit": [v.as_dict() for v in self.verdicts if v.explicit],
            "paths_examined": len(self.verdicts),
        }


@dataclass(frozen=True, slots=True)
class UsageReport:
    """One robots2.txt usage directive: the value the bot obeys and where it comes from."""

    answer: UsageAnswer
    #: With several categories whose answers differ: the one whose (most restrictive)
    #: answer this is; None when they agree or there is one category or none.
    category: str | None
    #: Whether the directive answers one of the bot's activities.
    relevant: bool

    def as_dict(self) -> dict[str, object]:
        return {**self.answer.as_dict(), "category": self.category, "relevant": self.relevant}


@dataclass(frozen=True, slots=True)
class SiteReport:
    """What a site's policy files mean for one bot: each mode's answers, the usage rules, the
    mode to use and, for a bot that adapts per activity, each virtual agent's policy."""

    source: str
    agent: str | None
    virtual_agents: tuple[str, ...]
    categories: tuple[str, ...]
    recommended_mode: Mode
    precedence: ModeReport
    strict: ModeReport
    usage: tuple[UsageReport, ...]
    #: True when more paths could be derived than candidates.MAX_CANDIDATE_PATHS.
    truncated: bool
    #: For a bot that adapts per activity: each virtual agent's own policy (recommended mode).
    per_agent: tuple[tuple[str, ModeReport], ...] = ()
    #: The groups a bot with no own token and no virtual agent gets (``*``'s).
    star_groups: tuple[AppliedRules, ...] = ()
    #: Files that apply as a whole, in their own words: an unreachable robots.txt
    #: (everything disallowed), an unavailable one (everything allowed), a faulty agents.txt;
    #: and files cut at their size limit.
    file_states: tuple[str, ...] = ()
    #: For a known bot: the groups it is documented to obey would give it here (its token
    #: and the virtual agents among the registry's ``obeys``, precedence mode); None when
    #: nothing is documented.
    documented: tuple[AppliedRules, ...] | None = None

    def mode(self, mode: Mode) -> ModeReport:
        return self.strict if mode == "strict" else self.precedence

    def as_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "agent": self.agent,
            "virtual_agents": list(self.virtual_agents),
            "categories": list(self.categories),
            "recommended_mode": self.recommended_mode,
            "modes": [self.precedence.as_dict(), self.strict.as_dict()],
            "usage": [u.as_dict() for u in self.usage],
            "truncated": self.truncated,
            "per_agent": [{"virtual_agent": va, **m.as_dict()} for va, m in self.per_agent],
            "star_groups": [g.as_dict() for g in self.star_groups],
            "file_states": list(self.file_states),
            "documented_groups": (
                None if self.documented is None else [g.as_dict() for g in self.documented]
            ),
        }


# -- deciding ----------------------------------------------------------------------------------


def _bots(
    agent: str | None, virtual_agents: tuple[str, ...], categories: tuple[str, ...], strict: bool
) -> tuple[Bot, ...]:
    token = agent or BASELINE_TOKEN
    return tuple(Bot(token, virtual_agents, c, strict) for c in (categories or (None,)))


def _verdict(
    site: SitePolicy, path: str, bots: tuple[Bot, ...], at: datetime
) -> tuple[bool, bool, str, tuple[Reason, ...]]:
    """(all files allow, robots.txt allows, reason, deciding reasons) for every bot
    (category) at once."""
    decisions = [site.may_fetch(path, bot, at) for bot in bots]
    allowed = all(d.allowed for d in decisions)
    bot = bots[0]
    robots_allowed = site.robots is None or site.robots.allowed(
        path, bot.token, bot.virtual_agents, strict=bot.strict
    )
    blocking = next((d for d in decisions if not d.allowed), decisions[0])
    refusing = tuple(r for r in blocking.reasons if not r.allowed)
    deciding = refusing or tuple(r for r in blocking.reasons if r.rule)
    return allowed, robots_allowed, blocking.reason, deciding


def _group_rules(robots: RobotsFile, token: str) -> tuple[Rule, ...]:
    """The rules of every group naming ``token``, merged in file order (Google's rules
    derived from ``index.htm`` lines left out: they are not lines of the file)."""
    rules = [
        rule
        for group in robots.groups
        if any(agent.token == token for agent in group.agents)
        for rule in group.rules
        if rule.derived_from is None
    ]
    return tuple(sorted(rules, key=lambda r: r.line))


def applied_groups(
    site: SitePolicy, agent: str | None, virtual_agents: tuple[str, ...], strict: bool
) -> tuple[AppliedRules, ...]:
    """The groups of robots.txt, then of robots2.txt's path rules, that apply to the bot."""
    files: list[tuple[str, RobotsFile]] = []
    if site.robots is not None and site.robots.blanket is None:
        files.append((ROBOTS, site.robots))
    if site.robots2 is not None:
        files.append((ROBOTS2, site.robots2.links[0].file.robots()))
    return tuple(
        AppliedRules(name, token, role, lines, _group_rules(robots, token))
        for name, robots in files
        for token, role, lines in robots.applicable_groups(
            agent or BASELINE_TOKEN, virtual_agents, strict
        )
    )


def file_states(site: SitePolicy) -> tuple[str, ...]:
    """The files that apply as a whole, each in its own words, and those cut at their size
    limit (their later rules not read)."""
    states = size_notes("", site)
    if site.robots is not None and site.robots.blanket is not None:
        states.append(f"{site.robots.blanket_reason}, for every bot")
    if site.robots2_blocked is not None:
        states.append(f"{site.robots2_blocked}: everything is disallowed, for every bot")
    if site.agents is not None and site.agents.fault is not None:
        where = f" (line {site.agents.fault_line})" if site.agents.fault_line else ""
        states.append(
            f"agents.txt{where}: {site.agents.fault}: the whole site is restricted, for every bot"
        )
    return tuple(states)


def _mode_report(
    site: SitePolicy,
    agent: str | None,
    virtual_agents: tuple[str, ...],
    categories: tuple[str, ...],
    strict: bool,
    paths: tuple[str, ...],
    explicit: frozenset[str],
    at: datetime,
) -> ModeReport:
    bots = _bots(agent, virtual_agents, categories, strict)
    star = _bots(None, (), (), False)
    verdicts = []
    beyond: dict[tuple[str, int, str], Reason] = {}
    for path in paths:
        allowed, robots_allowed, reason, deciding = _verdict(site, path, bots, at)
        star_allowed, star_robots, _, _ = _verdict(site, path, star, at)
        verdicts.append(
            PathVerdict(
                path,
                allowed,
                robots_allowed,
                star_allowed,
                star_robots,
                reason,
                path in explicit,
                deciding,
            )
        )
        if robots_allowed and not allowed:
            for r in deciding:
                if not (r.file == ROBOTS2 and r.rule.startswith(_PATH_RULES)):  # in groups
                    beyond.setdefault((r.file, r.line, r.rule or r.text), r)
    delay = max((site.delay(b, at) for b in bots), key=lambda d: d.seconds)
    return ModeReport(
        "strict" if strict else "precedence",
        applied_groups(site, agent, virtual_agents, strict),
        delay,
        site.delay(star[0], at),
        tuple(verdicts),
        tuple(beyond.values()),
    )


def _restrictiveness(answer: UsageAnswer) -> int:
    values = DIRECTIVE_VALUES.get(answer.directive, ())
    if answer.value is None:
        return -1
    return values.index(answer.value) if answer.value in values else len(values)


def usage_answers(
    site: SitePolicy,
    agent: str | None,
    virtual_agents: tuple[str, ...],
    categories: tuple[str, ...],
    relevant: Iterable[str],
) -> tuple[UsageReport, ...]:
    """Each robots2.txt usage directive for the bot: with several categories, the most
    restrictive of their answers (project decision, docs/classify.md)."""
    wanted = set(relevant)
    per_category = [
        (bot.category, {u.directive: u for u in site.usage(bot)})
        for bot in _bots(agent, virtual_agents, categories, False)
    ]
    out = []
    for directive in USAGE_DIRECTIVES:
        category, answer = max(
            ((c, answers[directive]) for c, answers in per_category),
            key=lambda pair: _restrictiveness(pair[1]),
        )
        agree = len({answers[directive].value for _, answers in per_category}) == 1
        out.append(UsageReport(answer, None if agree else category, directive in wanted))
    return tuple(out)


def effective_policy(
    site: SitePolicy,
    *,
    agent: str | None,
    virtual_agents: Iterable[str],
    categories: Iterable[str] = (),
    relevant_directives: Iterable[str] = (),
    recommended_mode: Mode = "precedence",
    adapts_per_activity: bool = False,
    paths: Iterable[str] = (),
    at: datetime,
    source: str = "",
    documented_virtual_agents: Iterable[str] | None = None,
) -> SiteReport:
    """The effective policy for a bot on ``site`` in both modes, at time ``at`` (UTC).

    A bot that adapts per activity and has several virtual agents also gets, for each of
    them, the policy (in the recommended mode) of the fetches made for that activity alone.
    ``documented_virtual_agents`` (a known bot's, from the registry) adds the groups the bot
    is documented to obey: its own token's and those virtual agents', in precedence mode.
    """
    vas = tuple(virtual_agents)
    cats = tuple(categories)
    derived, truncated = candidate_paths(site)
    explicit = frozenset(path_of(p) for p in paths)
    every = tuple(sorted(set(derived) | explicit))
    reports = [
        _mode_report(site, agent, vas, cats, strict, every, explicit, at)
        for strict in (False, True)
    ]
    return SiteReport(
        source=source,
        agent=agent,
        virtual_agents=vas,
        categories=cats,
        recommended_mode=recommended_mode,
        precedence=reports[0],
        strict=reports[1],
        usage=usage_answers(site, agent, vas, cats, relevant_directives),
        per_agent=tuple(
            (
                va,
                _mode_report(
                    site, agent, (va,), cats, recommended_mode == "strict", every, explicit, at
                ),
            )
            for va in vas
        )
        if adapts_per_activity and len(vas) > 1
        else (),
        truncated=truncated,
        star_groups=applied_groups(site, None, (), False),
        file_states=file_states(site),
        documented=None
        if documented_virtual_agents is None
        else applied_groups(site, agent, tuple(documented_virtual_agents), False),
    )
