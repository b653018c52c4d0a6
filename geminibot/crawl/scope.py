"""Which hosts and URLs a crawl takes (pure: no I/O).

A crawl's hosts are its seeds' hosts (compared as they are: ``[::1]:1971`` is no pattern)
and those matching an ``--allow-host`` shell pattern (by host key, or by host name alone,
so a pattern covers the Gemini and web sides of a host). A URL matching an ``--exclude``
shell pattern is never fetched. Links are followed only to the protocols of the seeds,
plus those of ``--follow``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

from geminibot.urls import Scheme, host_key, host_name, normalise, scheme_of

#: A link to follow: (its normalised URL, its depth, the URL of the page it was found on).
Link = tuple[str, int, str]


class CrawlScope:
    """The hosts, URLs and protocols one crawl takes: the seeds', ``--allow-host``,
    ``--exclude`` and ``--follow``."""

    def __init__(
        self,
        allow_hosts: Iterable[str] = (),
        exclude: Iterable[str] = (),
        follow: Iterable[Scheme] = (),
    ) -> None:
        self._patterns = tuple(p.lower() for p in allow_hosts)
        self._exclude = tuple(exclude)
        self._protocols: set[Scheme] = set(follow)
        self._seed_hosts: set[str] = set()  # host names of the seeds, always allowed
        self._host_allowed: dict[str, bool] = {}  # host -> whether it is the crawl's

    def add_seeds(self, urls: Iterable[str]) -> list[str]:
        """Take the seeds' hosts and protocols in; returns the seeds not excluded."""
        kept = []
        for url in urls:
            try:
                self._seed_hosts.add(host_name(host_key(url)))
                self._protocols.add(scheme_of(url))
            except ValueError:
                pass
            if self.excluded_by(url) is None:
                kept.append(url)
        self._host_allowed.clear()
        return kept

    def host_allowed(self, host: str) -> bool:
        """Whether a host key is a seed's host or matches an --allow-host pattern."""
        known = self._host_allowed.get(host)
        if known is None:
            key = host.lower()
            name = host_name(key)
            known = self._host_allowed[host] = name in self._seed_hosts or any(
                fnmatch.fnmatchcase(key, p) or fnmatch.fnmatchcase(name, p) for p in self._patterns
            )
        return known

    def excluded_by(self, url: str) -> str | None:
        """The first --exclude pattern that matches ``url``, if any."""
        return next((p for p in self._exclude if fnmatch.fnmatchcase(url, p)), None)

    def followed(self, links: Iterable[str], depth: int, source: str) -> list[Link]:
        """The links of a page (found at ``depth``, on ``source``) that the crawl
        follows: its protocols and hosts, not excluded, normalised."""
        out = []
        for raw in links:
            try:
                link, target_host = normalise(raw), host_key(raw)
                followed = scheme_of(raw) in self._protocols
            except ValueError:
                continue  # neither gemini:// nor http(s)://, or a broken URL
            if followed and self.host_allowed(target_host) and self.excluded_by(link) is None:
                out.append((link, depth + 1, source))
        return out
