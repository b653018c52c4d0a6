"""Where a host's web policy and its Gemini policy disagree, for each class of bot (pure).

:func:`compare` takes two :class:`~geminibot.policy.site_policy.SitePolicy` objects (the
web side read with ``protocol="http"``, the Gemini side with ``"gemini"``) and a list of
:class:`BotClass`, and reports for each class:

* paths one side allows and the other forbids. The candidates come from the rules
  themselves (:func:`~geminibot.policy.candidates.candidate_paths`, which ``classify
  --against`` decides too): every path pattern of every file on both sides becomes a few
  concrete paths: the ``*`` filled with each of ``FILLERS``, a ``$`` honoured (the exact path, and one
  character past it), and boundary variants (one character short, one longer, a
  sub-path, the parent directory). Every candidate is decided by both sides with
  :meth:`SitePolicy.may_fetch`; the disagreeing ones are grouped by the rules that
  decided them on each side, and each group is one disagreement, shown by its shortest
  path;
* the waiting time between requests (:meth:`SitePolicy.delay`), when it differs;
* the robots2.txt usage answers (:meth:`SitePolicy.usage`) that differ. ``ask`` is
  compared as written: on Gemini it counts as ``no`` for the bot (the project's reading),
  but a file that says ``ask`` on both sides says the same thing.

Time is a parameter (``Visit-time`` windows and timed ``Request-rate`` lines depend on it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from geminibot.policy.candidates import candidate_paths
from geminibot.policy.robots import RobotsFile
from geminibot.policy.robots_model import VIRTUAL_AGENTS
from geminibot.policy.site_policy import Bot, DelayAnswer, FetchDecision, SitePolicy, UsageAnswer

#: The token of the ``*`` class: a bot no group names (a suffix is added if a file names it).
ANONYMOUS_TOKEN = "anybot"


@dataclass(frozen=True)
class BotClass:
    """A class of bot to compare for: its name in the report and the bot that stands for it."""

    name: str
    bot: Bot

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "token": self.bot.token,
            "virtual_agents": list(self.bot.virtual_agents),
            "category": self.bot.category,
            "strict": self.bot.strict,
        }


def _robots_files(policy: SitePolicy) -> list[RobotsFile]:
    files = [policy.robots] if policy.robots is not None else []
    if policy.robots2 is not None:
        files.extend(link.file.robots() for link in policy.robots2.links)
    return files


def _tokens(policy: SitePolicy) -> set[str]:
    found: set[str] = set()
    for robots in _robots_files(policy):
        found |= robots.tokens
    if policy.ext20 is not None:
        found |= {a.lower() for s in policy.ext20.sets for a in s.agents}
    return found


def bot_classes(
    policies: Iterable[SitePolicy],
    agents: Sequence[tuple[str, tuple[str, ...]]] = (),
    *,
    category: str | None = None,
    strict: bool = False,
) -> tuple[BotClass, ...]:
    """Each Gemini virtual agent (a bot known only by it), ``*`` (a bot no group names),
    then each ``(token, virtual agents)`` given."""
    named: set[str] = set()
    for policy in policies:
        named |= _tokens(policy)
    anonymous = ANONYMOUS_TOKEN
    n = 1
    while anonymous in named:
        n += 1
        anonymous = f"{ANONYMOUS_TOKEN}{n}"
    out = [BotClass(va, Bot(va, (va,), category, strict)) for va in VIRTUAL_AGENTS]
    out.append(BotClass("*", Bot(anonymous, (), category, strict)))
    for token, vas in agents:
        name = token + (f":{','.join(vas)}" if vas else "")
        out.append(BotClass(name, Bot(token, vas, category, strict)))
    return tuple(out)


# --- the comparison ---------------------------------------------------------------------


def _why(decision: FetchDecision) -> tuple[tuple[str, int, str], ...]:
    """The rules that decided: the refusing ones, else the ones that allowed explicitly."""
    refusing = [r for r in decision.reasons if not r.allowed]
    chosen = refusing if refusing else [r for r in decision.reasons if r.rule]
    return tuple((r.file, r.line, r.rule) for r in chosen)


@dataclass(frozen=True)
class PathDifference:
    """A disagreement: an example path, each side's verdict and reason, and how many
    candidate paths fell in the same group."""

    path: str
    web_allowed: bool
    gemini_allowed: bool
    web_reason: str
    gemini_reason: str
    candidates: int

    def describe(self) -> str:
        allows, forbids = ("web", "Gemini") if self.web_allowed else ("Gemini", "web")
        return f"{self.path}: {allows} allows, {forbids} forbids"

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "web_allowed": self.web_allowed,
            "gemini_allowed": self.gemini_allowed,
            "web_reason": self.web_reason,
            "gemini_reason": self.gemini_reason,
            "candidates": self.candidates,
        }


@dataclass(frozen=True)
class UsageDifference:
    """One usage directive answered over the web and over Gemini."""

    directive: str
    web: UsageAnswer
    gemini: UsageAnswer

    def as_dict(self) -> dict[str, object]:
        return {
            "directive": self.directive,
            "web": self.web.as_dict(),
            "gemini": self.gemini.as_dict(),
        }


@dataclass(frozen=True)
class ClassComparison:
    """One class of bot: where the web's and Gemini's policies differ on paths, wait and usage."""

    bot_class: BotClass
    paths: tuple[PathDifference, ...]
    web_wait: DelayAnswer
    gemini_wait: DelayAnswer
    usage: tuple[UsageDifference, ...]

    @property
    def wait_differs(self) -> bool:
        return abs(self.web_wait.seconds - self.gemini_wait.seconds) > 1e-9

    @property
    def agree(self) -> bool:
        return not self.paths and not self.wait_differs and not self.usage

    def differences(self) -> list[str]:
        """Short names of what differs: "2 paths", "wait", "1 usage"."""
        out = []
        if self.paths:
            out.append(f"{len(self.paths)} path{'s' if len(self.paths) != 1 else ''}")
        if self.wait_differs:
            out.append("wait")
        if self.usage:
            out.append(f"{len(self.usage)} usage")
        return out

    def as_dict(self) -> dict[str, object]:
        return {
            "class": self.bot_class.as_dict(),
            "agree": self.agree,
            "paths": [p.as_dict() for p in self.paths],
            "wait": {
                "differs": self.wait_differs,
                "web": self.web_wait.as_dict(),
                "gemini": self.gemini_wait.as_dict(),
            },
            "usage": [u.as_dict() for u in self.usage],
        }


@dataclass(frozen=True)
class Comparison:
    """A site's policies over both protocols compared for every class of bot."""

    classes: tuple[ClassComparison, ...]
    candidates: int
    at: datetime
    notes: tuple[str, ...] = field(default=())

    @property
    def agree(self) -> bool:
        return all(c.agree for c in self.classes)

    def summary(self) -> str:
        n = len(self.classes)
        differing = [c for c in self.classes if not c.agree]
        if not differing:
            return f"summary: the web and Gemini policies agree for all {n} bot classes ({self.candidates} paths decided)"
        parts = "; ".join(f"{c.bot_class.name} ({', '.join(c.differences())})" for c in differing)
        return f"summary: the policies differ for {len(differing)} of {n} bot classes: {parts}"

    def as_dict(self) -> dict[str, object]:
        return {
            "agree": self.agree,
            "at": self.at.isoformat(),
            "candidates": self.candidates,
            "classes": [c.as_dict() for c in self.classes],
            "summary": self.summary(),
            "notes": list(self.notes),
        }


