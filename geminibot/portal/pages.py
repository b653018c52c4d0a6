"""The portal's answers as HTTP responses: where a request path leads, and each Gemini
response or failure as a page. Pure: no I/O, no clock (the application runs
:meth:`Pages.response` in a worker thread, the fuzz target calls it directly).

Every answer carries ``X-Robots-Tag: noindex, nofollow`` (:data:`COMMON_HEADERS`); every
HTML page ``<meta name="robots" content="noindex,nofollow">`` and a script-free CSP.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from geminibot.gemini.client import Response
from geminibot.gemini.gemtext import iter_gemtext
from geminibot.gemini.status import Family, known_status
from geminibot.gemini.urls import MAX_REQUEST_BYTES, parse_url, request_line
from geminibot.policy.site_policy import FetchDecision
from geminibot.policy.textlines import numbered_lines
from geminibot.portal.limits import PortalLimits
from geminibot.portal.render import (
    CSP,
    CSP_INLINE_IMAGES,
    Budget,
    Rendered,
    Strip,
    esc,
    input_form,
    link_html,
    notice,
    page,
    quote_block,
    render_gemtext,
    render_text,
    safe_lang,
)
from geminibot.urls import URL, InvalidURL

PROXY_PREFIX = "/gemini/"
#: Types a browser may show inline; any other non-text type is offered as a download.
INLINE_TYPES = re.compile(r"image/(png|jpeg|gif|webp|avif)|audio/[\w.+-]+|video/[\w.+-]+")
#: Headers of every answer (added by the application, and by the HTTP server to the
#: answers it makes itself: :class:`geminibot.portal.server.PortalServer`).
COMMON_HEADERS = [
    (b"x-robots-tag", b"noindex, nofollow"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
_HTML = [(b"content-type", b"text/html; charset=utf-8"), (b"content-security-policy", CSP.encode())]
#: Why a page was cut, for the note under it.
_CUT = {"lines": "lines", "links": "links", "characters": "characters of HTML"}


@dataclass
class HTTPResponse:
    """An HTTP answer of the portal: status, body and headers."""

    status: int
    body: bytes
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


class Pages:
    """The portal's pages for one mode: every gemini:// URL at ``/gemini/HOST/PATH``, or
    one ``capsule`` at the site root."""

    def __init__(self, limits: PortalLimits, capsule: URL | None = None) -> None:
        self.limits = limits
        self.capsule = capsule
        self.home = "/"
        self.budget = Budget(limits.max_page_lines, limits.max_page_links, limits.max_page_chars)

    # -- addresses ---------------------------------------------------------------------

    def target(self, path: str, query: str | None) -> URL | HTTPResponse:
        """The Gemini URL a request path (origin-form, still percent-encoded) shows, or
        the page that says why there is none."""
        if self.capsule is None:
            if not path.startswith(PROXY_PREFIX):
                return self.not_found()
            text = "gemini://" + path[len(PROXY_PREFIX) :]
        else:
            text = f"gemini://{self.capsule.authority}{path}"
        if query is not None:
            text += "?" + query
        return self.target_of(text)

    def target_of(self, text: str) -> URL | HTTPResponse:
        """``text`` as a Gemini URL this portal may show, or the page that says why not."""
        try:
            url = parse_url(text)
        except InvalidURL as exc:
            return self.html(400, "Not a Gemini URL", notice("Not a Gemini URL", [esc(str(exc))]))
        if self.capsule is not None and url.authority != self.capsule.authority:
            return self.not_found()  # never another capsule than the one served
        return url if _fits(url) else self.too_long()

    def href(self, url: str) -> str | None:
        """The portal address of a gemini:// URL, or None to leave the link as it is. It
        is always a path on the portal: never ``//host`` (a link to another web site)."""
        if not url.lower().startswith("gemini://"):
            return None
        try:
            target = parse_url(url)
        except InvalidURL:
            return None
        if self.capsule is None:
            return PROXY_PREFIX + target.authority + target.path_query
        if target.authority == self.capsule.authority:
            where = target.path_query
            return "/." + where if where.startswith("//") else where
        return None

    # -- pages of the portal's own -----------------------------------------------------

    def not_found(self) -> HTTPResponse:
        where = (
            f"Portal addresses look like <code>{PROXY_PREFIX}HOST/PATH</code>; "
            if self.capsule is None
            else "This address is not a page of the capsule; "
        )
        return self.html(
            404, "Not found", notice("Not found", [f'{where}<a href="{self.home}">start here</a>.'])
        )

    def too_long(self) -> HTTPResponse:
        return self.html(
            400,
            "Input too long",
            notice(
                "Input too long",
                [f"The page's Gemini request would be longer than {MAX_REQUEST_BYTES} bytes."],
            ),
        )

    def bad_request(self, why: str) -> HTTPResponse:
        return self.html(400, "Bad request", notice("Bad request", [esc(why)]))

    def html(
        self,
        status: int,
        title: str,
        body: str,
        *,
        strip: Strip | None = None,
        lang: str | None = None,
        retry_after: float | None = None,
        inline_images: bool = False,
    ) -> HTTPResponse:
        """A page; with ``inline_images`` its images may be ``data:`` URLs."""
        html = page(title, body, home=self.home, strip=strip, lang=lang)
        headers = list(_HTML)
        if inline_images:
            headers[1] = (b"content-security-policy", CSP_INLINE_IMAGES.encode())
        if retry_after is not None:
            headers.append((b"retry-after", str(max(1, round(retry_after))).encode()))
        return HTTPResponse(status, html.encode("utf-8"), headers)

    # -- a Gemini response -------------------------------------------------------------

    def response(self, response: Response, strip: Strip) -> HTTPResponse:
        """The page for a Gemini response (rendered within the page budget)."""
        family = response.family
        status = response.status
        if family is Family.INPUT:
            action = self.href(str(response.url).split("?", 1)[0]) or "/"
            form = input_form(response.meta, action, sensitive=status == 11)
            if status == 11:
                form = form.replace(
                    "<button", '<input type="hidden" name="sensitive" value="1">\n<button', 1
                )
            return self.html(200, response.meta or "Input", form, strip=strip)
        if family is Family.SUCCESS:
            return self._success(response, strip)
        if family is Family.REDIRECT:
            target = response.redirect_url or response.meta
            return self.html(
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
        return self.html(
            http, f"{status} {name}", notice(f"Gemini status {status}: {name}", lines), strip=strip
        )

    def _success(self, response: Response, strip: Strip) -> HTTPResponse:
        mime = response.mime
        essence = mime.essence if mime else "text/gemini"
        if essence.startswith("text/"):
            text = response.text()
            if essence == "text/gemini":
                rendered = render_gemtext(iter_gemtext(text, response.url), self.href, self.budget)
            else:
                rendered = render_text(text, self.budget)
            body = rendered.html + self._notes(response, rendered)
            lang = safe_lang(mime.lang if mime else None) if essence == "text/gemini" else None
            title = rendered.title or strip.gemini_url
            return self.html(200, title, body, strip=strip, lang=lang)
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

    def _notes(self, response: Response, rendered: Rendered) -> str:
        notes = ""
        if rendered.cut is not None:
            limit = {
                "lines": self.budget.lines,
                "links": self.budget.links,
                "characters": self.budget.chars,
            }[rendered.cut]
            notes += (
                f'\n<p class="notice">This portal shows at most {limit:,} '
                f"{_CUT[rendered.cut]} of a page: the rest of this one is not shown. Open it "
                "in a Gemini client to read it all.</p>"
            )
        if response.possibly_truncated:
            notes += (
                '\n<p class="notice">The capsule closed the connection without '
                "TLS close_notify: this page may be cut short.</p>"
            )
        return notes

    # -- failures ----------------------------------------------------------------------

    def refusal(self, url: URL, decision: FetchDecision, files: dict[str, bytes]) -> HTTPResponse:
        """The 403 page for a URL the capsule's rules keep from ``webproxy``: each rule
        that refused it, quoted from ``files`` (the policy files, by name)."""
        root = f"gemini://{url.authority}/"
        parts = [
            f"The capsule <code>{esc(url.authority)}</code> asks web proxies (the "
            "<code>webproxy</code> virtual agent) not to show "
            f"<code>{esc(str(url))}</code>, so this portal did not fetch it."
        ]
        for reason in decision.reasons:
            if reason.allowed:
                continue
            where = esc(reason.file) + (f", line {reason.line}" if reason.line else "")
            quoted = reason.rule
            body = files.get(reason.file)
            if body is not None and reason.line:
                quoted = dict(numbered_lines(body)).get(reason.line, quoted)
            file_link = self.href(root + reason.file) if "/" not in reason.file else None
            named = f'<a href="{esc(file_link)}">{where}</a>' if file_link else where
            parts.append(f"{named}: " + (quote_block(quoted) if quoted else "") + esc(reason.text))
        home = self.href(root)
        parts.append(
            (f'<a href="{esc(home)}">The capsule\'s home page</a> \u00b7 ' if home else "")
            + f'<a href="{esc(str(url))}">open this page in a Gemini client</a>'
        )
        return self.html(
            403,
            "Not shown: the capsule's rules",
            notice("Not shown here: the capsule's rules for web proxies", parts),
            strip=Strip(str(url)),
        )

    def not_reachable(self, url: URL, shown: str) -> HTTPResponse:
        return self.html(
            403,
            "Not reachable from this portal",
            notice(
                "Not reachable from this portal",
                [
                    f"This portal does not connect to <code>{esc(url.host)}</code>: it reaches "
                    "public addresses only (or, for local tests, this machine's), never "
                    "private or link-local ones, nor itself."
                ],
            ),
            strip=Strip(shown),
        )

    def busy(self, reason: str, retry_after: float, shown: str) -> HTTPResponse:
        return self.html(
            503,
            "Please wait",
            notice("Please wait", [esc(reason), f"Try again in {retry_after:.0f} seconds."]),
            strip=Strip(shown),
            retry_after=retry_after,
        )

    def too_large(self, why: str, shown: str) -> HTTPResponse:
        return self.html(
            502,
            "Too large",
            notice(
                "Too large for this portal",
                [
                    f"{esc(why)}. The portal reads at most {self.limits.max_body_bytes} bytes "
                    "of a page; open it in a Gemini client instead."
                ],
            ),
            strip=Strip(shown),
        )

    def fetch_failed(self, kind: str, why: str, shown: str) -> HTTPResponse:
        return self.html(
            502,
            "Could not fetch the page",
            notice("Could not fetch the page", [f"{esc(kind)}: {esc(why)}"]),
            strip=Strip(shown),
        )

    def internal_error(self) -> HTTPResponse:
        return self.html(
            500,
            "Portal error",
            notice("Portal error", ["The portal could not answer this request."]),
        )


def _fits(url: URL) -> bool:
    """Whether ``url`` makes a Gemini request within the protocol's 1,024 bytes."""
    try:
        request_line(url)
    except InvalidURL:
        return False
    return True


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
