"""Per-client-address rate limit: a token bucket, with the clock passed in (no I/O).

A request that is answered spends a token (:meth:`RateLimiter.take`); what costs the
server without asking anything (a handshake with no request, a malformed line) is
charged too (:meth:`RateLimiter.charge`), into a debt of at most one burst. A client
whose debt is full is :meth:`~RateLimiter.exhausted`: the server closes its new
connections before TLS until a token has come back."""

from __future__ import annotations

MAX_TRACKED_CLIENTS = 10_000
"""Buckets kept at most; when over, buckets that have refilled completely are dropped."""


class RateLimiter:
    """``burst`` requests (or units of work) at once, refilled at ``per_second``; ``take``
    says how long to wait."""

    def __init__(self, burst: int, per_second: float) -> None:
        if burst < 1 or per_second <= 0:
            raise ValueError("burst must be >= 1 and per_second > 0")
        self.burst = burst
        self.per_second = per_second
        self._buckets: dict[str, tuple[float, float]] = {}  # client: (tokens, when)

    def take(self, client: str, now: float, cost: float = 1.0) -> float | None:
        """Spend ``cost`` tokens (one request; at most ``burst``) for ``client``: None if
        allowed, else seconds until that many are free."""
        cost = min(cost, float(self.burst))
        tokens = self._refilled(client, now)
        if tokens >= cost:
            self._buckets[client] = (tokens - cost, now)
            if len(self._buckets) > MAX_TRACKED_CLIENTS:
                self._prune(now)
            return None
        self._buckets[client] = (tokens, now)
        return (cost - tokens) / self.per_second

    def charge(self, client: str, now: float) -> None:
        """Spend one token for ``client`` even when none is left: the bucket goes into debt,
        down to minus one burst."""
        tokens = self._refilled(client, now)
        self._buckets[client] = (max(-float(self.burst), tokens - 1.0), now)
        if len(self._buckets) > MAX_TRACKED_CLIENTS:
            self._prune(now)

    def exhausted(self, client: str, now: float) -> bool:
        """Whether ``client``'s debt is full (a whole burst charged beyond its tokens)."""
        return client in self._buckets and self._refilled(client, now) <= -self.burst

    def _refilled(self, client: str, now: float) -> float:
        tokens, when = self._buckets.get(client, (float(self.burst), now))
        return min(float(self.burst), tokens + (now - when) * self.per_second)

    def _prune(self, now: float) -> None:
        full = [
            c
            for c, (tokens, when) in self._buckets.items()
            if tokens + (now - when) * self.per_second >= self.burst
        ]
        for client in full:
            del self._buckets[client]
        if len(self._buckets) > MAX_TRACKED_CLIENTS:  # still too many: forget the oldest
            oldest = sorted(self._buckets, key=lambda c: self._buckets[c][1])
            for client in oldest[: len(self._buckets) - MAX_TRACKED_CLIENTS]:
                del self._buckets[client]