def _declared(answer: UsageAnswer) -> str | None:
    """The value as the file states it (Gemini's ask-counts-as-no undone)."""
    if answer.note.startswith("ask counts as no"):
        return "ask"
    return answer.value


def compare_class(
    web: SitePolicy, gemini: SitePolicy, bot_class: BotClass, paths: Sequence[str], at: datetime
) -> ClassComparison:
    bot = bot_class.bot
    groups: dict[tuple[object, ...], list[tuple[str, FetchDecision, FetchDecision]]] = {}
    for path in paths:
        w = web.may_fetch(path, bot, at)
        g = gemini.may_fetch(path, bot, at)
        if w.allowed != g.allowed:
            groups.setdefault((w.allowed, _why(w), _why(g)), []).append((path, w, g))
    diffs = []
    for members in groups.values():
        path, w, g = min(members, key=lambda m: (len(m[0]), m[0]))
        diffs.append(PathDifference(path, w.allowed, g.allowed, w.reason, g.reason, len(members)))
    diffs.sort(key=lambda d: (len(d.path), d.path))
    usage = tuple(
        UsageDifference(wu.directive, wu, gu)
        for wu, gu in zip(web.usage(bot), gemini.usage(bot), strict=True)
        if _declared(wu) != _declared(gu)
    )
    return ClassComparison(
        bot_class, tuple(diffs), web.delay(bot, at), gemini.delay(bot, at), usage
    )


def compare(
    web: SitePolicy, gemini: SitePolicy, classes: Sequence[BotClass], at: datetime
) -> Comparison:
    """Compare the two sides for every class (see the module docstring)."""
    paths, _ = candidate_paths(web, gemini)
    return Comparison(
        tuple(compare_class(web, gemini, c, paths, at) for c in classes), len(paths), at
    )
