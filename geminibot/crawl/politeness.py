"""When may the next request to a host start? A pure schedule with an injected clock.

Three paces hold at once, and a request waits for all of them:

- **The address's pace**, learned from its answers. Hosts put in one group
  (:meth:`Politeness.set_group`: the hosts on one address, an IPv6 server's whole /64
  as one, as :func:`geminibot.crawl.cli.address_of` names it; a host not put in one is
  its own) share it. One request at a time goes to the address; between the end of one and
  the start of the next it waits ``1 / rate`` seconds. The rate starts at the rule of
  thumb of the robots 2.0 document (one request per :data:`START_DELAY`) and adapts as
  TCP's congestion window does, additive increase and multiplicative decrease: each
  answer that came quickly (in at most ``1 / DEFAULT_DURATION_FACTOR`` of the wait) adds
  :data:`RATE_STEP` requests a second, up to ``max_rate`` (:data:`MAX_RATE`, one a
  second); a ``44 SLOW DOWN`` (the web's 429 and 503) multiplies it by
  :data:`RATE_DECREASE` at once, for every host on the address, unless the 44 is the
  host's own limit (below). Off a test range the wait is also at least
  :data:`DEFAULT_DURATION_FACTOR` times the address's last request's duration (a slow
  server is asked less often). ``test_range=True`` (local test capsules only) drops
  that floor and the start: the rate starts unbounded and has no ceiling, and the first
  44 sets it to :data:`RATE_DECREASE` of the pace the address was being asked at; from
  there it adapts the same way.
- **The host's own pace**, learned the same way from its own limits. A host has none
  until a 44 asks it for ``w`` seconds (an integer meta): from then on it is asked at
  most once per ``w`` seconds, and each quick answer of its own adds :data:`RATE_STEP`
  requests a second. A later 44 is the host's own limit, not its address's, when the
  host was asked again sooner than the wait the 44 asks while another host of the
  address answered in between and none was slowed down (the address was not limited
  then): it multiplies the host's rate by :data:`RATE_DECREASE` and leaves the
  address's alone.
- **The host's own policy**, always on top: between the end of one of its requests and
  the start of its next, the site policy's delay (``Crawl-delay``); a rate
  (``Request-rate``, robots2.txt ``rate``, agents.txt ``limit=``: requests per time) is
  counted between the starts of two requests instead (:attr:`HostPace.between_starts`):
  600 a minute is a request every 0.1 s, however long each takes (one that takes longer
  is followed at once, or after ``min_delay``). Visit windows: the next request waits
  for the window to open.

``min_delay`` (``--min-delay``) is a floor under every wait. A ``44`` also holds back
its own host for the larger of the seconds in its meta (if an integer) and an
exponential back-off that doubles with each of its 44s in a row (:data:`SLOW_DOWN_BASE`,
reset by any other answer of the host): a capsule that answers 44 to every request ends
up waiting longer than ``max_wait`` however its neighbours answer, and a capsule that
asks for a long wait for reasons of its own does not stall the others on its server
(they slow down by the rate only). Any wait longer than ``max_wait`` (:data:`MAX_WAIT`)
means "skip this host for now": its URLs stay queued for a later run.

Times are seconds on the injected clock (the crawler uses wall-clock time so that the
schedule can be restored from the database after a restart; the learned rates are not
kept: a new run starts again at the rule of thumb).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from geminibot.cliutil import human_duration
from geminibot.policy.outcomes import MAX_SLOW_DOWN_SECONDS

#: The rule of thumb an address's pace starts at: one request per this many seconds,
#: from the end of one to the start of the next.
START_DELAY = 10.0
#: Off a test range, the wait is at least this many times the last request's duration,
#: and an answer counts as quick (the rate goes up) when the wait is at least this many
#: times its duration.
DEFAULT_DURATION_FACTOR = 2.0
#: The ceiling of an address's pace off a test range (requests a second, counted from
#: the end of one request to the start of the next).
MAX_RATE = 1.0
#: Additive increase: requests a second an address's rate gains with each quick answer.
RATE_STEP = 0.05
#: Multiplicative decrease: an address's rate is multiplied by this on a 44.
RATE_DECREASE = 0.5
#: First back-off after a 44 SLOW DOWN without a usable wait in its meta (seconds).
SLOW_DOWN_BASE = 1.0
#: Longest wait the crawler sits out; anything longer skips the host for now (seconds);
#: the same bound the policy core applies to a 44 on robots.txt.
MAX_WAIT = MAX_SLOW_DOWN_SECONDS
#: Hosts (and addresses) whose state is kept; past it the least recently used one with
#: no request in flight is forgotten (it starts again as a new one).
MAX_HOSTS = 100_000


@dataclass(frozen=True)
class HostPace:
    """What the site policy says about pace."""

    delay: float | None = None  # seconds between requests, None when no policy sets one
    between_starts: bool = False  # the delay is a rate's: counted start to start
    window_opens: Callable[[float], float] | None = None  # now -> earliest allowed time >= now


@dataclass
class _Paced:
    """A learned pace (requests a second, from the end of one to the start of the next;
    ``inf``: unbounded) and the last requests it was applied to."""

    rate: float = math.inf
    in_flight: bool = False
    previous_start: float | None = None
    last_start: float | None = None
    last_end: float | None = None
    last_duration: float = 0.0


@dataclass
class _Host(_Paced):
    """What the schedule knows of one host: its own pace and policy, its last request
    and its back-off."""

    pace: HostPace = field(default_factory=HostPace)
    not_before: float = 0.0
    slow_downs: int = 0
    backed_off: float = 0.0  # the last 44's back-off
    skipped: str | None = None


@dataclass
class _Address(_Paced):
    """The pace one address (a group of hosts) is asked at, its last request, its
    last answer that was not a 44 and its last 44."""

    answered_by: str | None = None
    answered_at: float = -math.inf
    slowed_at: float = -math.inf  # its last 44, from any of its hosts


def asked_wait(meta: str) -> float:
    """The seconds a 44's meta asks to wait (0 unless it is an integer)."""
    text = meta.strip()
    return float(text) if text.isdigit() else 0.0


