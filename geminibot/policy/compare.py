"""Where a host's web policy and its Gemini policy disagree, for each class of bot (pure).

:func:`compare` takes two :class:`~geminibot.policy.site_policy.SitePolicy` objects (the
web side read with ``protocol="http"``, the Gemini side with ``"gemini"``) and a list of
:class:`BotClass`. It decides, for each class:

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

and reports each *difference* once (:attr:`Comparison.differences`), with the bot classes
it affects: a pair of deciding rules is one difference however many classes it touches
(``Disallow: /youtube`` in the archiver, indexer and researcher groups is one), as is a
waiting time or a set of usage answers that several classes share.

Time is a parameter (``Visit-time`` windows and timed ``Request-rate`` lines depend on it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from geminibot.policy.candidates import candidate_paths
from geminibot.policy.robots import RobotsFile
from geminibot.policy.robots2 import MAX_ROBOTS2_BYTES
from geminibot.policy.robots_model import VIRTUAL_AGENTS
from geminibot.policy.robots_parse import MAX_ROBOTS_BYTES
from geminibot.policy.site_policy import (
    Bot,
    DelayAnswer,
    FetchDecision,
    Reason,
    SitePolicy,
    UsageAnswer,
)

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

#: A pair of deciding rules within one class: (web allows, web's rules, Gemini's rules).
_Key = tuple[bool, tuple[tuple[str, int, str], ...], tuple[tuple[str, int, str], ...]]


def _deciding(decision: FetchDecision) -> tuple[Reason, ...]:
    """The reasons that decided: the refusing ones, else the ones that allowed by a rule."""
    refusing = tuple(r for r in decision.reasons if not r.allowed)
    return refusing if refusing else tuple(r for r in decision.reasons if r.rule)


def _why(decision: FetchDecision) -> tuple[tuple[str, int, str], ...]:
    return tuple((r.file, r.line, r.rule) for r in _deciding(decision))


@dataclass(frozen=True)
class PathDifference:
    """Paths one side allows and the other forbids, decided by the same rules: an example
    path, each side's verdict and reason for it, and how many candidate paths fell in the
    same group (for one class, or, in :attr:`Comparison.differences`, for every class
    named in ``classes``)."""

    #: Its kind, one of :data:`KINDS` (the ``kind`` of :meth:`as_dict`).
    kind: ClassVar[str] = "path"
    path: str
    web_allowed: bool
    gemini_allowed: bool
    web_reason: str
    gemini_reason: str
    candidates: int
    #: The rules that decide the example on each side (for every class in ``classes``).
    web_rules: tuple[Reason, ...] = ()
    gemini_rules: tuple[Reason, ...] = ()
    #: The bot classes it affects (their names).
    classes: tuple[str, ...] = ()

    def describe(self) -> str:
        allows, forbids = ("the web", "Gemini") if self.web_allowed else ("Gemini", "the web")
        return f"{self.path}: {forbids} forbids it, {allows} allows it"

    def as_dict(self) -> dict[str, object]:
        def side(allowed: bool, reason: str, rules: tuple[Reason, ...]) -> dict[str, object]:
            objects = [r.rule_object() for r in rules]
            return {
                "allowed": allowed,
                "rules": [o for o in objects if o is not None],
                "reason": reason,
            }

        return {
            "kind": self.kind,
            "path": self.path,
            "classes": list(self.classes),
            "candidates": self.candidates,
            "web": side(self.web_allowed, self.web_reason, self.web_rules),
            "gemini": side(self.gemini_allowed, self.gemini_reason, self.gemini_rules),
        }


@dataclass(frozen=True)
class WaitDifference:
    """The waiting time between requests, different over the web and over Gemini."""

    #: Its kind, one of :data:`KINDS` (the ``kind`` of :meth:`as_dict`).
    kind: ClassVar[str] = "wait"
    web: DelayAnswer
    gemini: DelayAnswer
    classes: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "classes": list(self.classes),
            "web": _delay_dict(self.web),
            "gemini": _delay_dict(self.gemini),
        }


def _delay_dict(answer: DelayAnswer) -> dict[str, object]:
    """A waiting time: its seconds, the line that set it as a rule object (None for the
    rule of thumb) and its text."""
    rule = None
    if answer.file and answer.line:
        rule = Reason(answer.file, answer.line, answer.rule, True, "").rule_object()
    return {"seconds": answer.seconds, "rule": rule, "text": answer.rule}


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
class UsageDifferences:
    """The robots2.txt usage answers that differ, the same for every class in ``classes``."""

    #: Its kind, one of :data:`KINDS` (the ``kind`` of :meth:`as_dict`).
    kind: ClassVar[str] = "usage"
    usage: tuple[UsageDifference, ...]
    classes: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "classes": list(self.classes),
            "directives": [u.as_dict() for u in self.usage],
        }


Difference = PathDifference | WaitDifference | UsageDifferences
#: The kinds of difference, as :meth:`Comparison.as_dict` and the census name them.
KINDS = (PathDifference.kind, WaitDifference.kind, UsageDifferences.kind)


@dataclass(frozen=True)
class ClassComparison:
    """One class of bot: where the web's and Gemini's policies differ on paths, wait and usage."""

    bot_class: BotClass
    paths: tuple[PathDifference, ...]
    web_wait: DelayAnswer
    gemini_wait: DelayAnswer
    usage: tuple[UsageDifference, ...]
    #: Each path difference's candidate paths (the same order as ``paths``).
    members: tuple[frozenset[str], ...] = ()

    @property
    def wait_differs(self) -> bool:
        return abs(self.web_wait.seconds - self.gemini_wait.seconds) > 1e-9

    @property
    def agree(self) -> bool:
        return not self.paths and not self.wait_differs and not self.usage


@dataclass(frozen=True)
class Comparison:
    """A site's policies over both protocols compared for every class of bot: each
    class's comparison, and each difference once with the classes it affects."""

    classes: tuple[ClassComparison, ...]
    candidates: int
    at: datetime
    notes: tuple[str, ...] = field(default=())
    differences: tuple[Difference, ...] = field(default=())
    #: True when more candidate paths were made than MAX_CANDIDATE_PATHS (the rest undecided).
    capped: bool = False

    @property
    def agree(self) -> bool:
        return all(c.agree for c in self.classes)

    def counts(self) -> str:
        """What differs, counted: "2 paths, 1 wait and 1 AI usage"."""
        n_paths = sum(isinstance(d, PathDifference) for d in self.differences)
        n_waits = sum(isinstance(d, WaitDifference) for d in self.differences)
        n_usage = sum(isinstance(d, UsageDifferences) for d in self.differences)
        parts = [
            _count(n, noun)
            for n, noun in ((n_paths, "path"), (n_waits, "wait"), (n_usage, "AI usage"))
            if n
        ]
        return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)

    def summary(self) -> str:
        n = len(self.classes)
        if self.agree:
            return (
                f"summary: the web and Gemini policies agree for all {n} bot classes "
                f"({self.candidates} paths decided)"
            )
        differing = [c.bot_class.name for c in self.classes if not c.agree]
        which = f" ({', '.join(differing)})" if len(differing) < n else ""
        verb = "differ" if len(self.differences) > 1 else "differs"
        return f"summary: {self.counts()} {verb} for {len(differing)} of {n} bot classes{which}"

    def as_dict(self) -> dict[str, object]:
        return {
            "agree": self.agree,
            "at": self.at.isoformat(),
            "candidates": self.candidates,
            "candidates_capped": self.capped,
            "classes": [{**c.bot_class.as_dict(), "agree": c.agree} for c in self.classes],
            "differences": [d.as_dict() for d in self.differences],
            "summary": self.summary(),
            "notes": list(self.notes),
        }


