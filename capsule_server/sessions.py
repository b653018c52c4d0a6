"""A client's session on the range: open while the range has told it to stay away.

Every answer tells a client how long to stay away from the host that gave it:

- a ``44``: the seconds of its meta (one without a number), as the judge reads it, and for a
  ``44`` after a ``44`` from the same host at least twice the time between the two (the
  exponential back-off the Gemini specification asks for, which doubles each wait);
- any other answer: the host's pace, the longest of its identities
  (:meth:`SitePolicy.delay`: Crawl-delay, Request-rate, robots2 ``rate``, agents.txt
  ``limit=``; never the rule of thumb, which no file states);
- a ``Visit-time`` window shut for one of its identities: until it opens.

A client's session stays open until the last of those waits has ended and ``idle`` more
seconds have passed with no request (the margin), so a bot that sits out a ``44`` is
still the same session when it comes back. A wait longer than :data:`MAX_HELD_WAIT` (a
window that opens in the evening, an absurd ``44``) does not hold the session: a bot is
expected to skip the host for now, as the crawler does. Times are the range's clock
(seconds), given by the caller; the waits are read at the log's time of the request.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from capsule_server.files import Capsule
from capsule_server.judge import HostPolicy, Identity, record_time, wait_seconds
from geminibot.gemini.accesslog import AccessRecord
from geminibot.policy.outcomes import MAX_SLOW_DOWN_SECONDS

#: The longest wait (seconds) that holds a session open: the longest the crawler sits out
#: (:data:`geminibot.policy.outcomes.MAX_SLOW_DOWN_SECONDS`); a longer one means "skip
#: this host for now".
MAX_HELD_WAIT = MAX_SLOW_DOWN_SECONDS


def _pace(policy: HostPolicy, url: str, idents: Sequence[Identity], at: dt.datetime) -> float:
    """The host's longest pace (seconds between requests) over ``idents``, 0 if none."""
    found = (policy.site.delay(i.bot, at, url=url) for i in idents)
    return max((d.seconds for d in found if d.file), default=0.0)


def told_wait(
    record: AccessRecord,
    policy: HostPolicy | None,
    idents: Sequence[Identity],
    since_44: float | None = None,
) -> float:
    """Seconds ``record``'s answer told its client to stay away from the host (0 when
    nothing did, or when the wait is longer than :data:`MAX_HELD_WAIT`). ``since_44``:
    for a ``44``, the seconds since the previous answer from the host, if a ``44`` too."""
    if record.status == 44:
        seconds = max(wait_seconds(record.meta), 2 * (since_44 or 0.0))
        return seconds if seconds <= MAX_HELD_WAIT else 0.0  # NaN too
    moment = record_time(record)
    if policy is None or moment is None or record.host is None:
        return 0.0
    at = dt.datetime.fromtimestamp(moment, dt.UTC)
    url = f"gemini://{record.host}{record.path or '/'}"
    waits = [_pace(policy, url, idents, at)]
    for ident in idents:
        opens = policy.site.next_allowed(url, ident.bot, at)
        if opens is not None:
            waits.append((opens - at).total_seconds())
    return max((w for w in waits if w <= MAX_HELD_WAIT), default=0.0)


@dataclass(slots=True)
class Session:
    """When a client was last seen, and until when it was told to stay away (the range's
    clock)."""

    last_seen: float
    told_until: float = 0.0
    #: When the host's last answer was a ``44``, by host (only the capsules' hosts: a
    #: bounded set).
    slow_downs: dict[str, float] = field(default_factory=dict)

    def saw(
        self,
        record: AccessRecord,
        now: float,
        policies: Mapping[str, HostPolicy],
        idents: Sequence[Identity],
    ) -> None:
        """A request of the client, answered at ``now``."""
        self.last_seen = now
        host = record.host or ""
        policy = policies.get(host)
        previous = self.slow_downs.pop(host, None)
        if policy is not None and record.status == 44:
            self.slow_downs[host] = now
        since = now - previous if previous is not None else None
        wait = told_wait(record, policy, idents, since)
        self.told_until = max(self.told_until, now + wait)

    def ends(self, idle: float) -> float:
        """When the session is over: every wait ended and ``idle`` seconds passed with no
        request."""
        return max(self.last_seen, self.told_until) + idle

    def over(self, now: float, idle: float) -> bool:
        return now >= self.ends(idle)


def longest_wait(
    capsules: Mapping[str, Capsule],
    policies: Mapping[str, HostPolicy],
    idents: Sequence[Identity],
    at: dt.datetime,
) -> tuple[float, str]:
    """The longest wait that holds a session (:data:`MAX_HELD_WAIT` at most) a capsule
    asks for at ``at``, and what asks for it (``host answers 44 60 on /path``, ``host asks
    for Crawl-delay: 2``): a ``44`` it answers, or its pace. (0, "") when none does."""
    longest, what = 0.0, ""
    for host, capsule in sorted(capsules.items()):
        for path, special in sorted(capsule.config.special.items()):
            seconds = wait_seconds(special.meta) if special.status == 44 else 0.0
            if longest < seconds <= MAX_HELD_WAIT:
                longest, what = seconds, f"{host} answers 44 {special.meta.strip()} on {path}"
        policy = policies.get(host)
        if policy is None:
            continue
        url = f"gemini://{host}/"
        for ident in idents:
            delay = policy.site.delay(ident.bot, at, url=url)
            if delay.file and longest < delay.seconds <= MAX_HELD_WAIT:
                longest, what = delay.seconds, f"{host} asks for {delay.rule}"
    return longest, what
