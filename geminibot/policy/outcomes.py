"""What a robots.txt fetch means: RFC 9309 section 2.3.1 applied to Gemini and HTTP.

``fetch_outcome`` maps a status code (or a connection/TLS failure) onto one of the four
RFC 9309 results, and :meth:`FetchOutcome.policy` turns the result into the policy to obey.

=============  ====================================  ======================================
result         Gemini                                HTTP
=============  ====================================  ======================================
success        2x (20)                               2xx
redirect       3x (30, 31), at most 5 hops           3xx, at most 5 hops
unavailable    1x, 5x (51, 52, ...), 6x;             4xx except 429;
               a 6th redirect                        a 6th redirect
unreachable    4x (40-44, after the 44 wait);        429, 5xx, anything else;
               connection, TLS, protocol failure     connection, TLS, protocol failure
=============  ====================================  ======================================

"Unavailable" allows everything; "unreachable" disallows everything (but /robots.txt)
until a later fetch succeeds. HTTP 429 counts as unreachable, as Google's crawlers treat
it. A success or an unavailable result may be cached for 24 hours at most.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from geminibot.policy.robots import RobotsFile
from geminibot.policy.robots_parse import parse_robots
from geminibot.urls import Scheme

Kind = Literal["success", "redirect", "unavailable", "unreachable"]

#: RFC 9309 section 2.3.1.2: follow at least five consecutive redirects.
MAX_ROBOTS_REDIRECTS = 5
#: RFC 9309 section 2.4: do not use a cached robots.txt for more than 24 hours.
MAX_CACHE_SECONDS = 24 * 3600.0
#: How long an unreachable result stands before robots.txt is fetched again.
UNREACHABLE_RETRY_SECONDS = 600.0
#: A ``44 SLOW DOWN`` asking for more than this is taken as "skip this host for now".
MAX_SLOW_DOWN_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    """The RFC 9309 reading of one robots.txt fetch."""

    kind: Kind
    reason: str
    #: Seconds to wait before fetching robots.txt again (unreachable results), else None.
    retry_after: float | None
    #: How long this outcome may be cached, in seconds.
    cache_seconds: float
    #: For a redirect: where to (the meta line or Location header as given).
    location: str | None = None
    #: True when the server asked for a wait so long that the host should be skipped.
    skip_host: bool = False

    def policy(self, body: bytes | str | None = None) -> RobotsFile:
        """The policy to obey: the parsed body, allow-all or disallow-all."""
        if self.kind == "success":
            return parse_robots(body if body is not None else b"")
        if self.kind == "unavailable":
            return RobotsFile.allow_all(
                f"robots.txt is unavailable ({self.reason}): everything is allowed"
            )
        if self.kind == "unreachable":
            return RobotsFile.disallow_all(
                f"robots.txt is unreachable ({self.reason}): everything is disallowed until it is fetched"
            )
        raise ValueError("a redirect has no policy of its own: follow it and decide on the result")


def fetch_outcome(
    protocol: Scheme,
    status: int | None = None,
    *,
    meta: str = "",
    failure: str | None = None,
    redirects_followed: int = 0,
    retry_after: float | None = None,
) -> FetchOutcome:
    """Map a robots.txt fetch result onto RFC 9309.

    Give ``status`` (a Gemini or HTTP status code) or ``failure`` (a short description
    of a connection, TLS or protocol failure). ``meta`` is the Gemini meta line (redirect
    target, or the seconds of a 44). ``retry_after`` is HTTP's Retry-After in seconds.
    ``redirects_followed`` counts the hops already taken to reach this response.
    """
    if failure is not None or status is None:
        what = failure or "no response"
        return _unreachable(f"fetch failed: {what}", None)
    if protocol == "gemini":
        return _gemini(status, meta, redirects_followed)
    return _http(status, meta, redirects_followed, retry_after)


def _unreachable(reason: str, wait: float | None, skip: bool = False) -> FetchOutcome:
    seconds = UNREACHABLE_RETRY_SECONDS if wait is None else wait
    return FetchOutcome("unreachable", reason, seconds, seconds, skip_host=skip)


def _unavailable(reason: str) -> FetchOutcome:
    return FetchOutcome("unavailable", reason, None, MAX_CACHE_SECONDS)


def _redirect(status: int, target: str, hops: int) -> FetchOutcome:
    if hops >= MAX_ROBOTS_REDIRECTS:
        return _unavailable(
            f"status {status} after {hops} redirects (more than {MAX_ROBOTS_REDIRECTS})"
        )
    return FetchOutcome(
        "redirect", f"status {status} redirect to {target!r}", None, 0.0, location=target
    )


def _gemini(status: int, meta: str, hops: int) -> FetchOutcome:
    if not 10 <= status <= 69:
        return _unreachable(f"{status} is not a Gemini status", None)
    family = status // 10
    if family == 2:
        return FetchOutcome("success", f"status {status}", None, MAX_CACHE_SECONDS)
    if family == 3:
        return _redirect(status, meta, hops)
    if family == 4:
        if status == 44:
            wait = _seconds(meta)
            if wait is not None and wait > MAX_SLOW_DOWN_SECONDS:
                return _unreachable(
                    f"44 SLOW DOWN asks for {wait:g} s, more than {MAX_SLOW_DOWN_SECONDS:g} s: skip this host for now",
                    MAX_SLOW_DOWN_SECONDS,
                    skip=True,
                )
            return _unreachable(f"44 SLOW DOWN {meta}".strip(), wait)
        return _unreachable(f"temporary failure {status} {meta}".strip(), None)
    return _unavailable(f"status {status} {meta}".strip())


def _http(status: int, location: str, hops: int, retry_after: float | None) -> FetchOutcome:
    if 200 <= status <= 299:
        return FetchOutcome("success", f"HTTP {status}", None, MAX_CACHE_SECONDS)
    if 300 <= status <= 399:
        return _redirect(status, location, hops)
    if status == 429:
        return _unreachable("HTTP 429 Too Many Requests", retry_after)
    if 400 <= status <= 499:
        return _unavailable(f"HTTP {status}")
    return _unreachable(f"HTTP {status}", retry_after)


def _seconds(meta: str) -> float | None:
    text = meta.strip()
    return float(text) if text.isdigit() else None
