"""One answer per host from robots.txt, robots2.txt and agents.txt together.

:class:`SitePolicy` is built from whichever of the three files a host has, and from how
each fetch went (the lead's :func:`~geminibot.policy.outcomes.fetch_outcome` reading of
RFC 9309 for all three). It answers three questions for a :class:`Bot`:

* :meth:`SitePolicy.may_fetch`: the URL must be allowed by every file that speaks about
  it: robots.txt path rules (read by the RFC 9309 engine, or by the version 2.0 engine
  when the file declares a ``Robot-version``) and its ``Visit-time`` windows, robots2.txt
  path rules and its ``crawl`` directive for the bot's category, and agents.txt.
* :meth:`SitePolicy.delay`: the most restrictive of robots.txt ``Crawl-delay``, the
  ``Request-rate`` in force, robots2.txt ``rate`` and agents.txt ``limit=``; with none of
  them, the version 2.0 rule of thumb ``max(2 x last fetch duration, 10 s)``.
* :meth:`SitePolicy.usage`: each robots2.txt usage directive's value for the bot's
  category, with the file and line it came from. On Gemini hosts ``ask`` counts as ``no``.

Time is always a parameter: nothing here reads a clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from geminibot.policy.agents_txt import AgentsFile, parse_agents
from geminibot.policy.ext20 import Ext20File, parse_ext20
from geminibot.policy.outcomes import FetchOutcome, fetch_outcome
from geminibot.policy.paths import path_of
from geminibot.policy.robots import RobotsFile
from geminibot.policy.robots2 import (
    CATEGORIES,
    DIRECTIVE_VALUES,
    USAGE_DIRECTIVES,
    Chain,
    ChainFetch,
    ChainLink,
    Setting,
    parse_robots2,
    rate_seconds,
    resolve_chain,
)
from geminibot.policy.robots2_ask import AskLedger, AskRequest, agent_identity, ask_request
from geminibot.policy.robots_model import VIRTUAL_AGENTS, Decision, rule_from_text, verdict_dict
from geminibot.policy.textlines import numbered_lines
from geminibot.urls import Scheme

#: The floor of the rule of thumb when no file sets a pace (seconds).
RULE_OF_THUMB_FLOOR = 10.0
#: The rule of thumb's multiple of the last fetch's duration.
RULE_OF_THUMB_FACTOR = 2.0
ROBOTS, ROBOTS2, AGENTS = "robots.txt", "robots2.txt", "agents.txt"
#: How far ahead :meth:`SitePolicy.next_allowed` looks (a daily window opens within a day).
VISIT_WINDOW_HORIZON = timedelta(days=1)
#: Most window openings it tries (each one a step to a later opening).
MAX_WINDOW_STEPS = 64


@dataclass(frozen=True, slots=True)
class Bot:
    """Who is asking: product token, Gemini virtual agents, robots2 category, mode."""

    token: str
    virtual_agents: tuple[str, ...] = ()
    category: str | None = None
    strict: bool = False
    version: str = "0"

    def __post_init__(self) -> None:
        unknown = [v for v in self.virtual_agents if v not in VIRTUAL_AGENTS]
        if unknown:
            raise ValueError(
                f"unknown virtual agent {unknown[0]!r}; known: {', '.join(VIRTUAL_AGENTS)}"
            )
        if self.category is not None and self.category not in CATEGORIES:
            raise ValueError(
                f"unknown robots2 category {self.category!r}; known: {', '.join(CATEGORIES)}"
            )

    @property
    def identity(self) -> str:
        """The X-Agent-Identity value: ``token/version (category)``."""
        return agent_identity(self.token, self.version, self.category)


@dataclass(frozen=True, slots=True)
class Reason:
    """What one file said about a URL: file, line (0: the file as a whole), rule, verdict,
    and the group the rule is in (its ``User-agent`` token, or the robots2.txt category of
    a ``crawl:`` line, ``*`` for the global section; "" when the file has no groups)."""

    file: str
    line: int
    rule: str
    allowed: bool
    text: str
    group: str = ""

    def rule_object(self) -> dict[str, object] | None:
        """The rule as the one object of every ``--json`` output (file, line, directive,
        pattern, group; the pattern None for a rule that is not a path rule, such as
        ``crawl: no`` or ``Visit-time``), or None when no rule decided."""
        return rule_from_text(self.file, self.line, self.rule, self.group or None)

    def as_dict(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "rule": self.rule_object(),
            "allowed": self.allowed,
            "reason": self.text,
            "group": self.group,
        }


@dataclass(frozen=True, slots=True)
class FetchDecision:
    """Whether a bot may fetch a URL under every policy file of the site, and why."""

    url: str
    path: str
    allowed: bool
    reasons: tuple[Reason, ...]
    #: Set when the answer hangs on the ask protocol: the request to make first.
    ask: AskRequest | None = None

    @property
    def reason(self) -> str:
        """``FILE: verdict ...`` alike for both verdicts: the first refusing file's reason,
        else every file's (each starts with its verdict, ``allowed: ...``, ``allowed by
        ...``)."""
        for r in self.reasons:
            if not r.allowed:
                return f"{r.file}: {r.text}"
        if not self.reasons:
            return "allowed: no policy file applies"
        return "; ".join(f"{r.file}: {r.text}" for r in self.reasons)

    def as_dict(self) -> dict[str, object]:
        return {
            **verdict_dict(self),
            "reasons": [r.as_dict() for r in self.reasons],
            "ask": self.ask.target if self.ask else None,
        }


@dataclass(frozen=True, slots=True)
class DelayAnswer:
    """Seconds to wait between requests, and which limit set it. ``between_starts``: the
    limit is a rate (requests per time: ``Request-rate``, robots2.txt ``rate``, agents.txt
    ``limit=``), so its seconds count from the start of one request to the start of the
    next; a delay (``Crawl-delay``, the rule of thumb) counts from the end of one."""

    seconds: float
    file: str
    line: int
    rule: str
    between_starts: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "seconds": self.seconds,
            "file": self.file,
            "line": self.line,
            "rule": rule_from_text(self.file, self.line, self.rule, None) if self.file else None,
            "basis": self.rule,
        }


@dataclass(frozen=True, slots=True)
class UsageAnswer:
    """One usage directive for a bot: the value to obey, what the file said, where."""

    directive: str
    value: str | None
    stated: str | None
    file: str
    line: int
    note: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "directive": self.directive,
            "value": self.value,
            "stated": self.stated,
            "file": self.file,
            "line": self.line,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class Fetched:
    """One policy file's fetch: the RFC 9309 outcome and, on success, the body."""

    outcome: FetchOutcome
    body: bytes | str | None = None


