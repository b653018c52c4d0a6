"""The service's metrics in the Prometheus text format (the official ``prometheus-client``
library), served over HTTP on loopback by default.

Three sources:

- the supervisor: each component up or not, its restarts;
- what the components write (the supervisor hands each JSON line over,
  :meth:`Metrics.on_event`): the search capsule's access log (one object per request:
  requests by status, and their latency as a histogram), the crawl's summary at the end
  of each run (pages, requests, errors, revisits, unchanged and gone pages) and each
  computation of link authority (its outcome, its seconds);
- the store, read at most every :data:`STORE_TTL` seconds when scraped: pages, URLs
  queued, and freshness (:mod:`geminibot.index.freshness`: page ages, share past their
  revisit time, fetched and gone in the last day, the index's lag, the age of link
  authority).

The HTTP listener answers ``GET``/``HEAD /metrics`` only (any other path: 404), each
scrape on a thread of its own, at most :data:`METRICS_THREADS` at once (a connection
beyond them is closed at once), each given :data:`METRICS_TIMEOUT` seconds to send its
request and read the answer; nothing is written per request.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from geminibot.service.supervisor import ComponentState

#: Seconds the store's figures are kept between two scrapes (reading them scans pages).
STORE_TTL = 30.0
#: Latency buckets of a search request (seconds): the target is 0.1 at the 95th percentile.
SEARCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
#: Fields of the crawl's run summary counted (``geminibot crawl --json``).
CRAWL_COUNTS = (
    "pages",
    "requests",
    "errors",
    "refused",
    "revisits",
    "unchanged",
    "not_found",
    "gone",
)
#: Scrapes answered at once, each on a thread; a connection beyond them is closed at once.
METRICS_THREADS = 4
#: Seconds a scrape may take to send its request, and to read each part of the answer.
METRICS_TIMEOUT = 10.0
#: The one path answered.
METRICS_PATH = "/metrics"


class _StateCollector(Collector):
    """The Prometheus collector of the components' states (up, restarts)."""

    def __init__(self, states: dict[str, ComponentState]) -> None:
        self.states = states

    def collect(self) -> Iterator[Any]:
        up = GaugeMetricFamily(
            "geminibot_component_up", "Whether a component runs now", labels=["component"]
        )
        restarts = CounterMetricFamily(
            "geminibot_component_restarts",
            "Times a component died and was started again",
            labels=["component"],
        )
        for name, state in self.states.items():
            up.add_metric([name], 1.0 if state.running else 0.0)
            restarts.add_metric([name], float(state.restarts))
        yield up
        yield restarts


class _StoreCollector(Collector):
    """The Prometheus collector of the crawl store's figures, read at most once per
    :data:`STORE_TTL`."""

    def __init__(self, read: Callable[[], dict[str, Any]], clock: Callable[[], float]) -> None:
        self.read = read
        self.clock = clock
        self._cached: tuple[float, dict[str, Any]] | None = None

    def _figures(self) -> dict[str, Any]:
        now = self.clock()
        if self._cached is None or now - self._cached[0] > STORE_TTL:
            self._cached = (now, self.read())
        return self._cached[1]

    def collect(self) -> Iterator[Any]:
        try:
            data = self._figures()
        except Exception:  # the store is busy or gone: no store figures this scrape
            return
        for key, help_text in (
            ("pages", "Pages in the store"),
            ("queued", "URLs queued in the frontier"),
            ("live_pages", "Pages whose URL answered at its last fetch"),
            ("age_median_seconds", "Median time since a live page was fetched"),
            ("age_p90_seconds", "90th percentile of the time since a live page was fetched"),
            ("past_revisit_share", "Share of live pages past their revisit time"),
            ("fetched_last_day", "Pages fetched in the last 24 hours"),
            ("changed_last_day", "Pages whose content changed in the last 24 hours"),
            ("gone_last_day", "Pages out of the index (gone, missing, host vanished), last 24 h"),
            ("not_found_last_day", "URLs that began to answer not found (51/404), last 24 h"),
            ("index_lag", "Store changes the search index has not applied yet"),
            ("authority_age_seconds", "Time since link authority was last computed"),
        ):
            value = data.get(key)
            if value is not None:
                yield GaugeMetricFamily(f"geminibot_{key}", help_text, value=float(value))


