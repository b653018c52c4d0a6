"""The site policies of the hosts a crawl works on, kept in memory between their turns.

A host's policy is read from its files (:class:`~geminibot.crawl.policy_files.PolicyFiles`)
at its first turn, and again whenever one of the files it rests on has expired; in
between it is taken from memory, up to :data:`POLICY_CACHE_BYTES` of the files the kept
policies were read from (beyond it, the least recently used are parsed again from the
store's cache of policy files at their host's next turn: no request, but more CPU).
"""

from __future__ import annotations

from collections import OrderedDict

from geminibot.crawl.policy_files import Later, PolicyFiles, Skip
from geminibot.policy.site_policy import SitePolicy

#: Bytes of policy files whose site policies are kept in memory between a host's turns
#: (beyond it, the least recently used are parsed again from the store's cache at their
#: host's next turn: no request, but more CPU than a page). A capsule's are a few KiB.
POLICY_CACHE_BYTES = 16 * 1024 * 1024


class SitePolicies:
    """The hosts' site policies between their turns, least recently used first, each
    with the bytes of the files it was read from (:data:`POLICY_CACHE_BYTES`); a
    policy is out of memory during its host's turn, and kept again after it."""

    def __init__(self, files: PolicyFiles) -> None:
        self.files = files
        self._kept: OrderedDict[str, tuple[SitePolicy, int]] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._kept)

    async def for_turn(self, host: str) -> SitePolicy | Later | Skip:
        """``host``'s policy for its turn, taken out of memory: the one kept, or read
        from its files when there is none yet or one of the files it rests on has
        expired (RFC 9309 2.4: a cached copy is used for at most 24 hours, also within
        one long run); :class:`Later`: the read goes on at the host's next turn;
        :class:`Skip`: the host is skipped."""
        policy = self.drop(host)
        if policy is not None and not self.files.expired(host):
            return policy
        return await self.files.site_policy(host)

    def keep(self, host: str, policy: SitePolicy) -> None:
        """Keep ``host``'s policy for its next turn, within :data:`POLICY_CACHE_BYTES`."""
        size = self.files.sizes.get(host, 0)
        if size > POLICY_CACHE_BYTES:
            return
        self._kept[host] = (policy, size)
        self._bytes += size
        while self._bytes > POLICY_CACHE_BYTES:
            _, (_, dropped) = self._kept.popitem(last=False)
            self._bytes -= dropped

    def drop(self, host: str) -> SitePolicy | None:
        """Forget ``host``'s policy; the one that was kept, if any."""
        kept = self._kept.pop(host, None)
        if kept is None:
            return None
        self._bytes -= kept[1]
        return kept[0]

    def clear(self) -> None:
        """Forget every policy (the run is over)."""
        self._kept.clear()
        self._bytes = 0
