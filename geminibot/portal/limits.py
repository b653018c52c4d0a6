"""The portal's limits, each named and documented (docs/portal.md), and per-client buckets.

Nothing here does I/O or reads a clock: times are parameters.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

#: Requests per second each web client (by address) may make, sustained ...
RATE_PER_SECOND = 2.0
#: ... and how many it may make at once after a quiet spell.
RATE_BURST = 30
#: Web clients whose buckets are remembered; the least recently seen is forgotten first.
MAX_TRACKED_CLIENTS = 10_000
#: Gemini requests in flight at once, across all hosts.
MAX_UPSTREAM = 8
#: Longest a web request waits for its turn (host pacing, a 44, a free upstream slot)
#: before the portal answers 503 with Retry-After instead (seconds).
MAX_WAIT = 15.0
#: Seconds between two requests to one capsule when no policy file sets a pace.
MIN_HOST_DELAY = 1.0
#: Largest Gemini body the portal reads (bytes); a bigger one is cut off and refused.
MAX_BODY_BYTES = 8 * 1024 * 1024
#: How long a fetched page is served from memory before it is fetched again (seconds).
PAGE_CACHE_SECONDS = 300.0
#: Bytes of page bodies kept in memory; the least recently used go first.
PAGE_CACHE_BYTES = 32 * 1024 * 1024
#: Hosts whose site policy is kept in memory (each for at most 24 h, RFC 9309).
POLICY_CACHE_HOSTS = 1024
#: Largest form body (the answer to a 10 or 11 prompt), in bytes.
MAX_FORM_BYTES = 4096
#: 44 answers to one web request sat out (each within MAX_WAIT) before giving up.
MAX_SLOW_DOWN_RETRIES = 2
#: Gemini requests in flight at once for one web client (an IPv6 client's /64) ...
MAX_UPSTREAM_PER_CLIENT = 2
#: ... and to one capsule server address, whatever the host names pointing there.
MAX_UPSTREAM_PER_ADDRESS = 2
#: Lines of a page rendered (a preformatted block's rows count); the rest is cut.
MAX_PAGE_LINES = 20_000
#: Links of a page rendered (each is resolved and rewritten); the rest is cut.
MAX_PAGE_LINKS = 5_000
#: Characters of HTML one page renders to (escaping can make six of one); the rest is cut.
MAX_PAGE_CHARS = 2_000_000
#: Pages rendered at once, each in a worker thread (never on the event loop).
RENDER_THREADS = 1
#: Bytes of an answer handed to the HTTP server at a time.
SEND_CHUNK_BYTES = 64 * 1024
#: Seconds an answer may stay unread (the client's window closed) before the connection
#: is dropped (TCP_USER_TIMEOUT on the listening socket, Linux).
SEND_TIMEOUT = 30.0
#: Bytes of a request head (request line and header fields) read; a longer one gets 431.
MAX_HEAD_BYTES = 16 * 1024
#: Seconds a connection may wait, with no request in hand, for a request's first byte ...
KEEP_ALIVE_TIMEOUT = 5.0
#: ... and a request's head may take from its first byte to its end (then it is closed).
HEAD_TIMEOUT = 10.0
#: Seconds a request body (a form) may take to arrive in full once its head has; then 408.
BODY_TIMEOUT = 10.0
#: Requests answered on one connection before it is closed.
MAX_REQUESTS_PER_CONNECTION = 1000
#: File descriptors kept for the portal's own work (Gemini requests, the crawl database,
#: threads, logs): connections may use the descriptor limit (``ulimit -n``) less these.
DESCRIPTOR_RESERVE = 128
#: Seconds requests in hand may take to be answered once the portal is told to stop.
SHUTDOWN_GRACE = 5.0
#: Capsules whose pacing (last request, 44 back-off) is remembered; least recently used
#: idle ones are forgotten first.
PACED_HOSTS = 10_000


@dataclass(frozen=True, slots=True)
class PortalLimits:
    """Every limit of the portal in one value (the module's constants are the
    defaults)."""

    rate_per_second: float = RATE_PER_SECOND
    rate_burst: int = RATE_BURST
    max_clients: int = MAX_TRACKED_CLIENTS
    max_upstream: int = MAX_UPSTREAM
    max_wait: float = MAX_WAIT
    min_host_delay: float = MIN_HOST_DELAY
    max_body_bytes: int = MAX_BODY_BYTES
    page_cache_seconds: float = PAGE_CACHE_SECONDS
    page_cache_bytes: int = PAGE_CACHE_BYTES
    policy_cache_hosts: int = POLICY_CACHE_HOSTS
    max_form_bytes: int = MAX_FORM_BYTES
    max_slow_down_retries: int = MAX_SLOW_DOWN_RETRIES
    max_upstream_per_client: int = MAX_UPSTREAM_PER_CLIENT
    max_upstream_per_address: int = MAX_UPSTREAM_PER_ADDRESS
    max_page_lines: int = MAX_PAGE_LINES
    max_page_links: int = MAX_PAGE_LINKS
    max_page_chars: int = MAX_PAGE_CHARS
    render_threads: int = RENDER_THREADS
    send_chunk_bytes: int = SEND_CHUNK_BYTES
    send_timeout: float = SEND_TIMEOUT
    paced_hosts: int = PACED_HOSTS
    max_head_bytes: int = MAX_HEAD_BYTES
    keep_alive_timeout: float = KEEP_ALIVE_TIMEOUT
    head_timeout: float = HEAD_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    max_requests_per_connection: int = MAX_REQUESTS_PER_CONNECTION
    descriptor_reserve: int = DESCRIPTOR_RESERVE
    shutdown_grace: float = SHUTDOWN_GRACE

    def __post_init__(self) -> None:
        for name in (
            "rate_per_second",
            "max_wait",
            "page_cache_seconds",
            "send_timeout",
            "keep_alive_timeout",
            "head_timeout",
            "body_timeout",
            "shutdown_grace",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.min_host_delay < 0:
            raise ValueError("min_host_delay must not be negative")
        if self.descriptor_reserve < 0:
            raise ValueError("descriptor_reserve must not be negative")
        for name in (
            "rate_burst",
            "max_clients",
            "max_upstream",
            "max_body_bytes",
            "max_upstream_per_client",
            "max_upstream_per_address",
            "max_page_lines",
            "max_page_links",
            "max_page_chars",
            "render_threads",
            "send_chunk_bytes",
            "paced_hosts",
            "max_head_bytes",
            "max_requests_per_connection",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


class ClientBuckets:
    """A token bucket per web client: ``burst`` requests at once, ``rate`` per second after.

    :meth:`take` returns None when the request may go on, else the seconds until it may.
    At most ``max_clients`` buckets are kept (least recently seen forgotten first: a
    forgotten client starts again with a full bucket, which errs on its side).
    """

    def __init__(self, rate: float, burst: int, max_clients: int = MAX_TRACKED_CLIENTS) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.max_clients = max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, client: str, now: float) -> float | None:
        tokens, last = self._buckets.pop(client, (self.burst, now))
        tokens = min(self.burst, tokens + max(0.0, now - last) * self.rate)
        wait: float | None = None
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) / self.rate
        self._buckets[client] = (tokens, now)
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        return wait