def _example_order(path: str) -> tuple[bool, int, str]:
    """Which path shows a difference best: one without an empty segment (a ``*`` filled
    with nothing), then the shortest."""
    return "//" in path, len(path), path


def _count(n: int, noun: str) -> str:
    plural = "" if n == 1 or noun.endswith("usage") else "s"
    return f"{n} {noun}{plural}"


def _declared(answer: UsageAnswer) -> str | None:
    """The value as the file states it (Gemini's ask-counts-as-no undone)."""
    if answer.note.startswith("ask counts as no"):
        return "ask"
    return answer.value


def compare_class(
    web: SitePolicy, gemini: SitePolicy, bot_class: BotClass, paths: Sequence[str], at: datetime
) -> ClassComparison:
    bot = bot_class.bot
    groups: dict[_Key, list[tuple[str, FetchDecision, FetchDecision]]] = {}
    for path in paths:
        w = web.may_fetch(path, bot, at)
        g = gemini.may_fetch(path, bot, at)
        if w.allowed != g.allowed:
            groups.setdefault((w.allowed, _why(w), _why(g)), []).append((path, w, g))
    found = []
    for members in groups.values():
        path, w, g = min(members, key=lambda m: _example_order(m[0]))
        diff = PathDifference(
            path,
            w.allowed,
            g.allowed,
            w.reason,
            g.reason,
            len(members),
            _deciding(w),
            _deciding(g),
            (bot_class.name,),
        )
        found.append((diff, frozenset(m[0] for m in members)))
    found.sort(key=lambda pair: _example_order(pair[0].path))
    usage = tuple(
        UsageDifference(wu.directive, wu, gu)
        for wu, gu in zip(web.usage(bot), gemini.usage(bot), strict=True)
        if _declared(wu) != _declared(gu)
    )
    return ClassComparison(
        bot_class,
        tuple(d for d, _ in found),
        web.delay(bot, at),
        gemini.delay(bot, at),
        usage,
        tuple(m for _, m in found),
    )