@dataclass
class SitePolicy:
    """Everything a site's policy files say, over one protocol: robots.txt (RFC 9309 and
    version 2.0), robots2.txt and its chain, agents.txt; it answers a bot's questions."""

    protocol: Scheme
    robots: RobotsFile | None = None
    ext20: Ext20File | None = None
    robots2: Chain | None = None
    #: Why robots2.txt counts as "restrict everything" (unreachable), else None.
    robots2_blocked: str | None = None
    agents: AgentsFile | None = None

    @classmethod
    def build(
        cls,
        protocol: Scheme,
        robots: Fetched | None = None,
        robots2: Fetched | None = None,
        agents: Fetched | None = None,
        *,
        robots2_url: str = ROBOTS2,
        chain_fetch: ChainFetch | None = None,
    ) -> SitePolicy:
        """From the fetch results of the files (None: not fetched, nothing known)."""
        policy = cls(protocol)
        if robots is not None:
            policy.robots = robots.outcome.policy(robots.body)
            if robots.outcome.kind == "success":
                policy.ext20 = parse_ext20(robots.body or b"", policy.robots)
        if robots2 is not None:
            kind = robots2.outcome.kind
            if kind == "success":
                parsed = parse_robots2(robots2.body or b"")
                if chain_fetch is not None:
                    policy.robots2 = resolve_chain(parsed, robots2_url, chain_fetch)
                else:
                    link = ChainLink(robots2_url, parsed.with_source(robots2_url))
                    policy.robots2 = Chain((link,), "chain not followed")
            elif kind == "unreachable":
                policy.robots2_blocked = f"robots2.txt is unreachable ({robots2.outcome.reason})"
        if agents is not None:
            kind = agents.outcome.kind
            if kind == "success":
                policy.agents = parse_agents(agents.body or b"")
            elif kind == "unreachable":
                policy.agents = AgentsFile.restricted(
                    f"agents.txt is unreachable ({agents.outcome.reason})"
                )
        return policy

    @classmethod
    def from_texts(
        cls,
        protocol: Scheme,
        robots: bytes | str | None = None,
        robots2: bytes | str | None = None,
        agents: bytes | str | None = None,
    ) -> SitePolicy:
        """From file bodies that were fetched successfully (None: the host has no such file)."""
        ok = fetch_outcome(protocol, 20 if protocol == "gemini" else 200)
        return cls.build(
            protocol,
            Fetched(ok, robots) if robots is not None else None,
            Fetched(ok, robots2) if robots2 is not None else None,
            Fetched(ok, agents) if agents is not None else None,
        )

    # -- may I fetch? ----------------------------------------------------------------------

    def may_fetch(
        self, url: str, bot: Bot, at: datetime, asks: AskLedger | None = None
    ) -> FetchDecision:
        """Whether ``bot`` may fetch ``url`` at ``at`` (UTC), with every file's reason."""
        path = path_of(url)
        reasons: list[Reason] = []
        ask: AskRequest | None = None
        reasons.extend(self._robots_reasons(url, bot, at))
        if self.robots2_blocked is not None:
            reasons.append(
                Reason(ROBOTS2, 0, "", False, f"{self.robots2_blocked}: everything is disallowed")
            )
        elif self.robots2 is not None:
            own = self.robots2.links[0].file
            d = own.robots().decide(url, bot.token, bot.virtual_agents, strict=bot.strict)
            if d.rule is not None or not d.allowed:
                line = d.rule.line if d.rule else 0
                rule = f"{d.rule.directive}: {d.rule.pattern}" if d.rule else ""
                reasons.append(Reason(ROBOTS2, line, rule, d.allowed, d.reason, _group_of(d)))
            crawl = self.robots2.setting("crawl", bot.category)
            if crawl is not None and crawl.value != "yes":
                reason, ask = self._crawl_reason(crawl, url, bot, at, asks)
                in_block = bot.category is not None and any(
                    link.file.blocks.get(bot.category, {}).get("crawl") is crawl
                    for link in self.robots2.links
                )
                reasons.append(
                    replace(reason, group=bot.category if in_block and bot.category else "*")
                )
        if self.agents is not None:
            a = self.agents.decide(url)
            if a.directive is not None or not a.allowed:
                line = a.directive.line if a.directive else self.agents.fault_line
                rule = a.directive.text() if a.directive else ""
                reasons.append(Reason(AGENTS, line, rule, a.allowed, a.reason))
        allowed = all(r.allowed for r in reasons)
        return FetchDecision(url, path, allowed, tuple(reasons), ask if not allowed else None)

    def next_allowed(
        self, url: str, bot: Bot, at: datetime, asks: AskLedger | None = None
    ) -> datetime | None:
        """For a URL that robots.txt ``Visit-time`` windows refuse at ``at``: the first
        window opening within :data:`VISIT_WINDOW_HORIZON` at which :meth:`may_fetch`
        allows it. None when no window refuses it now, or when no opening would do."""
        v2 = self.ext20
        if v2 is None:
            return None
        when, end = at, at + VISIT_WINDOW_HORIZON
        for _ in range(MAX_WINDOW_STEPS):
            shut = v2.visit_refusals(bot.token, bot.virtual_agents, bot.strict, when)
            if not shut:
                allowed = when != at and self.may_fetch(url, bot, when, asks).allowed
                return when if allowed else None
            when = max(_next_minute_of_day(when, window.start) for _, window in shut)
            if when > end:
                return None
        return None

    def _robots_reasons(self, url: str, bot: Bot, at: datetime) -> list[Reason]:
        out: list[Reason] = []
        v2 = self.ext20
        if v2 is not None and v2.has_version_lines:
            d2 = v2.decide(url, bot.token, bot.virtual_agents, at=at, strict=bot.strict)
            for g in d2.groups:
                out.append(
                    Reason(
                        ROBOTS,
                        g.deciding_line,
                        g.rule.text() if g.rule else "",
                        g.allowed,
                        f"{g.reason} (User-agent {g.token})",
                        g.token,
                    )
                )
            if not d2.groups:
                out.append(Reason(ROBOTS, 0, "", True, d2.reason))
            return out
        if self.robots is not None:
            d = self.robots.decide(url, bot.token, bot.virtual_agents, strict=bot.strict)
            line = d.rule.line if d.rule else 0
            rule = d.rule.text() if d.rule else ""
            out.append(Reason(ROBOTS, line, rule, d.allowed, d.reason, _group_of(d)))
        if v2 is not None and path_of(url) != "/robots.txt":
            for line, window in v2.visit_refusals(bot.token, bot.virtual_agents, bot.strict, at):
                text = f"Visit-time {window} UTC does not include {at:%H:%M}"
                out.append(Reason(ROBOTS, line, f"Visit-time: {window}", False, text))
        return out

    def _crawl_reason(
        self, crawl: Setting, url: str, bot: Bot, at: datetime, asks: AskLedger | None
    ) -> tuple[Reason, AskRequest | None]:
        where = crawl.source or ROBOTS2
        rule = f"crawl: {crawl.value}"
        if crawl.value == "no":
            return Reason(where, crawl.line, rule, False, "crawl: no for this bot"), None
        if self.protocol == "gemini":
            return Reason(
                where, crawl.line, rule, False, "crawl: ask counts as no on Gemini hosts"
            ), None
        remembered = asks.answer("crawl", url, at) if asks is not None else None
        if remembered is not None:
            return Reason(where, crawl.line, rule, remembered[0], remembered[1]), None
        request = ask_request("crawl", bot.identity)
        text = f"crawl: ask: ask first with HEAD {request.target}"
        return Reason(where, crawl.line, rule, False, text), request

    # -- how long must I wait? -------------------------------------------------------------

    def delay(
        self,
        bot: Bot,
        at: datetime,
        last_duration: float | None = None,
        url: str | None = None,
    ) -> DelayAnswer:
        """Seconds between requests to this host: the most restrictive limit in force."""
        found: list[DelayAnswer] = []
        if self.robots is not None:
            found_delay = self.robots.crawl_delay_rule(
                bot.token, bot.virtual_agents, strict=bot.strict
            )
            if found_delay is not None:
                delay, line = found_delay
                found.append(DelayAnswer(delay, ROBOTS, line, f"Crawl-delay: {delay:g}"))
        if self.ext20 is not None:
            rate = self.ext20.request_interval(bot.token, bot.virtual_agents, bot.strict, at)
            if rate is not None:
                window = f" {rate.window}" if rate.window else ""
                text = f"Request-rate: {rate.documents}/{rate.seconds:g}s{window}"
                found.append(
                    DelayAnswer(rate.interval, ROBOTS, rate.line, text, between_starts=True)
                )
        if self.robots2 is not None:
            setting = self.robots2.setting("rate", bot.category)
            seconds = rate_seconds(setting)
            if setting is not None and seconds is not None:
                found.append(
                    DelayAnswer(
                        seconds,
                        setting.source or ROBOTS2,
                        setting.line,
                        f"rate: {setting.value}",
                        between_starts=True,
                    )
                )
        if self.agents is not None:
            limit = self.agents.limit_interval(url)
            if limit is not None:
                found.append(
                    DelayAnswer(
                        limit[0], AGENTS, limit[1].line, limit[1].text(), between_starts=True
                    )
                )
        if found:  # the longest; of equal ones the first, a Crawl-delay before a rate
            return max(found, key=lambda d: d.seconds)
        thumb = max(RULE_OF_THUMB_FACTOR * (last_duration or 0.0), RULE_OF_THUMB_FLOOR)
        return DelayAnswer(thumb, "", 0, "rule of thumb: max(2 x last fetch duration, 10 s)")

    # -- what may I do with it? ------------------------------------------------------------

    def usage(self, bot: Bot) -> tuple[UsageAnswer, ...]:
        """Each usage directive's value for ``bot`` with its file and line."""
        out: list[UsageAnswer] = []
        for directive in USAGE_DIRECTIVES:
            if self.robots2_blocked is not None:
                strictest = DIRECTIVE_VALUES[directive][-1]
                out.append(
                    UsageAnswer(
                        directive,
                        strictest,
                        None,
                        ROBOTS2,
                        0,
                        f"{self.robots2_blocked}: most restrictive",
                    )
                )
                continue
            setting = self.robots2.setting(directive, bot.category) if self.robots2 else None
            if setting is None:
                note = "no robots2.txt" if self.robots2 is None else "not stated"
                out.append(UsageAnswer(directive, None, None, "", 0, note))
                continue
            value, note = setting.value, ""
            if value == "ask" and self.protocol == "gemini":
                value, note = "no", "ask counts as no on Gemini hosts"
            elif value == "ask":
                note = f"ask first: HEAD {ask_request(directive, bot.identity).target}"
            if bot.category is not None and self.robots2 is not None:
                for link in self.robots2.links:
                    if link.file.blocks.get(bot.category, {}).get(directive) is setting:
                        note = (note + "; " if note else "") + f"from [agent: {bot.category}]"
                        break
            out.append(
                UsageAnswer(
                    directive, value, setting.stated, setting.source or ROBOTS2, setting.line, note
                )
            )
        return tuple(out)

    def usage_map(self, bot: Bot) -> Mapping[str, str | None]:
        return {u.directive: u.value for u in self.usage(bot)}


