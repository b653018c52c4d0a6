"""What a bot does with the content it fetches: the vocabulary of a bot profile.

The string value of each member is its stable name: it is what profiles, the registry,
``--does`` and ``--json`` use. Renaming a value is a breaking change; add members instead.
"""

from __future__ import annotations

from enum import Enum


class Activity(Enum):
    """One thing a bot does with fetched content. ``.value`` is the stable name."""

    ARCHIVE = "archive"
    SEARCH_INDEX = "search-index"
    STATISTICS = "statistics"
    WEB_PROXY = "web-proxy"
    LINK = "link"
    BULK_COLLECT = "bulk-collect"
    TRAIN = "train"
    SUMMARISE = "summarise"
    AI_RESEARCH = "ai-research"
    GENERATE = "generate"
    CODE_ASSIST = "code-assist"
    ADVERTISING = "advertising"
    UPTIME = "uptime"
    SEO_AUDIT = "seo-audit"
    FEED_READER = "feed-reader"

    @property
    def meaning(self) -> str:
        """One line for ``--help`` and the docs: what a bot declaring this activity does."""
        return MEANINGS[self]


MEANINGS: dict[Activity, str] = {
    Activity.ARCHIVE: (
        "keeps copies of fetched content and serves them later, even after the original "
        "changed or disappeared (a public archive, a Wayback Machine, a published crawl)"
    ),
    Activity.SEARCH_INDEX: "builds a searchable index of the content (a search engine)",
    Activity.STATISTICS: (
        "computes statistics (counts of hosts and pages, MIME types, sizes, TLS versions, "
        "broken links) without rehosting, linking to or allowing search of the content"
    ),
    Activity.WEB_PROXY: (
        "translates content to HTML and serves it publicly over HTTP(S) (a web portal)"
    ),
    Activity.LINK: (
        "publishes links to the content it fetched (feed aggregators, directories, "
        "lists of pages or capsules)"
    ),
    Activity.BULK_COLLECT: "collects content in bulk into data sets (scraping, dataset building)",
    Activity.TRAIN: "uses the content to train machine-learning models",
    Activity.SUMMARISE: (
        "summarises or quotes the content for a user, in answer to that user's question"
    ),
    Activity.AI_RESEARCH: (
        "an AI agent performing autonomous research tasks: reads many sources and reports"
    ),
    Activity.GENERATE: "produces new content (articles, posts, answers) from the sources",
    Activity.CODE_ASSIST: "fetches documentation or code to help write or review code",
    Activity.ADVERTISING: (
        "advertising: ad targeting, ad landing-page checks, profiling readers for ads"
    ),
    Activity.UPTIME: "checks that hosts and pages answer (uptime and availability monitoring)",
    Activity.SEO_AUDIT: "SEO and site-analytics reports about a site's pages",
    Activity.FEED_READER: (
        "fetches the feeds one person subscribed to and shows their entries to that "
        "person alone (a personal feed reader): nothing republished, indexed or linked"
    ),
}


class UnknownActivityError(ValueError):
    """A name that is not an :class:`Activity` value; the message lists the valid ones."""


def activity_names() -> tuple[str, ...]:
    """Every stable activity name, in declaration order."""
    return tuple(a.value for a in Activity)


def parse_activity(name: str) -> Activity:
    """The activity called ``name`` (case and surrounding blanks ignored, ``_`` = ``-``)."""
    key = name.strip().lower().replace("_", "-")
    for activity in Activity:
        if activity.value == key:
            return activity
    raise UnknownActivityError(
        f"unknown activity {name.strip()!r}; known: {', '.join(activity_names())}"
    )


def parse_activities(names: str | list[str] | tuple[str, ...]) -> tuple[Activity, ...]:
    """Activities from a comma-separated string or a list; duplicates dropped, order kept."""
    parts = names.split(",") if isinstance(names, str) else list(names)
    out: list[Activity] = []
    for part in parts:
        if isinstance(part, str) and not part.strip():
            continue
        if not isinstance(part, str):
            raise UnknownActivityError(f"an activity must be a string, not {part!r}")
        activity = parse_activity(part)
        if activity not in out:
            out.append(activity)
    return tuple(out)
