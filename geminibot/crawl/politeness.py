"""When may the next request to a host start? A pure schedule with an injected clock.

Rules, per host:

- one request in flight at a time;
- between the end of one request and the start of the next, wait the site policy's delay
  (``Crawl-delay``); a rate (``Request-rate``, robots2.txt ``rate``, agents.txt
  ``limit=``: requests per time) is counted between the starts of two requests instead
  (:attr:`HostPace.between_starts`), one at a time still: 600 a minute is a request
  every 0.1 s, however long each takes (a request that takes longer is followed at once,
  or after ``min_delay``). With no policy delay, the
  rule of thumb of the robots 2.0 document: the larger of twice the last request's duration
  and :data:`DEFAULT_MIN_DELAY`. ``test_range=True`` (local test capsules only) drops that
  default to zero; a delay a policy sets is always obeyed; ``min_delay`` (``--min-delay``)
  is a floor under all of these;
- ``44 SLOW DOWN`` (and the web's 429 and 503): wait the larger of the seconds in its meta (if an integer) and an
  exponential back-off that doubles with each consecutive 44 (:data:`SLOW_DOWN_BASE`,
  reset by any other answer). The wait after which the host answered again is then
  kept as its delay, from the end of one request to the start of the next, for the
  rest of the run (the longest such wait, if it asked more than once): a capsule that
  rate-limits is not asked too soon, and answered 44, on every other request;
- visit windows: the next request waits for the window to open;
- hosts put in one group (:meth:`Politeness.set_group`: the hosts on one address) also
  wait from the group's last request: their own delay or the group's, whichever is
  shorter, the group's being the rule of thumb above (zero with ``test_range``; never
  under ``min_delay``) over the group's last request. A host that asks more time than
  that between its own requests (a ``Crawl-delay`` on a shared server) gets it from its
  own last request, but does not wait for the whole server to fall silent that long:
  counted from any request to the server it waited for a gap that a busy server never
  has, and was starved. A 44 holds back its own host only: a capsule's own 44 must not
  stall the others on its server;
- any wait longer than ``max_wait`` (:data:`MAX_WAIT`) means "skip this host for now":
  its URLs stay queued for a later run.

Times are seconds on the injected clock (the crawler uses wall-clock time so that the
schedule can be restored from the database after a restart).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from geminibot.cliutil import human_duration
from geminibot.policy.outcomes import MAX_SLOW_DOWN_SECONDS

#: With no delay from any policy: wait at least this long between requests (seconds).
DEFAULT_MIN_DELAY = 10.0
#: ... and at least this many times the last request's duration.
DEFAULT_DURATION_FACTOR = 2.0
#: First back-off after a 44 SLOW DOWN without a usable wait in its meta (seconds).
SLOW_DOWN_BASE = 1.0
#: Longest wait the crawler sits out; anything longer skips the host for now (seconds);
#: the same bound the policy core applies to a 44 on robots.txt.
MAX_WAIT = MAX_SLOW_DOWN_SECONDS
#: Hosts whose state is kept; past it the least recently used host with no request in
#: flight is forgotten (it starts again as a new host).
MAX_HOSTS = 100_000


@dataclass(frozen=True)
class HostPace:
    """What the site policy says about pace."""

    delay: float | None = None  # seconds between requests, None when no policy sets one
    between_starts: bool = False  # the delay is a rate's: counted start to start
    window_opens: Callable[[float], float] | None = None  # now -> earliest allowed time >= now


@dataclass
class _Host:
    """What the schedule knows of one host: its pace, its last request and its
    back-off."""

    pace: HostPace = field(default_factory=HostPace)
    in_flight: bool = False
    last_start: float | None = None
    last_end: float | None = None
    last_duration: float = 0.0
    not_before: float = 0.0
    slow_downs: int = 0
    backed_off: float = 0.0  # the last 44's back-off (kept after the 44s stop)
    slowed: float = 0.0  # the back-off that was enough: the host's delay from now on
    skipped: str | None = None


@dataclass
class _Group:
    """What the hosts of one group (address) share: the last request's start, end and
    duration."""

    last_start: float | None = None
    last_end: float | None = None
    last_duration: float = 0.0


def slow_down_wait(meta: str, consecutive: int) -> float:
    """Seconds to wait after the ``consecutive``-th 44 in a row (1 for the first)."""
    backoff = SLOW_DOWN_BASE * 2.0 ** max(consecutive - 1, 0)
    text = meta.strip()
    asked = float(text) if text.isdigit() else 0.0
    return max(asked, backoff)


class Politeness:
    """The per-host schedule of the module's rules: when each host's next request may
    start (:meth:`ready_at`), told of each request's start and finish."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        test_range: bool = False,
        max_wait: float = MAX_WAIT,
        min_delay: float = 0.0,
        max_hosts: int = MAX_HOSTS,
    ) -> None:
        self.clock = clock
        self.test_range = test_range
        self.min_delay = min_delay
        self.max_wait = max_wait
        self.max_hosts = max_hosts
        self._hosts: OrderedDict[str, _Host] = OrderedDict()  # least recently used first
        self._group_of: dict[str, str] = {}  # host -> its group's name
        self._groups: dict[str, _Group] = {}

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

    def set_group(self, host: str, group: str) -> None:
        """``host`` is paced with every other host of ``group`` as well (one address)."""
        self._group_of[host] = group
        self._groups.setdefault(group, _Group())

    def _group(self, host: str) -> _Group | None:
        name = self._group_of.get(host)
        return None if name is None else self._groups[name]

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

    def delay(self, host: str) -> float:
        """The wait between two requests to ``host`` (see module docstring)."""
        h = self._host(host)
        if h.pace.delay is not None:
            return max(h.pace.delay, self.min_delay, h.slowed)
        return max(self._rule_of_thumb(h.last_duration), h.slowed)

    def group_delay(self, host: str) -> float:
        """The wait between two requests to ``host``'s group, whatever their hosts: the
        rule of thumb over the group's last request (0 with ``test_range``), never under
        ``min_delay``; a host waits the shorter of this and its own :meth:`delay` from the
        group's last request (see the module docstring)."""
        group = self._group(host)
        return self._rule_of_thumb(0.0 if group is None else group.last_duration)

    def _rule_of_thumb(self, last_duration: float) -> float:
        """The wait after a request that took ``last_duration`` when no policy sets one:
        :data:`DEFAULT_MIN_DELAY` or :data:`DEFAULT_DURATION_FACTOR` times it (zero with
        ``test_range``), never under ``min_delay``."""
        if self.test_range:
            return self.min_delay
        return max(DEFAULT_MIN_DELAY, DEFAULT_DURATION_FACTOR * last_duration, self.min_delay)

    def request_cost(self, host: str) -> float:
        """Polite wall time one request to ``host`` costs: its last duration and the wait
        before the next (the delay, or the last 44's back-off if longer; a rate's
        interval, or the last duration if longer). Known hosts that
        are slow or slowed down cost more than fast ones; a new host costs 0."""
        h = self._host(host)
        if h.last_end is None:
            return 0.0
        delay = self.delay(host)
        if h.pace.between_starts:
            cost = max(delay, h.last_duration + self.min_delay)
        else:
            cost = h.last_duration + delay
        return max(cost, h.last_duration + max(h.backed_off, h.slowed))

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
        now = self.clock()
        at = max(now, h.not_before)
        delay = self.delay(host)
        if h.last_end is not None:
            at = max(at, self._after(h.last_start, h.last_end, delay, h.pace))
            at = max(at, h.last_end + h.slowed)  # a 44's lesson counts from the end
        group = self._group(host)
        if group is not None and group.last_end is not None:
            shared = self.group_delay(host)
            if delay <= shared:
                at = max(at, self._after(group.last_start, group.last_end, delay, h.pace))
            else:
                at = max(at, group.last_end + shared)
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
        h = self._host(host)
        if h.in_flight:
            raise RuntimeError(f"{host}: a request is already in flight")
        at = self.ready_at(host)
        if at is None or at > self.clock():
            raise RuntimeError(f"{host}: request started before it was allowed")
        h.in_flight = True
        h.last_start = self.clock()
        group = self._group(host)
        if group is not None:
            group.last_start = h.last_start

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
        wait it imposed (0 otherwise).
        """
        h = self._host(host)
        h.in_flight = False
        now = self.clock()
        h.last_end = now
        h.last_duration = duration
        group = self._group(host)
        if group is not None:
            group.last_end, group.last_duration = now, duration
        if not (status == 44 if slow_down is None else slow_down):
            if h.slow_downs:  # answered after this back-off: keep it between requests
                h.slowed = max(h.slowed, h.backed_off)
            h.slow_downs = 0
            return 0.0
        h.slow_downs += 1
        wait = slow_down_wait(meta, h.slow_downs)
        h.not_before = max(h.not_before, now + wait)
        h.backed_off = wait
        return wait

    def state(self, host: str) -> tuple[float | None, float, float, int]:
        """(last end, last duration, not before, consecutive 44s) to persist."""
        h = self._host(host)
        return h.last_end, h.last_duration, h.not_before, h.slow_downs