def _rule_texts(rules: tuple[Reason, ...]) -> tuple[tuple[str, str], ...]:
    """The rules as written, wherever they stand: what makes two classes' rules one."""
    return tuple((r.file, r.rule or r.text) for r in rules)


#: One class's path difference, with the class and its candidate paths.
_Found = tuple[BotClass, PathDifference, frozenset[str]]


def _merged(
    web: SitePolicy, gemini: SitePolicy, at: datetime, found: list[_Found]
) -> PathDifference:
    """One difference from the classes' groups merged into it: its example is the shortest
    path every one of them disagrees on, its rules those deciding it for each class."""
    common = frozenset.intersection(*(members for _, _, members in found))
    every = frozenset.union(*(members for _, _, members in found))
    path = min(common, key=_example_order)
    web_rules: dict[Reason, None] = {}
    gemini_rules: dict[Reason, None] = {}
    for bot_class, _, _ in found:
        w = web.may_fetch(path, bot_class.bot, at)
        g = gemini.may_fetch(path, bot_class.bot, at)
        web_rules.update(dict.fromkeys(_deciding(w)))
        gemini_rules.update(dict.fromkeys(_deciding(g)))
    first = found[0][1]
    w = web.may_fetch(path, found[0][0].bot, at)
    g = gemini.may_fetch(path, found[0][0].bot, at)
    return PathDifference(
        path,
        first.web_allowed,
        first.gemini_allowed,
        w.reason,
        g.reason,
        len(every),
        tuple(web_rules),
        tuple(gemini_rules),
        tuple(c.name for c, _, _ in found),
    )


def differences(
    web: SitePolicy, gemini: SitePolicy, classes: Sequence[ClassComparison], at: datetime
) -> tuple[Difference, ...]:
    """Each difference once, with the classes it affects: a class's path difference joins
    another class's when the same rules (as written, wherever they stand) decide both
    sides and the two share a path; waits and usage answers join when they are equal."""
    path_groups: list[tuple[tuple[object, ...], list[_Found]]] = []
    for c in classes:
        for diff, members in zip(c.paths, c.members, strict=True):
            key = (diff.web_allowed, _rule_texts(diff.web_rules), _rule_texts(diff.gemini_rules))
            entry = (c.bot_class, diff, members)
            for other_key, found in path_groups:
                shared = frozenset.intersection(members, *(m for _, _, m in found))
                if other_key == key and shared:
                    found.append(entry)
                    break
            else:
                path_groups.append((key, [entry]))
    paths = [_merged(web, gemini, at, found) for _, found in path_groups]
    paths.sort(key=lambda d: (-len(d.classes), len(d.path), d.path))
    waits: dict[tuple[DelayAnswer, DelayAnswer], list[str]] = {}
    usages: dict[tuple[UsageDifference, ...], list[str]] = {}
    for c in classes:
        if c.wait_differs:
            waits.setdefault((c.web_wait, c.gemini_wait), []).append(c.bot_class.name)
        if c.usage:
            usages.setdefault(c.usage, []).append(c.bot_class.name)
    return (
        *paths,
        *(WaitDifference(w, g, tuple(names)) for (w, g), names in waits.items()),
        *(UsageDifferences(u, tuple(names)) for u, names in usages.items()),
    )


def size_notes(side: str, policy: SitePolicy) -> list[str]:
    """What a person must know before reading a side's verdicts: a policy file cut at its
    size limit (its later rules are not read)."""
    notes = []
    side = f"{side} " if side else ""
    if policy.robots is not None and policy.robots.truncated:
        notes.append(
            f"{side}robots.txt is {policy.robots.size:,} bytes: only its first "
            f"{MAX_ROBOTS_BYTES:,} bytes (500 KiB, whole lines) are read"
        )
    if policy.robots2 is not None:
        for link in policy.robots2.links:
            if any(d.code == "size-limit" for d in link.file.diagnostics):
                notes.append(
                    f"{side}{link.url} is cut at {MAX_ROBOTS2_BYTES:,} bytes "
                    "(500 KiB, whole lines): its later lines are not read"
                )
    return notes


def compare(
    web: SitePolicy, gemini: SitePolicy, classes: Sequence[BotClass], at: datetime
) -> Comparison:
    """Compare the two sides for every class (see the module docstring)."""
    paths, capped = candidate_paths(web, gemini)
    notes = [*size_notes("the web's", web), *size_notes("Gemini's", gemini)]
    if capped:
        notes.append(
            f"only the {len(paths):,} shortest candidate paths were decided (the "
            "files have very many rules): differences at longer paths are not shown"
        )
    compared = tuple(compare_class(web, gemini, c, paths, at) for c in classes)
    found = differences(web, gemini, compared, at)
    return Comparison(compared, len(paths), at, tuple(notes), found, capped)