Dialect = Literal["robots", "robots2", "agents"]
DIALECT_FILES: dict[Dialect, str] = {"robots": ROBOTS, "robots2": ROBOTS2, "agents": AGENTS}
_AGENTS_HASH_LINE = re.compile(r"\*[0-9a-fA-F]{64}\s*")
_ROBOTS2_LINE = re.compile(
    r"\s*(\[\s*agent\s*:|(crawl|read|summari[sz]e|quote|derivative|train|store|compete|"
    r"personali[sz]e|moneti[sz]e|attribution|link-back|rate|announce|honest|report-to|chain)\s*:)",
    re.IGNORECASE,
)


_ROBOTS_LINE = re.compile(r"\s*(user-?agent|allow|disallow|sitemap|crawl-delay)\s*:", re.IGNORECASE)


def _group_of(decision: Decision) -> str:
    """The token of the group whose rule decided, else of the group that decided."""
    if decision.rule_group is not None:
        return decision.rule_group
    deciding = decision.deciding
    return deciding.token if deciding is not None else ""


def looks_like_policy(data: bytes | str) -> bool:
    """Whether ``data`` reads as a policy file of some dialect by its content: a robots.txt
    field line, a robots2.txt directive or block, or an agents.txt hash line."""
    lines = [t for _, t in numbered_lines(data)]
    content = [t for t in lines if t.strip() and not t.startswith("#")]
    if content and _AGENTS_HASH_LINE.fullmatch(content[0]):
        return True
    return any(_ROBOTS_LINE.match(t) or _ROBOTS2_LINE.match(t) for t in content)


def detect_dialect(name: str, data: bytes | str) -> Dialect:
    """Which policy dialect a file is: by its name first, else by its content."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1].lower()
    if "robots2" in base:
        return "robots2"
    if "agents" in base:
        return "agents"
    if "robots" in base:
        return "robots"
    lines = [t for _, t in numbered_lines(data)]
    content = [t for t in lines if t.strip() and not t.startswith("#")]
    if content and _AGENTS_HASH_LINE.fullmatch(content[0]):
        return "agents"
    if any(_ROBOTS2_LINE.match(t) for t in content):
        return "robots2"
    return "robots"


def _next_minute_of_day(after: datetime, minute: int) -> datetime:
    """The first time later than ``after`` at minute ``minute`` of a (UTC) day."""
    day = after.replace(hour=0, minute=0, second=0, microsecond=0)
    at = day + timedelta(minutes=minute)
    return at if at > after else at + timedelta(days=1)
