"""Every file an export writes, in the order they are written and described
(:mod:`geminibot.export.pages`, :mod:`geminibot.export.hosts`,
:mod:`geminibot.export.feeds`); the pages' text
(:data:`~geminibot.export.pages.PAGE_TEXT`) only when asked for."""

from __future__ import annotations

from geminibot.export.feeds import FEED_ENTRIES, FEEDS
from geminibot.export.hosts import HOSTS, PINS, POLICY_FILES, TLS
from geminibot.export.model import Dataset
from geminibot.export.pages import EXCLUSIONS, HOST_LINKS, INDEX, PAGE_TEXT, REDIRECTS

__all__ = ["DATASETS", "PAGE_TEXT"]

DATASETS: tuple[Dataset, ...] = (
    INDEX,
    HOSTS,
    TLS,
    PINS,
    POLICY_FILES,
    REDIRECTS,
    HOST_LINKS,
    EXCLUSIONS,
    FEEDS,
    FEED_ENTRIES,
)
