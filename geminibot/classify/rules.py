"""The classification rules: activities to Gemini virtual agents and robots2.txt categories.

Every rule carries the sentence of the specification it rests on (a :class:`SpecRef`), so
that each answer can say why. The tables below are the whole of the classification; the
function :func:`classify` only applies them and adds the warnings for ambiguous profiles.
``docs/classify.md`` explains each rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from geminibot.classify.activities import Activity
from geminibot.policy.robots2 import CATEGORIES, USAGE_DIRECTIVES
from geminibot.policy.robots_model import VIRTUAL_AGENTS, Mode

GEMINI_DOC = "gemini-robots-virtual-agents.txt"
ROBOTS2_DOC = "robots2-ai-policy-v0.2.1.txt"
PROJECT_DOC = "specs/README.md"

#: The Gemini virtual agents and the robots2.txt categories, in their specifications' order.
VIRTUAL_AGENT_NAMES: tuple[str, ...] = VIRTUAL_AGENTS
CATEGORY_NAMES: tuple[str, ...] = CATEGORIES


@dataclass(frozen=True, slots=True)
class SpecRef:
    """A sentence of a specification, quoted briefly, that a rule rests on."""

    doc: str
    section: str
    quote: str

    def cite(self) -> str:
        return f'{self.doc} ({self.section}): "{self.quote}"'

    def as_dict(self) -> dict[str, str]:
        return {"doc": self.doc, "section": self.section, "quote": self.quote}


# -- the sentences -------------------------------------------------------------------------

G_ARCHIVER = SpecRef(
    GEMINI_DOC,
    "archiver",
    "build public long-term archives of Geminispace, which will serve old Gemini content "
    "even after the original has changed or disappeared",
)
G_INDEXER = SpecRef(GEMINI_DOC, "indexer", "build searchable indexes of Geminispace")
G_RESEARCHER = SpecRef(
    GEMINI_DOC,
    "researcher",
    "study large-scale statistical properties of Geminispace ... without rehosting, "
    "linking to, or allowing search of any fetched content",
)
G_WEBPROXY = SpecRef(
    GEMINI_DOC,
    "webproxy",
    "translate said content into HTML and publicly serve the result over HTTP(S)",
)
G_COMBINATION = SpecRef(
    GEMINI_DOC,
    "virtual user agents",
    "should obey the most restrictive set of directives arising from the combination of "
    "all applicable virtual user agents",
)
G_STAR = SpecRef(
    GEMINI_DOC,
    "virtual user agents",
    "Gemini bots should still respect robots.txt directives aimed at a User-agent of *",
)
G_SPIRIT = SpecRef(
    GEMINI_DOC,
    "virtual user agents",
    "Bot authors are encouraged to err on the side of caution",
)
P_MODES = SpecRef(
    PROJECT_DOC,
    "section 2, project decision",
    '"strict" mode: own token, every matching virtual agent and `*` all apply',
)
P_UNKNOWN = SpecRef(
    PROJECT_DOC,
    "section 3, project decision",
    "an unknown value is treated as the most restrictive value of that directive",
)

R_CATEGORY: dict[str, SpecRef] = {
    "search-indexer": SpecRef(ROBOTS2_DOC, "section 5", "web crawlers that build search indices"),
    "ai-assistant": SpecRef(ROBOTS2_DOC, "section 5", "conversational AI serving a user's query"),
    "ai-researcher": SpecRef(
        ROBOTS2_DOC, "section 5", "agents performing autonomous research tasks"
    ),
    "code-assistant": SpecRef(ROBOTS2_DOC, "section 5", "agents helping write or review code"),
    "data-harvester": SpecRef(ROBOTS2_DOC, "section 5", "bulk data collection agents"),
    "content-generator": SpecRef(
        ROBOTS2_DOC, "section 5", "agents that produce new content from sources"
    ),
    "ad-network": SpecRef(ROBOTS2_DOC, "section 5", "advertising-related crawlers and profilers"),
    "monitoring": SpecRef(ROBOTS2_DOC, "section 5", "uptime, SEO, and analytics crawlers"),
}
R_DECLARE = SpecRef(
    ROBOTS2_DOC, "section 5", "Agents SHOULD declare their category in X-Agent-Identity"
)
R_DIRECTIVE: dict[str, SpecRef] = {
    "crawl": SpecRef(ROBOTS2_DOC, "section 2", "CRAWL — index this site at all?"),
    "read": SpecRef(ROBOTS2_DOC, "section 2", "READ — process page content?"),
    "summarise": SpecRef(ROBOTS2_DOC, "section 2", "SUMMARISE — summarise content for a user?"),
    "quote": SpecRef(ROBOTS2_DOC, "section 2", "QUOTE — reproduce excerpts?"),
    "derivative": SpecRef(
        ROBOTS2_DOC,
        "section 2",
        "DERIVATIVE — rewrite, paraphrase, translate, or transform content?",
    ),
    "train": SpecRef(ROBOTS2_DOC, "section 2", "TRAIN — use content to train an AI model?"),
    "store": SpecRef(ROBOTS2_DOC, "section 2", "STORE — cache or persist copies of content?"),
    "personalise": SpecRef(
        ROBOTS2_DOC, "section 2", "PERSONALISE — build a profile of the user from this content?"
    ),
    "monetise": SpecRef(
        ROBOTS2_DOC, "section 2", "MONETISE — use this content to generate revenue?"
    ),
}

# -- the tables ----------------------------------------------------------------------------

#: Activity -> the Gemini virtual agent whose definition it meets.
VIRTUAL_AGENT_RULES: dict[Activity, tuple[str, SpecRef]] = {
    Activity.ARCHIVE: ("archiver", G_ARCHIVER),
    Activity.SEARCH_INDEX: ("indexer", G_INDEXER),
    Activity.STATISTICS: ("researcher", G_RESEARCHER),
    Activity.WEB_PROXY: ("webproxy", G_WEBPROXY),
}

#: Activity -> the robots2.txt category whose description it meets.
CATEGORY_RULES: dict[Activity, str] = {
    Activity.SEARCH_INDEX: "search-indexer",
    Activity.STATISTICS: "monitoring",
    Activity.SUMMARISE: "ai-assistant",
    Activity.AI_RESEARCH: "ai-researcher",
    Activity.CODE_ASSIST: "code-assistant",
    Activity.BULK_COLLECT: "data-harvester",
    Activity.GENERATE: "content-generator",
    Activity.ADVERTISING: "ad-network",
    Activity.UPTIME: "monitoring",
    Activity.SEO_AUDIT: "monitoring",
}

#: Activity -> the robots2.txt directives that answer whether the site allows it.
DIRECTIVE_RULES: dict[Activity, tuple[str, ...]] = {
    Activity.ARCHIVE: ("crawl", "read", "store"),
    Activity.SEARCH_INDEX: ("crawl", "read", "store"),
    Activity.STATISTICS: ("crawl",),
    Activity.WEB_PROXY: ("read", "derivative"),
    Activity.LINK: ("crawl",),
    Activity.BULK_COLLECT: ("crawl", "read", "store"),
    Activity.TRAIN: ("train", "store"),
    Activity.SUMMARISE: ("read", "summarise", "quote"),
    Activity.AI_RESEARCH: ("read", "summarise", "quote", "derivative"),
    Activity.GENERATE: ("read", "summarise", "quote", "derivative"),
    Activity.CODE_ASSIST: ("read", "quote", "derivative"),
    Activity.ADVERTISING: ("crawl", "read", "personalise", "monetise"),
    Activity.UPTIME: ("crawl",),
    Activity.SEO_AUDIT: ("crawl", "read"),
    Activity.FEED_READER: ("read",),
}

#: The robots2.txt directives some activity needs, in the policy engine's answer order (the
#: others, compete, attribution, link-back, announce, are obligations, not activities).
DIRECTIVE_NAMES: tuple[str, ...] = tuple(
    d for d in USAGE_DIRECTIVES if any(d in used for used in DIRECTIVE_RULES.values())
)

#: Activities that disqualify a bot from being *purely* a researcher: rehosting
#: (archive, web proxy), linking to content, allowing search of it.
RESEARCHER_DISQUALIFIERS: dict[Activity, str] = {
    Activity.ARCHIVE: "rehosts content",
    Activity.WEB_PROXY: "rehosts content",
    Activity.LINK: "links to content",
    Activity.SEARCH_INDEX: "allows search of content",
}

# -- the result ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Justification:
    """Why a class applies: which activity, resting on which sentence."""

    activity: Activity
    source: SpecRef

    def as_dict(self) -> dict[str, object]:
        return {"activity": self.activity.value, **self.source.as_dict()}


@dataclass(frozen=True, slots=True)
class Assignment:
    """One class (a virtual agent, a category or a directive) and every reason for it."""

    name: str
    reasons: tuple[Justification, ...]

    @property
    def activities(self) -> tuple[Activity, ...]:
        return tuple(r.activity for r in self.reasons)

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "reasons": [r.as_dict() for r in self.reasons]}


@dataclass(frozen=True, slots=True)
class ProfileWarning:
    """Something ambiguous about a profile, with the activities it concerns."""

    code: str
    message: str
    activities: tuple[Activity, ...] = ()
    sources: tuple[SpecRef, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "message": self.message,
            "activities": [a.value for a in self.activities],
            "sources": [s.as_dict() for s in self.sources],
        }


@dataclass(frozen=True, slots=True)
class Classification:
    """What a bot with these activities is, and what it must obey."""

    activities: tuple[Activity, ...]
    virtual_agents: tuple[Assignment, ...]
    categories: tuple[Assignment, ...]
    directives: tuple[Assignment, ...]
    warnings: tuple[ProfileWarning, ...]
    combination: str | None
    recommended_mode: Mode
    mode_reason: str
    adapts_per_activity: bool = False
    #: The sentence the combination rule rests on, when there is a combination.
    combination_source: SpecRef | None = None

    @property
    def virtual_agent_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.virtual_agents)

    @property
    def category_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.categories)

    @property
    def directive_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.directives)

    def as_dict(self) -> dict[str, object]:
        return {
            "activities": [a.value for a in self.activities],
            "virtual_agents": [a.as_dict() for a in self.virtual_agents],
            "categories": [a.as_dict() for a in self.categories],
            "directives": [a.as_dict() for a in self.directives],
            "warnings": [w.as_dict() for w in self.warnings],
            "combination": self.combination,
            "combination_source": (
                self.combination_source.as_dict() if self.combination_source else None
            ),
            "recommended_mode": self.recommended_mode,
            "mode_reason": self.mode_reason,
            "adapts_per_activity": self.adapts_per_activity,
        }


def _names(activities: Iterable[Activity]) -> str:
    return ", ".join(a.value for a in activities)


def _assignments(
    acts: tuple[Activity, ...],
    pairs: dict[Activity, list[tuple[str, SpecRef]]],
    order: tuple[str, ...],
) -> tuple[Assignment, ...]:
    reasons: dict[str, list[Justification]] = {}
    for act in acts:
        for name, ref in pairs.get(act, []):
            reasons.setdefault(name, []).append(Justification(act, ref))
    return tuple(Assignment(n, tuple(reasons[n])) for n in order if n in reasons)


def classify(
    activities: Iterable[Activity], *, adapts_per_activity: bool = False
) -> Classification:
    """Classify a bot by its activities. Deterministic: order and repeats do not matter.

    ``adapts_per_activity``: the bot can apply each virtual agent's rules only to the
    fetches made for that activity (the specification's "adapt its behaviour in a fine
    grained manner"); otherwise it obeys the combination of all its virtual agents.
    """
    acts = tuple(a for a in Activity if a in set(activities))
    virtual_agents = _assignments(
        acts,
        {a: [VIRTUAL_AGENT_RULES[a]] for a in acts if a in VIRTUAL_AGENT_RULES},
        VIRTUAL_AGENT_NAMES,
    )
    categories = _assignments(
        acts,
        {
            a: [(CATEGORY_RULES[a], R_CATEGORY[CATEGORY_RULES[a]])]
            for a in acts
            if a in CATEGORY_RULES
        },
        CATEGORY_NAMES,
    )
    directives = _assignments(
        acts,
        {a: [(d, R_DIRECTIVE[d]) for d in DIRECTIVE_RULES[a]] for a in acts},
        DIRECTIVE_NAMES,
    )
    warnings = _warnings(acts, virtual_agents, categories)

    combination: str | None = None
    va_names = tuple(a.name for a in virtual_agents)
    if len(va_names) > 1:
        if adapts_per_activity:
            combination = (
                f"adapts per activity: each fetch obeys the group of the virtual agent of the "
                f"activity it is made for ({', '.join(va_names)}); a fetch that serves several "
                f"activities obeys all of their groups (allowed only if every one allows it)"
            )
        else:
            combination = (
                f"fits several virtual agents ({', '.join(va_names)}): obeys the most "
                f"restrictive combination, a URL is allowed only if every one of these groups "
                f"allows it"
            )

    uncovered = tuple(a for a in acts if a not in VIRTUAL_AGENT_RULES)
    disqualified = Activity.STATISTICS in acts and any(a in RESEARCHER_DISQUALIFIERS for a in acts)
    mode: Mode = "precedence"
    mode_reason = (
        "its virtual agents describe everything it does, so the default (precedence) mode fits"
        if acts and not uncovered
        else "no virtual agent describes it: the own-token group or `*` applies either way"
    )
    if va_names and uncovered:
        mode = "strict"
        mode_reason = (
            f"its virtual agents ({', '.join(va_names)}) do not describe {_names(uncovered)}: a "
            f"group written for them may allow more than `*`, which was not granted for these "
            f"activities; strict mode also applies `*`"
        )
    elif disqualified:
        mode = "strict"
        mode_reason = (
            "it is not purely a researcher: a researcher group that allows more than `*` was "
            "not written for it; strict mode also applies `*`"
        )
    return Classification(
        activities=acts,
        virtual_agents=virtual_agents,
        categories=categories,
        directives=directives,
        warnings=warnings,
        combination=combination,
        recommended_mode=mode,
        mode_reason=mode_reason,
        adapts_per_activity=adapts_per_activity,
        combination_source=G_COMBINATION if combination else None,
    )


def _warnings(
    acts: tuple[Activity, ...],
    virtual_agents: tuple[Assignment, ...],
    categories: tuple[Assignment, ...],
) -> tuple[ProfileWarning, ...]:
    out: list[ProfileWarning] = []
    if not acts:
        out.append(
            ProfileWarning(
                "no-activities",
                "no activities declared: nothing to classify; a bot that fetches anything "
                "obeys at least the `*` group",
                (),
                (G_STAR,),
            )
        )
        return tuple(out)

    no_va = tuple(a for a in acts if a not in VIRTUAL_AGENT_RULES)
    if no_va:
        if virtual_agents:
            tail = (
                "its virtual agents' groups were not written for these; obey `*` as well "
                "(strict mode)"
            )
        else:
            tail = "on Gemini it obeys the `*` group and, if it has one, its own token's group"
        out.append(
            ProfileWarning(
                "no-virtual-agent",
                f"no Gemini virtual agent describes {_names(no_va)}: {tail}",
                no_va,
                (G_STAR, G_SPIRIT),
            )
        )

    no_cat = tuple(a for a in acts if a not in CATEGORY_RULES)
    if no_cat:
        out.append(
            ProfileWarning(
                "no-robots2-category",
                f"robots2.txt defines no agent category for {_names(no_cat)}: the "
                f"directives {', '.join(_directives_of(no_cat))} answer for "
                f"{'it' if len(no_cat) == 1 else 'them'}, from the global section or the "
                f"blocks of the bot's other categories",
                no_cat,
                (R_DECLARE,),
            )
        )

    if Activity.STATISTICS in acts:
        bad = tuple(a for a in acts if a in RESEARCHER_DISQUALIFIERS)
        if bad:
            why = "; ".join(f"{a.value} {RESEARCHER_DISQUALIFIERS[a]}" for a in bad)
            out.append(
                ProfileWarning(
                    "not-purely-researcher",
                    f'statistics together with {_names(bad)} is not "researcher" ({why}): the '
                    f"bot obeys researcher for its statistics and the other groups for the "
                    f"rest, and must not take a researcher group's extra permissions as its own",
                    (Activity.STATISTICS, *bad),
                    (G_RESEARCHER, G_COMBINATION),
                )
            )

    if Activity.AI_RESEARCH in acts:
        out.append(
            ProfileWarning(
                "ai-researcher-is-not-researcher",
                "robots2.txt's ai-researcher (AI agents performing research tasks) is not "
                "Gemini's researcher virtual agent (statistics with no rehosting, linking or "
                "search): ai-research gives no virtual agent; declare statistics only if the "
                "bot computes statistics and publishes nothing else",
                (Activity.AI_RESEARCH,),
                (R_CATEGORY["ai-researcher"], G_RESEARCHER),
            )
        )

    if Activity.WEB_PROXY in acts:
        out.append(
            ProfileWarning(
                "proxy-is-derivative",
                "robots2.txt's derivative: covers translating or transforming content; whether "
                "rendering gemtext as HTML counts is not said: the cautious reading obeys "
                "derivative:",
                (Activity.WEB_PROXY,),
                (R_DIRECTIVE["derivative"], G_SPIRIT),
            )
        )

    if len(categories) > 1:
        names = ", ".join(c.name for c in categories)
        out.append(
            ProfileWarning(
                "several-categories",
                f"several robots2.txt categories ({names}): X-Agent-Identity declares one; the "
                f"bot obeys, for each directive, the most restrictive value among these "
                f"categories' blocks (the Gemini combination rule, applied to robots2.txt)",
                tuple(a for c in categories for a in c.activities),
                (R_DECLARE, G_COMBINATION),
            )
        )
    return tuple(out)


def _directives_of(acts: tuple[Activity, ...]) -> tuple[str, ...]:
    wanted = {d for a in acts for d in DIRECTIVE_RULES[a]}
    return tuple(d for d in DIRECTIVE_NAMES if d in wanted)