def slow_down_wait(meta: str, consecutive: int) -> float:
    """Seconds to wait after the ``consecutive``-th 44 in a row (1 for the first)."""
    return max(asked_wait(meta), SLOW_DOWN_BASE * 2.0 ** max(consecutive - 1, 0))


class Politeness:
    """The three paces of the module docstring, for every host and address the crawl asks."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        test_range: bool = False,
        max_wait: float = MAX_WAIT,
        min_delay: float = 0.0,
        max_hosts: int = MAX_HOSTS,
        max_rate: float = MAX_RATE,
    ) -> None:
        self.clock = clock
        self.test_range = test_range
        self.min_delay = min_delay
        self.max_wait = max_wait
        self.max_hosts = max_hosts
        self.max_rate = math.inf if test_range else max_rate
        self._hosts: OrderedDict[str, _Host] = OrderedDict()  # least recently used first
        self._group_of: dict[str, str] = {}  # host -> its group's name (its own if none)
        self._groups: OrderedDict[str, _Address] = OrderedDict()

    def __len__(self) -> int:
        return len(self._hosts)

    def _host(self, host: str) -> _Host:
        found = self._hosts.get(host)
        if found is not None:
            self._hosts.move_to_end(host)
            return found
        self._hosts[host] = found = _Host()
        if len(self._hosts) > self.max_hosts:
            idle = next((h for h, s in self._hosts.items() if not s.in_flight), None)
            if idle is not None:
                del self._hosts[idle]
                self._group_of.pop(idle, None)
        return found

    def _group(self, host: str) -> _Address:
        name = self._group_of.get(host, host)
        found = self._groups.get(name)
        if found is not None:
            self._groups.move_to_end(name)
            return found
        self._groups[name] = found = _Address(math.inf if self.test_range else 1 / START_DELAY)
        if len(self._groups) > self.max_hosts:
            idle = next((g for g, s in self._groups.items() if not s.in_flight), None)
            if idle is not None:
                del self._groups[idle]
        return found

    def set_group(self, host: str, group: str) -> None:
        """``host`` is paced with every other host of ``group`` (one address)."""
        self._group_of[host] = group
        h, g = self._host(host), self._group(host)
        if h.last_end is not None and (g.last_end is None or g.last_end < h.last_end):
            g.last_start, g.last_end = h.last_start, h.last_end
            g.last_duration = h.last_duration

    def set_pace(self, host: str, pace: HostPace) -> None:
        self._host(host).pace = pace

    def restore(
        self,
        host: str,
        *,
        last_end: float | None,
        last_duration: float,
        not_before: float,
        slow_downs: int,
    ) -> None:
        """Seed a host's state from the database (after a restart)."""
        h = self._host(host)
        h.last_end, h.last_duration = last_end, last_duration
        h.last_start = None if last_end is None else last_end - last_duration
        h.not_before, h.slow_downs = not_before, slow_downs
        self.set_group(host, self._group_of.get(host, host))

    def rate(self, host: str) -> float:
        """The pace of ``host``'s address now: requests a second, from the end of one to
        the start of the next (``inf``: unbounded, on a test range before any 44)."""
        return self._group(host).rate

    def own_rate(self, host: str) -> float:
        """``host``'s own pace, learned from the 44s that were its own limit (``inf``:
        none)."""
        return self._host(host).rate

    def delay(self, host: str) -> float:
        """The wait between two of ``host``'s own requests its site policy asks (never
        under ``min_delay``; 0 when no policy sets one)."""
        h = self._host(host)
        return max(h.pace.delay or 0.0, self.min_delay)

    def address_delay(self, host: str) -> float:
        """The wait from the end of the last request to ``host``'s address to the start
        of the next, whichever hosts made them: ``1 / rate``; off a test range at least
        :data:`DEFAULT_DURATION_FACTOR` times the last request's duration; never under
        ``min_delay``."""
        g = self._group(host)
        wait = max(1 / g.rate, self.min_delay)
        if not self.test_range:
            wait = max(wait, DEFAULT_DURATION_FACTOR * g.last_duration)
        return wait

    def request_cost(self, host: str) -> float:
        """Polite wall time one request to ``host`` costs: its last duration and the wait
        before the next (its own delay or its address's, the longer; a rate's interval,
        or the last duration if longer; the last 44's back-off if longer still). Known
        hosts that are slow or slowed down cost more than fast ones; a new host costs 0."""
        h = self._host(host)
        if h.last_end is None:
            return 0.0
        delay = self.delay(host)
        if h.pace.between_starts:
            own = max(delay, h.last_duration + self.min_delay)
        else:
            own = h.last_duration + delay
        shared = h.last_duration + self.address_delay(host)
        return max(own, shared, h.last_duration + max(h.backed_off, 1 / h.rate))

    def _after(self, start: float | None, end: float, delay: float, pace: HostPace) -> float:
        """When a request may start after one that ran from ``start`` to ``end``: ``delay``
        after its end, or after its start for a rate (and ``min_delay`` after its end)."""
        if pace.between_starts and start is not None:
            return max(start + delay, end + self.min_delay)
        return end + delay

    def ready_at(self, host: str) -> float | None:
        """Earliest time the next request to ``host`` may start; None if the host is
        skipped for now (see :meth:`skipped`). Marks a host skipped when the wait is absurd."""
        h = self._host(host)
        if h.skipped:
            return None
        g = self._group(host)
        now = self.clock()
        at = max(now, h.not_before)
        if h.last_end is not None:
            at = max(at, self._after(h.last_start, h.last_end, self.delay(host), h.pace))
            at = max(at, h.last_end + 1 / h.rate)
        if g.last_end is not None:
            at = max(at, g.last_end + self.address_delay(host))
        if h.pace.window_opens is not None:
            at = max(at, h.pace.window_opens(at))
        if at - now > self.max_wait:
            h.skipped = (
                f"next request allowed only in {human_duration(at - now)} "
                f"(more than {human_duration(self.max_wait)})"
            )
            return None
        return at

    def skipped(self, host: str) -> str | None:
        return self._host(host).skipped

    def in_flight(self, host: str) -> bool:
        return self._host(host).in_flight

    def start(self, host: str) -> None:
        """A request to ``host`` starts now; it must be allowed now."""
        h, g = self._host(host), self._group(host)
        if h.in_flight:
            raise RuntimeError(f"{host}: a request is already in flight")
        if g.in_flight:
            raise RuntimeError(f"{host}: a request to its address is already in flight")
        at = self.ready_at(host)
        if at is None or at > self.clock():
            raise RuntimeError(f"{host}: request started before it was allowed")
        h.in_flight = g.in_flight = True
        now = self.clock()
        h.previous_start, h.last_start = h.last_start, now
        g.previous_start, g.last_start = g.last_start, now

    def finish(
        self,
        host: str,
        duration: float,
        status: int | None,
        meta: str = "",
        *,
        slow_down: bool | None = None,
    ) -> float:
        """The request to ``host`` ended now with ``status`` (None: no answer).

        ``slow_down`` says whether the answer asks to slow down (default: status 44; the
        web's 429 and 503 pass True with their Retry-After as ``meta``). Returns the extra
        wait it imposed on the host (0 otherwise).
        """
        h, g = self._host(host), self._group(host)
        now = self.clock()
        h.in_flight = g.in_flight = False
        h.last_end = g.last_end = now
        h.last_duration = g.last_duration = duration
        if not (status == 44 if slow_down is None else slow_down):
            h.slow_downs = 0
            if status is not None:
                g.answered_by, g.answered_at = host, now
                for paced in (h, g):
                    quick = DEFAULT_DURATION_FACTOR * duration <= 1 / paced.rate
                    if quick and paced.rate < self.max_rate:
                        paced.rate = min(paced.rate + RATE_STEP, self.max_rate)
            return 0.0
        asked = asked_wait(meta)
        own_limit = (
            not math.isinf(h.rate)
            and h.previous_start is not None
            and h.last_start is not None
            and h.last_start - h.previous_start < asked
            and g.answered_by not in (None, host)
            and g.answered_at > h.previous_start
            and g.slowed_at <= h.previous_start
        )
        self._slow(h if own_limit else g)
        g.slowed_at = now
        if asked > 0:
            h.rate = min(h.rate, 1 / asked)
        h.slow_downs += 1
        wait = slow_down_wait(meta, h.slow_downs)
        h.not_before = max(h.not_before, now + wait)
        h.backed_off = wait
        return wait

    @staticmethod
    def _slow(paced: _Paced) -> None:
        """Multiplicative decrease: ``paced``'s rate multiplied by :data:`RATE_DECREASE`
        (when unbounded, that of the pace it was asked at, at most one request per
        :data:`SLOW_DOWN_BASE`)."""
        if math.isinf(paced.rate):
            period = SLOW_DOWN_BASE
            if paced.previous_start is not None and paced.last_start is not None:
                period = min(max(paced.last_start - paced.previous_start, 0.0), SLOW_DOWN_BASE)
            paced.rate = 1 / period if period > 0 else 1 / SLOW_DOWN_BASE
        paced.rate *= RATE_DECREASE

    def state(self, host: str) -> tuple[float | None, float, float, int]:
        """(last end, last duration, not before, consecutive 44s) to persist."""
        h = self._host(host)
        return h.last_end, h.last_duration, h.not_before, h.slow_downs