class Metrics:
    """The service's registry; :meth:`serve` starts its HTTP listener."""

    def __init__(
        self,
        states: dict[str, ComponentState],
        read_store: Callable[[], dict[str, Any]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_StateCollector(states))
        self.registry.register(_StoreCollector(read_store, clock))
        self.search_requests = Counter(
            "geminibot_search_requests",
            "Requests the search capsule answered, by status",
            ["status"],
            registry=self.registry,
        )
        self.search_seconds = Histogram(
            "geminibot_search_request_seconds",
            "Time from a search capsule connection's accept to its close",
            buckets=SEARCH_BUCKETS,
            registry=self.registry,
        )
        self.crawl = Counter(
            "geminibot_crawl", "Crawl counts summed over its runs", ["what"], registry=self.registry
        )
        self.crawl_runs = Counter(
            "geminibot_crawl_runs", "Crawl runs ended", registry=self.registry
        )
        self.authority_runs = Counter(
            "geminibot_authority_runs",
            "Scheduled computations of link authority, by outcome",
            ["outcome"],
            registry=self.registry,
        )
        self.authority_seconds = Gauge(
            "geminibot_authority_seconds",
            "How long the last computation of link authority took",
            registry=self.registry,
        )

    def on_event(self, component: str, event: dict[str, Any]) -> None:
        """A JSON line a component wrote: an access log record of the search capsule, the
        crawl's summary of a run, or a computation of link authority."""
        if component == "search" and "duration" in event:
            duration = event.get("duration")
            if isinstance(duration, int | float):
                self.search_seconds.observe(float(duration))
            self.search_requests.labels(str(event.get("status", "none"))).inc()
        elif component == "crawl" and "pages_per_second" in event:
            self.crawl_runs.inc()
            for key in CRAWL_COUNTS:
                value = event.get(key)
                if isinstance(value, int) and value > 0:
                    self.crawl.labels(key).inc(value)
        elif component == "authority":
            self._authority(event)

    def _authority(self, event: dict[str, Any]) -> None:
        """One line of ``index authority --every --json``: computed, skipped or failed."""
        seconds = event.get("seconds")
        if isinstance(seconds, int | float):
            self.authority_runs.labels("computed").inc()
            self.authority_seconds.set(float(seconds))
        elif "skipped" in event:
            self.authority_runs.labels("skipped").inc()
        elif "error" in event:
            self.authority_runs.labels("failed").inc()

    def serve(
        self,
        host: str,
        port: int,
        *,
        threads: int = METRICS_THREADS,
        timeout: float = METRICS_TIMEOUT,
    ) -> int:
        """Listen on ``host``:``port`` (a thread); returns the port (0 picks one)."""
        registry = self.registry

        class Handler(_MetricsHandler):
            """The handler of this registry, with this timeout."""

        Handler.registry = registry
        Handler.timeout = timeout
        server = _BoundedServer((host, port), Handler, threads)
        threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
        return int(server.server_address[1])


class _MetricsHandler(BaseHTTPRequestHandler):
    """``/metrics`` in the Prometheus text format; 404 for any other path."""

    registry: CollectorRegistry
    timeout = METRICS_TIMEOUT
    server_version = "geminibot-metrics"
    sys_version = ""

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, *, body: bool) -> None:
        if urlsplit(self.path).path != METRICS_PATH:
            status, content, kind = 404, b"Not found: metrics are at /metrics\n", "text/plain"
        else:
            status, content, kind = 200, generate_latest(self.registry), CONTENT_TYPE_LATEST
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        if body:
            self.wfile.write(content)

    def log_message(self, format: str, *args: Any) -> None:
        """Nothing per request (a scrape every few seconds; a client's bytes never)."""


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most ``threads`` at once: a connection beyond them is
    closed unanswered."""

    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: type[_MetricsHandler], threads: int
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._slots = threading.BoundedSemaphore(threads)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()
