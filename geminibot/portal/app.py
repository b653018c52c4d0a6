"""The portal as an ASGI application (hypercorn serves it on trio; tests call it directly).

Routes (see docs/portal.md):

- ``/robots.txt``: the portal's own, keeping web crawlers out of proxied Gemini content;
- without a capsule: ``/`` is a form for a ``gemini://`` URL (``/?url=...`` redirects),
  ``/gemini/HOST[:PORT]/PATH[?QUERY]`` shows ``gemini://HOST[:PORT]/PATH[?QUERY]``;
- with ``capsule``: ``/PATH[?QUERY]`` shows that path of the one capsule, as Kineto does;
- with a crawl database (``crawl_db``): ``/check`` is a form, ``/check?q=URL|HOST`` says why
  a page is in the crawl's index or not, or what it knows of a capsule
  (:mod:`geminibot.why`).

A ``POST`` to a page address answers a ``10``/``11`` prompt: the form's ``input`` becomes
the Gemini query. Every response carries ``X-Robots-Tag: noindex, nofollow``; every HTML
page ``<meta name="robots" content="noindex,nofollow">`` and a script-free CSP.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote

import trio

from geminibot.gemini.client import Response
from geminibot.gemini.gemtext import parse_gemtext
from geminibot.gemini.status import Family, known_status
from geminibot.gemini.urls import MAX_REQUEST_BYTES, parse_url
from geminibot.net.errors import BodyTooLarge, FetchError
from geminibot.policy.textlines import numbered_lines
from geminibot.portal.limits import ClientBuckets
from geminibot.portal.render import (
    CSP,
    Strip,
    esc,
    input_form,
    link_html,
    notice,
    page,
    quote_block,
    render_gemtext,
    safe_lang,
)
from geminibot.portal.upstream import Busy, Refused, Upstream, UpstreamRefused
from geminibot.urls import URL, InvalidURL
from geminibot.why import BadTarget
from geminibot.why import check as why_check
from geminibot.why.render import html_form, html_fragment

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

#: The portal's own robots.txt: no web crawler should index proxied Gemini content.
PORTAL_ROBOTS = (
    b"# geminibot portal: proxied Gemini content is not for web crawlers.\n"
    b"User-agent: *\nDisallow: /\n"
)
PROXY_PREFIX = "/gemini/"
#: Types a browser may show inline; any other non-text type is offered as a download.
INLINE_TYPES = re.compile(r"image/(png|jpeg|gif|webp|avif)|audio/[\w.+-]+|video/[\w.+-]+")
_COMMON = [
    (b"x-robots-tag", b"noindex, nofollow"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
_HTML = [(b"content-type", b"text/html; charset=utf-8"), (b"content-security-policy", CSP.encode())]


@dataclass
class HTTPResponse:
    status: int
    body: bytes
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # raw, still percent-encoded
    query: str | None
    client: str
    form: dict[str, list[str]] = field(default_factory=dict)


class PortalApp:
    def __init__(
        self,
        upstream: Upstream,
        *,
        capsule: URL | None = None,
        clock: Callable[[], float] = trio.current_time,
        crawl_db: Any = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.upstream = upstream
        #: A crawl database's connection (either store's) for ``/check``, or None.
        self.crawl_db = crawl_db
        self.wall_clock = wall_clock
        self.capsule = capsule
        self.clock = clock
        limits = upstream.limits
        self.buckets = ClientBuckets(limits.rate_per_second, limits.rate_burst, limits.max_clients)
        self.home = "/"

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
        if scope["type"] != "http":
            return
        method = str(scope["method"]).upper()
        response = await self._respond(scope, receive, method)
        headers = [*_COMMON, *response.headers]
        headers.append((b"content-length", str(len(response.body)).encode()))
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        body = b"" if method == "HEAD" else response.body
        await send({"type": "http.response.body", "body": body})

    async def _respond(self, scope: Scope, receive: Receive, method: str) -> HTTPResponse:
        raw = scope.get("raw_path") or str(scope.get("path", "/")).encode()
        path = bytes(raw).decode("latin-1")
        query_bytes = bytes(scope.get("query_string") or b"")
        query = query_bytes.decode("latin-1") if query_bytes else None
        client = scope.get("client")
        who = str(client[0]) if client else "?"
        wait = self.buckets.take(who, self.clock())
        if wait is not None:
            return self._html(
                429,
                "Too many requests",
                notice(
                    "Too many requests",
                    [
                        f"This portal allows {self.upstream.limits.rate_per_second:g} requests a "
                        f"second per client. Please wait {wait:.0f} s."
                    ],
                ),
                retry_after=wait,
            )
        form: dict[str, list[str]] = {}
        if method == "POST":
            body = await _read_body(receive, self.upstream.limits.max_form_bytes)
            if body is None:
                return self._html(
                    413,
                    "Input too long",
                    notice(
                        "Input too long",
                        [f"A form may send at most {self.upstream.limits.max_form_bytes} bytes."],
                    ),
                )
            form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        elif method not in ("GET", "HEAD"):
            response = self._html(405, "Method not allowed", notice("Method not allowed", []))
            response.headers.append((b"allow", b"GET, HEAD, POST"))
            return response
        return await self.handle(Request(method, path, query, who, form))

    # -- routing -----------------------------------------------------------------------

    async def handle(self, request: Request) -> HTTPResponse:
        if request.path == "/robots.txt":
            return HTTPResponse(
                200, PORTAL_ROBOTS, [(b"content-type", b"text/plain; charset=utf-8")]
            )
        if request.path == "/favicon.ico":
            return HTTPResponse(404, b"", [(b"content-type", b"text/plain")])
        if request.path == "/check" and self.crawl_db is not None:
            return self._check(request)
        if self.capsule is None:
            if request.path == "/":
                return self._home(request)
            if not request.path.startswith(PROXY_PREFIX):
                return self._html(
                    404,
                    "Not found",
                    notice(
                        "Not found",
                        [
                            f"Portal addresses look like <code>{PROXY_PREFIX}HOST/PATH</code>; "
                            f'<a href="{self.home}">start here</a>.'
                        ],
                    ),
                )
            text = "gemini://" + request.path[len(PROXY_PREFIX) :]
        else:
            text = f"gemini://{self.capsule.authority}{request.path}"
        if request.query is not None:
            text += "?" + request.query
        try:
            url = parse_url(text)
        except InvalidURL as exc:
            return self._html(400, "Not a Gemini URL", notice("Not a Gemini URL", [esc(str(exc))]))
        if request.method == "POST":
            return await self._answer_prompt(url, request)
        return await self.show(url)

    def _home(self, request: Request) -> HTTPResponse:
        wanted = parse_qs(request.query or "").get("url", [""])[0].strip()
        if wanted:
            if not wanted.lower().startswith("gemini://"):
                wanted = "gemini://" + wanted if "://" not in wanted else wanted
            try:
                url = parse_url(wanted)
            except InvalidURL as exc:
                return self._html(
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
            target = self.href(str(url)) or "/"
            return HTTPResponse(303, b"", [(b"location", target.encode("ascii", "replace"))])
        body = (
            "<h1>Gemini in your web browser</h1>\n"
            "<p>Type a <code>gemini://</code> address to read it here.</p>\n"
            '<form method="get" action="/">\n<label for="url">Gemini URL</label>\n'
            '<input id="url" name="url" type="url" placeholder="gemini://example.org/" '
            'required>\n<button type="submit">Go</button>\n</form>\n'
            "<p>Before each page this portal reads the capsule's robots.txt (and "
            "robots2.txt, agents.txt) and obeys the rules for the <code>webproxy</code> "
            "virtual agent: a page a capsule keeps from web proxies is refused, with the "
            "rule that says so. It paces its requests to each capsule and slows down when "
            "a capsule answers 44.</p>"
        )
        if self.crawl_db is not None:
            body += (
                '\n<p><a href="/check">Why is a page in the search index, or not?</a> '
                "What the crawl knows of a capsule, and the policy line behind each page.</p>"
            )
        return self._html(200, "geminibot portal", body)

    def _check(self, request: Request) -> HTTPResponse:
        asked = parse_qs(request.query or "").get("q", [""])[0].strip()
        if not asked:
            return self._html(200, "Check a page", "<h1>Check a page</h1>\n" + html_form())
        try:
            answer = why_check(self.crawl_db, asked, self.wall_clock())
        except BadTarget as exc:
            return self._html(
                400,
                "Cannot check that",
                html_form(asked) + notice("Cannot check that", [esc(str(exc))]),
            )
        body = "<h1>Check</h1>\n" + html_form(asked) + "\n" + html_fragment(answer, self.href)
        return self._html(200, "Check", body)

    def href(self, url: str) -> str | None:
        """The portal address of a gemini:// URL, or None to leave the link as it is."""
        if not url.lower().startswith("gemini://"):
            return None
        try:
            target = parse_url(url)
        except InvalidURL:
            return None
        if self.capsule is None:
            return PROXY_PREFIX + target.authority + target.path_query
        if target.authority == self.capsule.authority:
            return target.path_query
        return None

    # -- showing a page ----------------------------------------------------------------

    async def _answer_prompt(self, url: URL, request: Request) -> HTTPResponse:
        answer = request.form.get("input", [""])[0]
        sensitive = request.form.get("sensitive", [""])[0] == "1"
        base = str(url).split("?", 1)[0]
        target_text = f"{base}?{quote(answer, safe='')}"
        if len(target_text.encode()) > MAX_REQUEST_BYTES:
            return self._html(
                400,
                "Input too long",
                notice(
                    "Input too long",
                    [f"The answer makes a Gemini request longer than {MAX_REQUEST_BYTES} bytes."],
                ),
            )
        target = parse_url(target_text)
        if not sensitive:
            where = self.href(str(target)) or "/"
            return HTTPResponse(303, b"", [(b"location", where.encode("ascii", "replace"))])
        return await self.show(target, hide_query=True)

    async def show(self, url: URL, *, hide_query: bool = False) -> HTTPResponse:
        shown = str(url).split("?", 1)[0] if hide_query else str(url)
        try:
            response = await self.upstream.page(url, cache=not hide_query)
        except Refused as refused:
            return self._refusal(url, refused)
        except Busy as busy:
            return self._html(
                503,
                "Please wait",
                notice(
                    "Please wait",
                    [esc(busy.reason), f"Try again in {busy.retry_after:.0f} seconds."],
                ),
                strip=Strip(shown),
                retry_after=busy.retry_after,
            )
        except UpstreamRefused as exc:
            return self._html(
                403,
                "Not reachable from this portal",
                notice("Not reachable from this portal", [esc(str(exc))]),
                strip=Strip(shown),
            )
        except BodyTooLarge as exc:
            limit = self.upstream.limits.max_body_bytes
            return self._html(
                502,
                "Too large",
                notice(
                    "Too large for this portal",
                    [
                        f"{esc(str(exc))}. The portal reads at most {limit} bytes of a page; "
                        "open it in a Gemini client instead."
                    ],
                ),
                strip=Strip(shown),
            )
        except FetchError as exc:
            return self._html(
                502,
                "Could not fetch the page",
                notice("Could not fetch the page", [f"{esc(type(exc).__name__)}: {esc(str(exc))}"]),
                strip=Strip(shown),
            )
        final = str(response.url).split("?", 1)[0] if hide_query else str(response.url)
        strip = Strip(
            final, response.certificate, response.trust.value, response.previous_certificate
        )
        result = self._render(response, strip)
        if hide_query:  # the answer to an 11 prompt: nothing of it kept by the browser
            result.headers.append((b"cache-control", b"no-store"))
        return result

    def _render(self, response: Response, strip: Strip) -> HTTPResponse:
        family = response.family
        status = response.status
        if family is Family.INPUT:
            action = self.href(str(response.url).split("?", 1)[0]) or "/"
            form = input_form(response.meta, action, sensitive=status == 11)
            if status == 11:
                form = form.replace(
                    "<button", '<input type="hidden" name="sensitive" value="1">\n<button', 1
                )
            return self._html(200, response.meta or "Input", form, strip=strip)
        if family is Family.SUCCESS:
            return self._success(response, strip)
        if family is Family.REDIRECT:
            target = response.redirect_url or response.meta
            return self._html(
                200,
                "Redirect",
                notice(
                    "This page moved elsewhere",
                    [
                        f"The capsule redirects ({status}) to another kind of address, which this "
                        f"portal does not follow: {link_html(target, '', self.href)}"
                    ],
                ),
                strip=strip,
            )
        known = known_status(status)
        name = known.name.replace("_", " ").lower() if known else "unknown status"
        http = _HTTP_STATUS.get(status, 502 if family is not Family.CLIENT_CERTIFICATE else 403)
        lines = [f"The capsule answered <strong>{status}</strong> ({esc(name)})."]
        if response.meta:
            lines.append(f"Its message: {quote_block(response.meta)}")
        if family is Family.CLIENT_CERTIFICATE:
            lines.append(
                "This page needs a client certificate; this portal never sends one. "
                "Open it in a Gemini client."
            )
        return self._html(
            http, f"{status} {name}", notice(f"Gemini status {status}: {name}", lines), strip=strip
        )

    def _success(self, response: Response, strip: Strip) -> HTTPResponse:
        mime = response.mime
        essence = mime.essence if mime else "text/gemini"
        if essence == "text/gemini":
            doc = parse_gemtext(response.text(), base=response.url)
            body = render_gemtext(doc, self.href)
            if response.possibly_truncated:
                body += (
                    '\n<p class="notice">The capsule closed the connection without '
                    "TLS close_notify: this page may be cut short.</p>"
                )
            title = doc.title or strip.gemini_url
            return self._html(
                200, title, body, strip=strip, lang=safe_lang(mime.lang if mime else None)
            )
        if essence.startswith("text/"):
            body = f'<pre tabindex="0">{esc(response.text())}</pre>'
            return self._html(200, strip.gemini_url, body, strip=strip)
        headers = [
            (b"content-type", essence.encode("ascii")),
            (
                b"content-security-policy",
                b"default-src 'none'; img-src 'self'; media-src 'self'; sandbox",
            ),
        ]
        if not INLINE_TYPES.fullmatch(essence):
            name = re.sub(r"[^A-Za-z0-9._-]", "_", response.url.path.rsplit("/", 1)[-1]) or "file"
            headers.append((b"content-disposition", f'attachment; filename="{name}"'.encode()))
        return HTTPResponse(200, response.body, headers)

    def _refusal(self, url: URL, refused: Refused) -> HTTPResponse:
        root = f"gemini://{refused.host}/"
        parts = [
            f"The capsule <code>{esc(refused.host)}</code> asks web proxies (the "
            "<code>webproxy</code> virtual agent) not to show "
            f"<code>{esc(str(url))}</code>, so this portal did not fetch it."
        ]
        for reason in refused.decision.reasons:
            if reason.allowed:
                continue
            where = esc(reason.file) + (f", line {reason.line}" if reason.line else "")
            text = reason.rule
            body = refused.files.get(reason.file)
            if body is not None and reason.line:
                lines = dict(numbered_lines(body))
                text = lines.get(reason.line, text)
            file_link = self.href(root + reason.file) if "/" not in reason.file else None
            named = f'<a href="{esc(file_link)}">{where}</a>' if file_link else where
            parts.append(f"{named}: " + (quote_block(text) if text else "") + esc(reason.text))
        home = self.href(root)
        parts.append(
            (f'<a href="{esc(home)}">The capsule\'s home page</a> \u00b7 ' if home else "")
            + f'<a href="{esc(str(url))}">open this page in a Gemini client</a>'
        )
        return self._html(
            403,
            "Not shown: the capsule's rules",
            notice("Not shown here: the capsule's rules for web proxies", parts),
            strip=Strip(str(url)),
        )

    def _html(
        self,
        status: int,
        title: str,
        body: str,
        *,
        strip: Strip | None = None,
        lang: str | None = None,
        retry_after: float | None = None,
    ) -> HTTPResponse:
        html = page(title, body, home=self.home, strip=strip, lang=lang)
        headers = list(_HTML)
        if retry_after is not None:
            headers.append((b"retry-after", str(max(1, round(retry_after))).encode()))
        return HTTPResponse(status, html.encode("utf-8"), headers)


#: HTTP status for each Gemini failure (others: 502 Bad Gateway; 6x: 403).
_HTTP_STATUS = {
    40: 502,
    41: 503,
    42: 502,
    43: 502,
    44: 503,
    50: 502,
    51: 404,
    52: 410,
    53: 502,
    59: 400,
}


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, or None when it is longer than ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        data = bytes(message.get("body", b""))
        size += len(data)
        if size > limit:
            return None
        chunks.append(data)
        if not message.get("more_body", False):
            return b"".join(chunks)
