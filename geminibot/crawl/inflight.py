"""How many requests the crawl keeps in flight: up to ``--concurrency``, fewer while the
crawler's own event loop is saturated. Pure logic; the crawler measures and applies it.

``--concurrency`` has to cover real round trips (at 100 ms, 128 requests in flight are
what keeps a crawl near a thousand pages a second). But when the round trip is short and
the crawler's CPU is the bottleneck (a fast server nearby, or a small machine), more
requests in flight fetch nothing more: they wait in the event loop's queue, and by
Little's law each one takes longer (in flight / throughput). A host's requests are a
chain, one at a time, so that wait is paid once per request by every host: on the
synthetic Geminispace at 128 in flight, its biggest host (``Request-rate: 600/1m``) ran
at a quarter of its allowed pace and was all that was left at the end (issue 15).

So the crawler measures its event loop's lag (how late a short sleep wakes up) and its
own CPU time, and :class:`InFlight` adjusts the limit once per :data:`WINDOW`:

- the lag's median over a window above :data:`LAG_HIGH` while the process used at least
  :data:`BUSY` of a core: the limit shrinks by :data:`DECREASE` (never under
  :data:`MIN_IN_FLIGHT`). Lag alone is no proof of a saturated CPU: a loop running many
  tasks per step lags with idle time to spare, and requests waiting on slow servers use
  no CPU at all (at a crawl's start, slow capsules' half-second answers held most places
  of a limit shrunk on lag alone, and the crawl fell to a third of its pace);
- under :data:`LAG_LOW`, or under :data:`BUSY`, while requests waited for a place (the
  limit was what held them):
  it grows by :data:`INCREASE` of itself (at least one), up to ``--concurrency``: slow
  hosts holding the places (their requests wait on the network, not on the loop) have
  it back to 128 from 20 in about 16 seconds.

It starts at ``--concurrency``: a crawl whose loop keeps up never goes below it. The
median, not the mean: one long step (a large page's parse, a commit) is one late probe
and says nothing about the queue.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

#: Seconds between two probes of the event loop's lag (a sleep this long, timed).
PROBE_INTERVAL = 0.05
#: Seconds of probes per adjustment (a window; a lagging loop probes less often in it).
WINDOW = 1.0
#: Median lag (seconds) above which the loop is saturated: the limit shrinks. A chain
#: with a delay pays about this at each request (its wake at its turn is such a probe):
#: 10 ms made the synthetic Geminispace's biggest capsule start 8-9 ms after its turn on
#: average, 5 ms 4 ms (docs/benchmarks.md, one whole run).
LAG_HIGH = 0.005
#: Median lag (seconds) under which the loop keeps up: the limit may grow.
LAG_LOW = 0.002
#: Share of one core (CPU seconds per second) from which the crawl process counts as
#: saturated: below it, fewer requests in flight would leave the CPU idle.
BUSY = 0.9
#: A saturated window multiplies the limit by this.
DECREASE = 0.8
#: A window that kept up while requests waited adds this fraction of the limit (>= 1).
INCREASE = 0.125
#: The limit never goes under this many (or ``--concurrency``, if lower).
MIN_IN_FLIGHT = 4


class InFlight:
    """The number of requests allowed in flight, from one window of lag probes to the
    next (see the module docstring)."""

    def __init__(self, maximum: int, *, minimum: int = MIN_IN_FLIGHT) -> None:
        self.maximum = max(1, maximum)
        self.minimum = max(1, min(minimum, self.maximum))
        self.limit = self.maximum

    def observe(self, lags: Sequence[float], waited: bool, busy: float) -> int:
        """One window: the probes' lags (seconds), whether a request waited for a place
        in it, and the process's CPU seconds per second in it -> the new limit."""
        if not lags:
            return self.limit
        lag = statistics.median(lags)
        if lag > LAG_HIGH and busy >= BUSY:
            self.limit = max(self.minimum, int(self.limit * DECREASE))
        elif (lag < LAG_LOW or busy < BUSY) and waited:
            self.limit = min(self.maximum, self.limit + max(1, int(self.limit * INCREASE)))
        return self.limit
