"""What a crawl run records of its options, so that ``geminibot why`` can say later why a
link was never queued: the ``--exclude`` patterns and ``--allow-host`` patterns (a link
that matches the first, or whose host matches neither the seeds' hosts nor the second,
leaves no row in ``urls``), the virtual-agent mode and the trap bounds the run applied.

The record is one setting (:data:`RUN_OPTIONS`, JSON), replaced by each run
(:meth:`geminibot.store.crawlstore.CrawlStore.record_run`): it describes the last run. Unlike
the role and the product token (:meth:`~geminibot.store.crawlstore.CrawlStore.check_settings`),
these may change between runs of one database.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from geminibot.crawl.scope import CrawlScope
from geminibot.store.traps import DEFAULT_MAX_DEPTH, MAX_URLS_PER_HOST
from geminibot.urls import host_key, host_name

if TYPE_CHECKING:
    from geminibot.crawl.settings import CrawlOptions
    from geminibot.store.crawlstore import CrawlStore

#: The settings key of the last run's options.
RUN_OPTIONS = "run_options"


@dataclass(frozen=True)
class RunOptions:
    """The options of a crawl run that decide which links are queued."""

    exclude: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()
    seed_hosts: tuple[str, ...] = ()
    strict: bool = False
    max_depth: int = DEFAULT_MAX_DEPTH
    max_urls_per_host: int = MAX_URLS_PER_HOST

    @classmethod
    def of(cls, options: CrawlOptions, seed_hosts: tuple[str, ...]) -> RunOptions:
        return cls(
            tuple(options.exclude),
            tuple(options.allow_hosts),
            seed_hosts,
            options.strict,
            options.limits.max_depth,
            options.limits.max_urls_per_host,
        )

    def scope(self) -> CrawlScope:
        """The run's scope, as the crawler decided which links to follow (its protocols
        aside: they are not recorded)."""
        scope = CrawlScope(self.allow_hosts, self.exclude)
        scope.add_seeds(f"gemini://{host}/" for host in self.seed_hosts)
        return scope

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> RunOptions | None:
        """The record read back; None when there is none or it cannot be read."""
        if not text:
            return None
        try:
            data: Any = json.loads(text)
            return cls(
                tuple(str(p) for p in data["exclude"]),
                tuple(str(p) for p in data["allow_hosts"]),
                tuple(str(h) for h in data["seed_hosts"]),
                bool(data["strict"]),
                int(data["max_depth"]),
                int(data["max_urls_per_host"]),
            )
        except (ValueError, KeyError, TypeError):
            return None


def record_run(store: CrawlStore, options: CrawlOptions, seeds: list[str]) -> None:
    """Record the run's options in ``store`` (seeds: normalised URLs)."""
    hosts = sorted({host_name(host_key(url)) for url in seeds})
    store.record_run(RUN_OPTIONS, RunOptions.of(options, tuple(hosts)).to_json())
