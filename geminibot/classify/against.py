"""What a classified bot must obey on one site: both modes, the paths where it differs from
what ``*`` gets, its waiting time and its robots2.txt usage answers.

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
from geminibot.policy.paths import path_of
from geminibot.policy.robots2 import DIRECTIVE_VALUES, USAGE_DIRECTIVES
from geminibot.policy.robots_model import Mode
from geminibot.policy.site_policy import Bot, DelayAnswer, SitePolicy, UsageAnswer

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

    @property
    def differs(self) -> bool:
        return self.allowed != self.star_allowed or self.robots_allowed != self.star_robots_allowed

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "allowed": self.allowed,
            "robots_allowed": self.robots_allowed,
            "star_allowed": self.star_allowed,
            "star_robots_allowed": self.star_robots_allowed,
            "reason": self.reason,
            "explicit": self.explicit,
        }


@dataclass(frozen=True, slots=True)
class ModeReport:
    """The bot's effective policy in one mode."""

    mode: Mode
    #: robots.txt groups that apply: (token, role, User-agent lines).
    groups: tuple[tuple[str, str, tuple[int, ...]], ...]
    delay: DelayAnswer
    star_delay: DelayAnswer
    verdicts: tuple[PathVerdict, ...]

    @property
    def differing(self) -> tuple[PathVerdict, ...]:
        return tuple(v for v in self.verdicts if v.differs)

    def verdict(self, path: str) -> PathVerdict | None:
        key = path_of(path)
        return next((v for v in self.verdicts if v.path == key), None)

    def as_dict(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "groups": [
                {"token": t, "role": r, "lines": list(lines)} for t, r, lines in self.groups
            ],
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
        }


# -- deciding ----------------------------------------------------------------------------------


def _bots(
    agent: str | None, virtual_agents: tuple[str, ...], categories: tuple[str, ...], strict: bool
) -> tuple[Bot, ...]:
    token = agent or BASELINE_TOKEN
    return tuple(Bot(token, virtual_agents, c, strict) for c in (categories or (None,)))


def _verdict(
    site: SitePolicy, path: str, bots: tuple[Bot, ...], at: datetime
) -> tuple[bool, bool, str]:
    """(all files allow, robots.txt allows, reason) for every bot (category) at once."""
    decisions = [site.may_fetch(path, bot, at) for bot in bots]
    allowed = all(d.allowed for d in decisions)
    bot = bots[0]
    robots_allowed = site.robots is None or site.robots.allowed(
        path, bot.token, bot.virtual_agents, bot.strict
    )
    blocking = next((d for d in decisions if not d.allowed), decisions[0])
    return allowed, robots_allowed, blocking.reason


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
    for path in paths:
        allowed, robots_allowed, reason = _verdict(site, path, bots, at)
        star_allowed, star_robots, _ = _verdict(site, path, star, at)
        verdicts.append(
            PathVerdict(
                path, allowed, robots_allowed, star_allowed, star_robots, reason, path in explicit
            )
        )
    groups = (
        site.robots.applicable_groups(agent or BASELINE_TOKEN, virtual_agents, strict)
        if site.robots is not None
        else ()
    )
    delay = max((site.delay(b, at) for b in bots), key=lambda d: d.seconds)
    return ModeReport(
        "strict" if strict else "precedence",
        groups,
        delay,
        site.delay(star[0], at),
        tuple(verdicts),
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
) -> SiteReport:
    """The effective policy for a bot on ``site`` in both modes, at time ``at`` (UTC).

    A bot that adapts per activity and has several virtual agents also gets, for each of
    them, the policy (in the recommended mode) of the fetches made for that activity alone.
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
    )
