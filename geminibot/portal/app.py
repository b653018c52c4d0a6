"""The portal as an ASGI application (:mod:`geminibot.portal.server` serves it; tests call it
directly).

Routes (see docs/portal.md):

- the portal's own pages (:attr:`PortalApp.routes`, by exact path): ``/robots.txt``,
  keeping web crawlers out of proxied Gemini content, and without a capsule ``/``, a form
  for a ``gemini://`` URL (``/?url=...`` redirects), and ``/about``, how the portal behaves;
- without a capsule: ``/gemini/HOST[:PORT]/PATH[?QUERY]`` shows
  ``gemini://HOST[:PORT]/PATH[?QUERY]``;
- with ``capsule``: ``/PATH[?QUERY]`` shows that path of the one capsule, as Kineto does;
- with a crawl database (``checks``, its reads off the event loop): ``/check`` is a form, ``/check?q=URL|HOST`` says why
  a page is in the crawl's index or not, or what it knows of a capsule, its census
  (``geminibot census --host``) with it (:mod:`geminibot.why`); ``/feeds``, ``/new`` (``/new?q=QUERY``), ``/newest``,
  ``/random`` and ``/new.atom`` say what is new (:class:`~geminibot.portal.whatsnew.WhatsNew`);
  ``/census``, the latest census kept, charts inline (:mod:`geminibot.portal.census`).

Only origin-form request targets (``/...``) are answered. A ``POST`` to a page address
answers a ``10``/``11`` prompt: the form's ``input`` becomes the Gemini query.

A Gemini page is shown by the :class:`~geminibot.portal.proxy.PageProxy` (fetched once
for all who ask for it at once, rendered, kept rendered in the page cache); an answer is
handed to the server in slices of ``send_chunk_bytes``. Every failure is a page; a fault
of the portal itself is a 500 page and one message on stderr.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import parse_qs, quote

import trio

from geminibot.cliutil import say
from geminibot.gemini.urls import parse_url
from geminibot.index.query import QueryError, parse_query
from geminibot.net.addresses import address_key
from geminibot.portal.census import CensusPage
from geminibot.portal.limits import ClientBuckets
from geminibot.portal.pages import COMMON_HEADERS, HTTPResponse, Pages
from geminibot.portal.proxy import PageProxy
from geminibot.portal.render import esc, notice
from geminibot.portal.search import MAX_PAGE, find_page, results_html, search_form
from geminibot.portal.upstream import Upstream
from geminibot.portal.whatsnew import WhatsNew
from geminibot.store.reads import ReadsBusy
from geminibot.urls import URL, InvalidURL
from geminibot.why import BadTarget
from geminibot.why.reads import CheckReads
from geminibot.why.render import html_form, html_fragment

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

#: The portal's own robots.txt: no web crawler should index proxied Gemini content.
PORTAL_ROBOTS = (
    b"# geminibot portal: proxied Gemini content is not for web crawlers.\n"
    b"User-agent: *\nDisallow: /\n"
)


@dataclass(frozen=True)
class Request:
    """An HTTP request as the portal's handlers see it (method, path, query, client,
    form)."""

    method: str
    path: str  # raw, still percent-encoded
    query: str | None
    client: str  # its rate key: the address, an IPv6 client's /64
    form: dict[str, list[str]] = field(default_factory=dict)


Handler = Callable[[Request], Awaitable[HTTPResponse]]


class PortalApp:
    """The portal's ASGI application: routes each HTTP request to a page, within the
    limits."""

    def __init__(
        self,
        upstream: Upstream,
        *,
        capsule: URL | None = None,
        clock: Callable[[], float] = trio.current_time,
        checks: CheckReads | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.upstream = upstream
        self.wall_clock = wall_clock
        self.capsule = capsule
        self.clock = clock
        limits = upstream.limits
        self.limits = limits
        self.pages = Pages(limits, capsule)
        self.buckets = ClientBuckets(limits.rate_per_second, limits.rate_burst, limits.max_clients)
        #: Gemini pages shown: fetched once for all who ask, rendered, cached.
        self.proxy = PageProxy(upstream, self.pages, clock)
        #: Headers the application adds to every answer.
        self.headers = list(COMMON_HEADERS)
        #: The portal's own pages, by exact path, before any Gemini address.
        self.routes: dict[str, Handler] = {
            "/robots.txt": self._robots,
            "/favicon.ico": self._no_icon,
        }
        if capsule is None:
            self.routes["/"] = self._home
            self.routes["/about"] = self._about
        self._census_page = CensusPage(self.pages, self.proxy.renderers, self.clock)
        self.checks = checks

    @property
    def checks(self) -> CheckReads | None:
        """A crawl database's reads for ``/check`` (off the event loop), or None."""
        return self._checks

    @checks.setter
    def checks(self, checks: CheckReads | None) -> None:
        self._checks = checks
        new = None if checks is None else WhatsNew(self.pages, checks.reads, self.wall_clock)
        for path in ("/check", "/search", *WhatsNew.PATHS):
            if new is None:
                self.routes.pop(path, None)
            elif path == "/check":
                self.routes[path] = self._check
            elif path == "/search":
                self.routes[path] = self._search
            else:
                self.routes[path] = partial(_whatsnew, new, path)
        if checks is None:
            self.routes.pop("/census", None)
        else:
            self.routes["/census"] = partial(self._census_page.answer, checks.reads)

    @property
    def home(self) -> str:
        return self.pages.home

    def href(self, url: str) -> str | None:
        return self.pages.href(url)

    # -- ASGI --------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] == "websocket":  # another server's: refused (403)
            await receive()
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            return
        method = str(scope["method"]).upper()
        try:
            response = await self._respond(scope, receive, method)
        except Exception as exc:  # a fault of the portal: a page and a message, no traceback
            say(sys.stderr, f"geminibot portal: {method} {_target(scope)}: internal error: {exc!r}")
            response = self.pages.internal_error()
        if _ambiguous_framing(scope):  # RFC 9112, 6.3: answer, then close the connection
            response.headers.append((b"connection", b"close"))
        await self._send(send, response, method)

    async def _send(self, send: Send, response: HTTPResponse, method: str) -> None:
        """The answer in slices: a client that reads slowly holds one slice, not a copy."""
        body = b"" if method == "HEAD" else response.body
        headers = [*self.headers, *response.headers]
        headers.append((b"content-length", str(len(response.body)).encode()))
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        view = memoryview(body)
        chunk = self.limits.send_chunk_bytes
        for start in range(0, len(view), chunk):
            more = start + chunk < len(view)
            piece = bytes(view[start : start + chunk])
            await send({"type": "http.response.body", "body": piece, "more_body": more})
        if not view:
            await send({"type": "http.response.body", "body": b""})

    async def _respond(self, scope: Scope, receive: Receive, method: str) -> HTTPResponse:
        path = _target(scope)
        query_bytes = bytes(scope.get("query_string") or b"")
        query = query_bytes.decode("latin-1") if query_bytes else None
        client = scope.get("client")
        who = address_key(str(client[0])) if client else "?"
        wait = self.buckets.take(who, self.clock())
        if wait is not None:
            return self.pages.html(
                429,
                "Too many requests",
                notice(
                    "Too many requests",
                    [
                        f"This portal allows {self.limits.rate_per_second:g} requests a "
                        f"second per client. Please wait {wait:.0f} s."
                    ],
                ),
                retry_after=wait,
            )
        if not path.startswith("/"):
            return self.pages.bad_request("This portal answers request targets of the form /PATH.")
        if _upgrade(scope) == "websocket":
            return self.pages.bad_request("This portal does not speak WebSocket.")
        form: dict[str, list[str]] = {}
        if method == "POST":
            body = await _read_body(receive, self.limits.max_form_bytes)
            if body is TOO_LONG:
                return self.pages.html(
                    413,
                    "Input too long",
                    notice(
                        "Input too long",
                        [f"A form may send at most {self.limits.max_form_bytes} bytes."],
                    ),
                )
            if body is INCOMPLETE:
                return self.pages.html(
                    408,
                    "Form not received",
                    notice(
                        "Form not received",
                        [
                            f"The form did not arrive within "
                            f"{self.limits.body_timeout:g} seconds. Please send it again."
                        ],
                    ),
                )
            assert isinstance(body, bytes)
            form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        elif method not in ("GET", "HEAD"):
            response = self.pages.html(405, "Method not allowed", notice("Method not allowed", []))
            response.headers.append((b"allow", b"GET, HEAD, POST"))
            return response
        return await self.handle(Request(method, path, query, who, form))

    # -- routing -----------------------------------------------------------------------

    async def handle(self, request: Request) -> HTTPResponse:
        own = self.routes.get(request.path)
        if own is not None:
            return await own(request)
        target = self.pages.target(request.path, request.query)
        if isinstance(target, HTTPResponse):
            return target
        if request.method == "POST":
            return await self._answer_prompt(target, request)
        return await self.proxy.show(target, request.client)

    async def _robots(self, request: Request) -> HTTPResponse:
        return HTTPResponse(200, PORTAL_ROBOTS, [(b"content-type", b"text/plain; charset=utf-8")])

    async def _no_icon(self, request: Request) -> HTTPResponse:
        return HTTPResponse(404, b"", [(b"content-type", b"text/plain")])

    async def _home(self, request: Request) -> HTTPResponse:
        wanted = parse_qs(request.query or "").get("url", [""])[0].strip()
        if wanted:
            if not wanted.lower().startswith("gemini://"):
                wanted = "gemini://" + wanted if "://" not in wanted else wanted
            try:
                url = parse_url(wanted)
            except InvalidURL as exc:
                return self.pages.html(
                    400,
                    "Not a Gemini URL",
                    notice(
                        "Not a Gemini URL",
                        [
                            f"<code>{esc(wanted)}</code>: {esc(str(exc))}",
                            "This portal shows <code>gemini://</code> URLs only.",
                        ],
                    ),
                )
            return _see_other(self.href(str(url)) or "/")
        body = (
            "<h1>Gemini in your web browser</h1>\n"
            "<p>Type a <code>gemini://</code> address to read it here.</p>\n"
            '<form method="get" action="/">\n<label for="url">Gemini URL</label>\n'
            '<input id="url" name="url" type="url" placeholder="gemini://example.org/" '
            'required>\n<button type="submit">Go</button>\n</form>\n'
        )
        if self.checks is not None:
            body += "<p>Or search the pages the crawler has indexed:</p>\n" + search_form() + "\n"
        return self.pages.html(200, "geminibot portal", body + self._about_text())

    def _about_text(self) -> str:
        """How the portal behaves (its home page and ``/about``), and ``/check`` and the
        pages of what is new when it has a crawl database."""
        text = (
            "<p>Before each page this portal reads the capsule's robots.txt (and "
            "robots2.txt, agents.txt) and obeys the rules for the <code>webproxy</code> "
            "virtual agent: a page a capsule keeps from web proxies is refused, with the "
            "rule that says so. It paces its requests to each capsule and slows down when "
            "a capsule answers 44.</p>"
        )
        if self.checks is not None:
            text += (
                '\n<p><a href="/check">Why is a page in the search index, or not?</a> '
                "What the crawl knows of a capsule, and the policy line behind each page; "
                "a capsule's health as the crawl saw it: errors by kind, gone pages, "
                "redirects, robots.txt as fetched, its certificate, and its pages in and out "
                "of the index.</p>"
                '\n<p><a href="/census">Geminispace in figures</a>: the crawl\'s census.</p>'
                '\n<p>What is new: <a href="/new">the past week\'s entries</a> of the feeds '
                'the crawl found (<a href="/new.atom">Atom</a>), <a href="/feeds">the known '
                'feeds</a>, <a href="/newest">new capsules</a>, <a href="/random">a random '
                "page</a>.</p>"
            )
        return text

    async def _about(self, request: Request) -> HTTPResponse:
        body = "<h1>About this portal</h1>\n" + self._about_text()
        return self.pages.html(200, "About this portal", body)

    async def _check(self, request: Request) -> HTTPResponse:
        asked = parse_qs(request.query or "").get("q", [""])[0].strip()
        if not asked:
            return self.pages.html(200, "Check a page", "<h1>Check a page</h1>\n" + html_form())
        assert self.checks is not None  # (routed only with them)
        try:
            answer = await self.checks.answer(asked, self.wall_clock())
        except BadTarget as exc:
            return self.pages.html(
                400,
                "Cannot check that",
                html_form(asked) + notice("Cannot check that", [esc(str(exc))]),
            )
        except ReadsBusy as exc:
            wait = f"Try again in {exc.retry_after} seconds."
            return self.pages.html(
                503,
                "Please wait",
                html_form(asked) + notice("Please wait", [esc(str(exc)), wait]),
                retry_after=exc.retry_after,
            )
        body = "<h1>Check</h1>\n" + html_form(asked) + "\n" + html_fragment(answer, self.href)
        return self.pages.html(200, "Check", body)

    async def _search(self, request: Request) -> HTTPResponse:
        """``/search?q=QUERY&p=N``: the crawl database searched (:mod:`.search`)."""
        params = parse_qs(request.query or "")
        asked = params.get("q", [""])[0].strip()
        page = params.get("p", ["1"])[0]
        if not asked:
            return self.pages.html(200, "Search", "<h1>Search</h1>\n" + search_form())
        try:
            number = int(page) if page.isdigit() else 0
            if not 1 <= number <= MAX_PAGE:
                raise QueryError(f"no page {page[:20]}: pages go from 1 to {MAX_PAGE}")
            parse_query(asked)
        except QueryError as exc:
            body = search_form(asked) + notice("Cannot search for that", [esc(str(exc))])
            return self.pages.html(400, "Cannot search for that", body)
        assert self.checks is not None  # (routed only with them)
        try:
            found, more = await self.checks.reads.run(partial(find_page, asked, number))
        except QueryError as exc:
            body = search_form(asked) + notice("Cannot search for that", [esc(str(exc))])
            return self.pages.html(400, "Cannot search for that", body)
        except ReadsBusy as exc:
            wait = f"Try again in {exc.retry_after} seconds."
            body = search_form(asked) + notice("Please wait", [esc(str(exc)), wait])
            return self.pages.html(503, "Please wait", body, retry_after=exc.retry_after)
        body = results_html(asked, found, number, more, self.href)
        return self.pages.html(200, f"Search: {asked}", body)

    # -- showing a page ----------------------------------------------------------------

    async def _answer_prompt(self, url: URL, request: Request) -> HTTPResponse:
        answer = request.form.get("input", [""])[0]
        sensitive = request.form.get("sensitive", [""])[0] == "1"
        base = str(url).split("?", 1)[0]
        target = self.pages.target_of(f"{base}?{quote(answer, safe='')}")
        if isinstance(target, HTTPResponse):
            return target
        if not sensitive:
            return _see_other(self.href(str(target)) or "/")
        return await self.proxy.show(target, request.client, hide_query=True)


