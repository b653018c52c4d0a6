"""The portal's open connections, each waiting for its client or with work in hand, and
who makes room for a newcomer when the descriptors allowed are in use: the connection
that has waited longest for its client (idle between requests, still sending its head,
or sending a body slowly).

Pure: no sockets, no clock; a connection is any hashable value.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class ConnectionTable(Generic[K]):
    """At most ``capacity`` connections (the descriptor limit less a reserve for the
    portal's own work: Gemini requests, the crawl database, logs)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        #: Connections waiting for their client, the one waiting longest first.
        self._idle: OrderedDict[K, None] = OrderedDict()
        self._busy: set[K] = set()

    def __len__(self) -> int:
        return len(self._idle) + len(self._busy)

    def __iter__(self) -> Iterator[K]:
        return iter([*self._idle, *self._busy])

    @property
    def full(self) -> bool:
        return len(self) >= self.capacity

    def add(self, key: K) -> None:
        """A new connection, idle (it has sent no request yet)."""
        self._idle[key] = None

    def idle(self, key: K) -> None:
        """``key`` waits for its client now (for a request, or for a request's body); it
        has waited longest of none."""
        self._busy.discard(key)
        self._idle.pop(key, None)
        self._idle[key] = None

    def busy(self, key: K) -> None:
        """``key`` has work in hand (a request being answered)."""
        if self._idle.pop(key, False) is None:
            self._busy.add(key)

    def remove(self, key: K) -> None:
        self._idle.pop(key, None)
        self._busy.discard(key)

    def is_idle(self, key: K) -> bool:
        return key in self._idle

    def oldest_idle(self) -> K | None:
        """The connection to drop first to make room: the one that has waited longest for
        its client, or None when every one has work in hand."""
        return next(iter(self._idle), None)
