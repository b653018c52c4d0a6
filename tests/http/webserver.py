"""A real HTTP server on 127.0.0.1 for the tests: the stdlib ThreadingHTTPServer in a thread.

Routes map a path (without the query) to a fixed :class:`Page` or to a function of the
request handler that writes its own answer (the hostile cases: endless bodies, slow drips,
garbage). Every request is logged (method, path with query, headers) before it is answered.
"""

from __future__ import annotations

import functools
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

#: Bounds of every hostile answer, so no test can spin forever.
HOSTILE_MAX_SECONDS = 10.0
HOSTILE_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Page:
    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "text/html; charset=utf-8"


def html(text: str) -> Page:
    return Page(body=text.encode())


def text(body: str, status: int = 200) -> Page:
    return Page(status, body.encode(), content_type="text/plain; charset=utf-8")


Route = Page | Callable[[BaseHTTPRequestHandler], None]


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    header_lines: list[tuple[str, str]]  # as received, repeats included


@dataclass
class WebServer:
    routes: dict[str, Route] = field(default_factory=dict)
    log: list[Request] = field(default_factory=list)
    port: int = 0

    def paths(self, method: str = "GET") -> list[str]:
        return [r.path for r in self.log if r.method == method]


def _handler(server: WebServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _answer(self) -> None:
            items = list(self.headers.items())
            server.log.append(Request(self.command, self.path, dict(items), items))
            route = server.routes.get(self.path.split("?", 1)[0])
            if route is None:
                route = Page(404, b"not found", content_type="text/plain")
            if callable(route):
                route(self)
                return
            self.send_response(route.status)
            self.send_header("Content-Type", route.content_type)
            self.send_header("Content-Length", str(len(route.body)))
            for name, value in route.headers:
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(route.body)

        do_GET = _answer
        do_HEAD = _answer

    return Handler


@contextmanager
def serve(routes: dict[str, Route]) -> Iterator[WebServer]:
    state = WebServer(dict(routes))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@functools.cache
def system_tls() -> ssl.SSLContext:
    """The TLS context a ``WebClient`` makes by default (``verify=True``: certifi's CA
    bundle, no environment), made once per process and shared by the tests' clients
    (``WebClient(verify=system_tls())``): loading the bundle costs some 60 ms of CPU per
    client, and the http:// tests never use it. The tests about the default client
    itself ("system CAs only") still make their own."""
    return httpx.create_ssl_context(verify=True, trust_env=False)


# --- hostile answers -------------------------------------------------------------------


def endless_body(handler: BaseHTTPRequestHandler) -> None:
    """200 with no length, then bytes until the client hangs up (bounded)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/plain")
    handler.send_header("Connection", "close")
    handler.end_headers()
    chunk = b"x" * 65536
    sent, start = 0, time.monotonic()
    try:
        while sent < HOSTILE_MAX_BYTES and time.monotonic() - start < HOSTILE_MAX_SECONDS:
            handler.wfile.write(chunk)
            sent += len(chunk)
    except OSError:
        pass
    handler.close_connection = True


def slow_drip(interval: float) -> Callable[[BaseHTTPRequestHandler], None]:
    """200, then one byte every ``interval`` seconds (bounded)."""

    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        start = time.monotonic()
        try:
            while time.monotonic() - start < HOSTILE_MAX_SECONDS:
                handler.wfile.write(b"x")
                handler.wfile.flush()
                time.sleep(interval)
        except OSError:
            pass
        handler.close_connection = True

    return answer


def silent(handler: BaseHTTPRequestHandler) -> None:
    """Read the request, then say nothing (bounded)."""
    time.sleep(1.0)
    handler.close_connection = True


def redirect(location: str, status: int = 302) -> Page:
    return Page(status, b"", (("Location", location),), "text/plain")