def _target(scope: Scope) -> str:
    raw = scope.get("raw_path") or str(scope.get("path", "/")).encode()
    return bytes(raw).decode("latin-1")


async def _whatsnew(pages: WhatsNew, path: str, request: Request) -> HTTPResponse:
    return await pages.answer(path, request.query)


def _see_other(where: str) -> HTTPResponse:
    return HTTPResponse(303, b"", [(b"location", where.encode("ascii", "replace"))])


def _ambiguous_framing(scope: Scope) -> bool:
    """An HTTP/1 request with both Content-Length and Transfer-Encoding (a smuggling
    attempt, or a broken client): RFC 9112 asks the server to close after answering."""
    if scope.get("http_version") not in ("1.0", "1.1"):
        return False
    names = {bytes(name).lower() for name, _ in scope.get("headers", [])}
    return b"content-length" in names and b"transfer-encoding" in names


def _upgrade(scope: Scope) -> str:
    """The protocol an HTTP/1.1 request asks to switch to (``Upgrade``), lower case, or
    ''. The portal switches to none: the request is answered as it is."""
    for name, value in scope.get("headers", []):
        if bytes(name).lower() == b"upgrade":
            return bytes(value).decode("latin-1").strip().lower()
    return ""


#: What :func:`_read_body` answers for a body over its limit, and for one that did not
#: arrive in full (the server's ``body_timeout``, or the client gone).
TOO_LONG = object()
INCOMPLETE = object()


async def _read_body(receive: Receive, limit: int) -> bytes | object:
    """The request body, or :data:`TOO_LONG` or :data:`INCOMPLETE`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return INCOMPLETE
        data = bytes(message.get("body", b""))
        size += len(data)
        if size > limit:
            return TOO_LONG
        chunks.append(data)
        if not message.get("more_body", False):
            return b"".join(chunks)
