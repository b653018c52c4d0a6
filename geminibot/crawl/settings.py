"""The crawl's settings: the defaults that ``geminibot crawl --help`` shows (here, apart
from the crawler, so that the command line can show them without importing it and
trio), the role's robots2.txt category, and the settings a database keeps across runs.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from geminibot import defaults
from geminibot.store.traps import FrontierLimits
from geminibot.urls import Scheme

if TYPE_CHECKING:
    from geminibot.store.crawlstore import CrawlStore

#: Requests in flight across all hosts, by default (:mod:`geminibot.defaults`).
DEFAULT_CONCURRENCY = defaults.CRAWL_CONCURRENCY
#: Roles the crawler can declare (virtual user agents it acts as).
ROLES = defaults.CRAWL_ROLES
#: The crawler's own product token.
DEFAULT_AGENT = "geminibot"
#: robots2.txt category each role declares (project decision; None: global directives only).
ROLE_CATEGORIES: dict[str, str | None] = {
    "indexer": "search-indexer",
    "archiver": None,
    "researcher": None,
}


@dataclass(frozen=True)
class CrawlOptions:
    """What a crawl is asked to do: the command line's crawl options."""

    role: str = "indexer"
    agent: str = DEFAULT_AGENT
    strict: bool = False
    max_pages: int | None = None
    limits: FrontierLimits = field(default_factory=FrontierLimits)
    allow_hosts: tuple[str, ...] = ()  # fnmatch patterns, beside the seeds' own hosts
    exclude: tuple[str, ...] = ()  # fnmatch patterns of URLs never fetched (--exclude)
    max_time: float | None = None  # seconds, then the crawl stops (resumable)
    min_delay: float = 0.0  # seconds: a floor under every host's delay (--min-delay)
    concurrency: int = DEFAULT_CONCURRENCY  # workers: requests in flight at most
    test_range: bool = False
    follow: tuple[Scheme, ...] = ()  # protocols followed beyond the seeds' own
    refresh: bool = False  # revisit every finished URL now, due or not
    max_hosts: int | None = None  # hosts worked on at once (None: every host with work)
    #: PEM files of certificate authorities trusted beside the system's (--trust-ca), for
    #: the certificate facts the crawl keeps (a crawl checks no certificate against CAs).
    trust_ca: tuple[Path, ...] = ()


class ConfigMismatch(Exception):
    """The database was crawled with another role or agent; resuming would mix them."""


def check_settings(store: CrawlStore, options: CrawlOptions) -> None:
    """Refuse to resume a database crawled with another role or agent."""
    differs = store.check_settings({"role": options.role, "agent": options.agent})
    if differs is not None:
        key, stored, value = differs
        raise ConfigMismatch(
            f"this database was crawled with {key} {stored!r}, not {value!r}: "
            "use another --db or the same setting"
        )


def new_lease() -> str:
    """A name for this crawl process among those sharing a store (which machine holds a
    host), also the run's name in its WARC files."""
    return f"{uuid.uuid4().hex}@{socket.gethostname()}:{os.getpid()}"
