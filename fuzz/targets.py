"""Fuzz targets: one function of ``bytes`` per parser that reads a stranger's bytes.

Each target feeds its input to a parser and asserts the parser's contract: it raises only
its documented error types (an ``AssertionError`` or any other exception is a finding),
it keeps within its named limits, and what can be checked against itself (render then
parse, parse then print then parse, two ways to the same decision) agrees. Time and
memory limits are enforced by the fuzzer (``python -m fuzz --help``); the saved corpus in
``fuzz/corpus/TARGET/`` is replayed by ``tests/fuzz/``.

The targets take plain bytes and cut them themselves (:class:`Cursor`), so replaying a
corpus needs no fuzzing library.
"""

from __future__ import annotations

import encodings.aliases
import functools
import re
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from geminibot.crawl.page import MAX_LINKS_PER_PAGE, extract, extract_web
from geminibot.gemini.client import Response
from geminibot.gemini.gemtext import (
    HeadingLine,
    LinkLine,
    Preformatted,
    iter_links,
    parse_gemtext,
)
from geminibot.gemini.response import (
    MAX_HEADER_BYTES,
    MAX_META_BYTES,
    NEED_DATA,
    Body,
    EndOfResponse,
    ResponseHeader,
    ResponseReader,
    decode_text,
    parse_header,
    parse_mime,
)
from geminibot.gemini.tofu import Trust
from geminibot.gemini.urls import MAX_REQUEST_BYTES, parse_request, parse_url, request_line
from geminibot.http.html import MAX_HTML_CHARS, MAX_LINKS, parse_html
from geminibot.net.errors import FetchError
from geminibot.policy.agents_txt import ALWAYS_ALLOWED, MAX_AGENTS_BYTES, parse_agents
from geminibot.policy.ext20 import parse_ext20
from geminibot.policy.render import FORMATS, PolicyError, load_policy, render
from geminibot.policy.robots2 import CATEGORIES, parse_robots2, rate_seconds
from geminibot.policy.robots_model import VIRTUAL_AGENTS
from geminibot.policy.robots_parse import MAX_ROBOTS_BYTES, parse_robots
from geminibot.policy.site_policy import Bot, SitePolicy
from geminibot.portal.limits import PortalLimits
from geminibot.portal.pages import HTTPResponse, Pages
from geminibot.portal.render import LINKABLE_SCHEMES, Strip, scheme_of
from geminibot.urls import InvalidURL

Target = Callable[[bytes], None]
T = TypeVar("T")

#: Every codec name Python knows, for server-chosen charsets (text codecs and not).
CHARSETS: tuple[str, ...] = (
    "utf-8",
    *sorted(set(encodings.aliases.aliases) | set(encodings.aliases.aliases.values())),
    "rot13",
    "hex",
    "base64",
    "zlib",
    "bz2",
    "idna",
    "punycode",
    "undefined",
    "no-such-codec",
)
AGENTS = ("geminibot", "*", "googlebot", "", "Geminibot/1.0")
BOTS = (
    Bot("geminibot"),
    Bot("geminibot", ("indexer",), "search-indexer"),
    Bot("geminibot", VIRTUAL_AGENTS, "data-harvester", strict=True),
)
MOMENT = datetime(2026, 11, 23, 3, 30, tzinfo=UTC)
FIXED_PATHS = ("/", "/robots.txt", "/a", "/private/x?y=1", "/%E2%82%AC/", "/é", "/a*b$")


class Cursor:
    """Consumes fuzzer bytes: small choices from the front, the rest as the payload."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def choose(self, options: tuple[T, ...]) -> T:
        return options[self.byte() % len(options)]

    def rest(self) -> bytes:
        return self.data[self.pos :]


def _paths(texts: list[str], cursor: Cursor | None = None) -> list[str]:
    """Paths to decide: two fixed ones (a chosen third), and paths made from the first
    patterns the file itself names."""
    found = ["/", "/robots.txt"]
    if cursor is not None:
        found.append(cursor.choose(FIXED_PATHS))
    for text in texts[:4]:
        path = text.strip().split()[0] if text.strip() else "/"
        path = path.replace("*", "x").rstrip("$")
        found.append(path if path.startswith("/") else "/" + path)
        found.append(path + "/more")
    return found


def _values_after_colon(data: bytes) -> list[str]:
    text = data[:4096].decode("utf-8", "replace")
    return [line.partition(":")[2] for line in text.splitlines() if ":" in line]


VAS: tuple[tuple[str, ...], ...] = ((), ("indexer",), VIRTUAL_AGENTS)


# -- policy files ------------------------------------------------------------------------


def robots_txt(data: bytes) -> None:
    """robots.txt: never raises; the two deciding paths agree; /robots.txt is allowed.
    The first input byte picks the bot; the whole input is the file."""
    cursor = Cursor(data)
    agent, vas, strict = cursor.choose(AGENTS), cursor.choose(VAS), cursor.byte() % 2 == 1
    robots = parse_robots(data)
    assert robots.size == len(data)
    assert robots.truncated == (len(data) > MAX_ROBOTS_BYTES)
    delay = robots.crawl_delay(agent, vas, strict)
    assert delay is None or delay >= 0, delay
    for path in _paths(_values_after_colon(data), cursor):
        url = "gemini://h.test" + path
        decision = robots.decide(url, agent, vas, strict=strict)
        assert decision.allowed == robots.allowed(url, agent, vas, strict=strict), url
        if path == "/robots.txt":
            assert decision.allowed
    _site_policy(SitePolicy.from_texts("gemini", robots=data), cursor)


def ext20(data: bytes) -> None:
    """The "version 2.0" extensions: never raises; /robots.txt allowed; rates are positive;
    an allowed URL has no refusing group, a refused one is decided by a refusing group."""
    cursor = Cursor(data)
    agent, vas = cursor.choose(AGENTS), cursor.choose(VAS)
    at = cursor.choose((None, MOMENT))
    v2 = parse_ext20(data)
    rate = v2.request_interval(agent, vas, False, at)
    assert rate is None or rate.interval >= 0
    v2.visit_refusals(agent, vas, False, at)
    for path in _paths(_values_after_colon(data), cursor):
        decision = v2.decide("gemini://h.test" + path, agent, vas, at=at)
        if path == "/robots.txt":
            assert decision.allowed
        assert decision.allowed == all(g.allowed for g in decision.groups)


def robots2_txt(data: bytes) -> None:
    """robots2.txt: never raises; settings are readable; its path rules decide."""
    cursor = Cursor(data)
    parsed = parse_robots2(data)
    interval = rate_seconds(parsed.rate_interval)
    assert interval is None or interval > 0
    category = cursor.choose((None, *CATEGORIES))
    for directive in parsed.directives:
        parsed.setting(directive, category)
    robots = parsed.robots()
    for path in _paths(_values_after_colon(data), cursor):
        robots.decide("gemini://h.test" + path, "geminibot")
    _site_policy(SitePolicy.from_texts("gemini", robots2=data), cursor)


def agents_txt(data: bytes) -> None:
    """agents.txt: never raises; a fault restricts everything but the two policy files."""
    cursor = Cursor(data)
    parsed = parse_agents(data)
    if len(data) > MAX_AGENTS_BYTES:
        assert not parsed.valid
    if not parsed.valid:
        assert parsed.directives == ()
    texts = data[:4096].decode("utf-8", "replace").splitlines()
    for path in _paths([line.split(" ")[0] for line in texts[1:]], cursor):
        decision = parsed.decide("gemini://h.test" + path)
        if decision.path in ALWAYS_ALLOWED:
            assert decision.allowed
        elif not parsed.valid:
            assert not decision.allowed
        parsed.limit_interval("gemini://h.test" + path)
    interval = parsed.limit_interval()
    assert interval is None or interval[0] > 0
    _site_policy(SitePolicy.from_texts("gemini", agents=data), cursor)


def _site_policy(policy: SitePolicy, cursor: Cursor) -> None:
    bot = cursor.choose(BOTS)
    policy.may_fetch("gemini://h.test" + cursor.choose(FIXED_PATHS), bot, MOMENT)
    answer = policy.delay(bot, MOMENT, last_duration=0.5)
    assert answer.seconds >= 0
    policy.usage(bot)


def render_roundtrip(data: bytes) -> None:
    """A policy file (TOML) raises only PolicyError; each rendering parses back to the
    policy's own decisions (robots.txt) or to a valid file (agents.txt)."""
    try:
        policy = load_policy(data)
    except PolicyError:
        return
    texts: dict[str, str] = {}
    for fmt in FORMATS:
        try:
            texts[fmt] = render(policy, fmt)
        except PolicyError:  # documented: a policy agents.txt cannot express
            assert fmt == "agents"
    assert render(policy, "robots") == texts["robots"]  # deterministic
    robots = parse_robots(texts["robots"])
    assert not [d for d in robots.diagnostics if d.level == "error"], robots.diagnostics
    patterns = [r.pattern for entry in policy.agents for r in entry.rule_set.rules]
    patterns += [r.pattern for r in policy.default.rules]
    tokens = [token for entry in policy.agents for token in entry.tokens] + ["someotherbot"]
    for path in _paths(patterns):
        if path == "/robots.txt":
            continue
        for token in tokens:
            ours = policy.allows(path, token)
            theirs = robots.allowed("gemini://h.test" + path, token)
            assert ours == theirs, (path, token, ours, texts["robots"])
    if "agents" in texts:
        agents = parse_agents(texts["agents"])
        assert agents.valid, (agents.fault, texts["agents"])
    parse_robots2(texts["robots2"])


# -- Gemini ------------------------------------------------------------------------------


def gemini_response(data: bytes) -> None:
    """The response reader, fed in chunks: only FetchError; the header within its limit;
    the body no larger than the limit and equal to the bytes after the header."""
    cursor = Cursor(data)
    chunk = 1 + cursor.byte() % 64
    max_body = (None, 0, 1, 16, 1024)[cursor.byte() % 5]
    stream = cursor.rest()
    reader = ResponseReader(max_body)
    header: ResponseHeader | None = None
    body = bytearray()
    fed = 0
    try:
        while True:
            event = reader.next_event()
            if event is NEED_DATA:
                piece = stream[fed : fed + chunk]
                fed += len(piece)
                reader.receive_data(piece)
            elif isinstance(event, ResponseHeader):
                assert header is None
                header = event
                assert len(event.meta.encode()) <= MAX_META_BYTES
                header_end = stream.index(b"\r\n") + 2
                assert header_end <= MAX_HEADER_BYTES
                _header_properties(event)
            elif isinstance(event, Body):
                assert header is not None and event.data
                body += event.data
                assert max_body is None or len(body) <= max_body
            else:
                assert isinstance(event, EndOfResponse)
                break
    except FetchError:  # the documented faults: RemoteProtocolError, BodyTooLarge
        return
    assert header is not None
    if 20 <= header.status <= 29:
        assert bytes(body) == stream[header_end:]
        text = decode_text(bytes(body), header.mime)
        assert isinstance(text, str)
    else:
        assert not body


def _header_properties(header: ResponseHeader) -> None:
    header.family  # noqa: B018 - each property must be safe to read
    header.known  # noqa: B018
    header.redirect_target  # noqa: B018
    seconds = header.slow_down_seconds
    assert seconds is None or seconds >= 0
    if header.mime is not None:
        header.mime.charset  # noqa: B018
        header.mime.lang  # noqa: B018


def charset(data: bytes) -> None:
    """Any server-chosen charset on any body: decoding never raises and gives text, for
    the client, the crawler's Gemini pages and its web pages alike."""
    cursor = Cursor(data)
    name = cursor.choose(CHARSETS)
    essence = cursor.choose(("text/gemini", "text/plain", "text/html"))
    body = cursor.rest()
    meta = f"{essence}; charset={name}"
    assert isinstance(decode_text(body, parse_mime(meta)), str)
    extract("gemini://h.test/", "h.test", 20, meta, body, 0.0)
    extract_web("https://h.test/", "h.test", 200, meta, body, 0.0)
    html = b"<meta charset=" + name.encode() + b">" + body
    extract_web("https://h.test/", "h.test", 200, "text/html", html, 0.0)


BASES = ("gemini://h.test/dir/page.gmi", "gemini://[::1]:1966/", "https://h.test/a?b")


def gemtext(data: bytes) -> None:
    """text/gemini: never raises; the link stream agrees with the document and stops at
    its cap; normalised links are stable (parse, print, parse gives the same URL)."""
    cursor = Cursor(data)
    base = cursor.choose(BASES)
    cap = cursor.byte() % 8
    text = cursor.rest().decode("utf-8", "replace")
    doc = parse_gemtext(text, base)
    links = doc.links
    streamed = list(iter_links(text, base, cap))
    assert streamed == list(links[:cap])
    headings = [line for line in doc.lines if isinstance(line, HeadingLine)]
    assert doc.title == (headings[0].text if headings else None)
    for line in doc.lines:
        if isinstance(line, HeadingLine):
            assert 1 <= line.level <= 3
        if isinstance(line, Preformatted):
            assert all("\n" not in row for row in line.lines)
    for link in links:
        assert isinstance(link, LinkLine) and link.raw_url and not link.raw_url.isspace()
        if link.url.lower().startswith("gemini://"):
            try:
                url = parse_url(link.url)
            except InvalidURL:
                continue
            assert str(url) == link.url
            assert parse_url(str(url)) == url
    page = extract(base, "h.test", 20, "text/gemini", cursor.rest(), 0.0)
    assert len(page.links) <= MAX_LINKS_PER_PAGE


# -- the server's request reader -----------------------------------------------------------


@functools.cache
def _server() -> object:
    """A CapsuleServer over the bundled capsules (certificates made once, in a temp dir)."""
    from capsule_server.files import bundled_capsules, load_capsules
    from capsule_server.server import CapsuleServer
    from geminibot.gemini.server import ServerLimits

    folder = bundled_capsules()
    assert folder is not None
    certs = Path(tempfile.mkdtemp(prefix="geminibot-fuzz-certs-"))
    limits = ServerLimits(rate_burst=1 << 30, rate_per_second=1e9)
    return CapsuleServer(load_capsules(folder), certs, limits, clock=lambda: 0.0)


def capsule_request(data: bytes) -> None:
    """A request line as the server reads it: parse_request raises only InvalidURL, a
    parsed URL prints and parses back to itself, and the server's answer is a valid
    status that never names a file outside its capsule."""
    import trio

    from capsule_server.server import CapsuleServer
    from geminibot.gemini.accesslog import AccessRecord

    line = data[: MAX_REQUEST_BYTES + 3]
    try:
        url = parse_request(line)
    except InvalidURL:
        url = None
    if url is not None:
        assert parse_url(str(url)) == url
        assert url.path.startswith("/")
    server = _server()
    assert isinstance(server, CapsuleServer)
    for sni in (None, "", "percent.test"):
        answer = trio.run(server._answer, line, AccessRecord("127.0.0.1"), sni, 1965)
        assert 10 <= answer.status <= 69, answer
        assert len(answer.header) <= MAX_HEADER_BYTES
        if answer.file is not None:
            real = answer.file.resolve()
            assert any(real.is_relative_to(c.root) for c in server.capsules.values()), real


# -- HTML ----------------------------------------------------------------------------------


def html(data: bytes) -> None:
    """HTML extraction: never raises; at most MAX_LINKS links, none of a dropped scheme."""
    cursor = Cursor(data)
    base = cursor.choose(("https://h.test/a/b.html", "http://[::1]:8080/", "https://h.test"))
    body = cursor.rest()
    text = body.decode("utf-8", "replace")
    doc = parse_html(text, base)
    assert len(doc.links) <= MAX_LINKS
    assert len(doc.text) <= MAX_HTML_CHARS
    for link in doc.links:
        assert not link.url.lower().startswith(("javascript:", "data:", "mailto:"))
        assert "#" not in link.url
    page = extract_web(base, "h.test", 200, "text/html", body, 0.0)
    assert len(page.links) <= MAX_LINKS_PER_PAGE
    extract_web(base, "h.test", 200, "text/html", body, 0.0, robots_tag=text[:100])


# -- the portal ---------------------------------------------------------------------------

#: The portal's default limits, and a small budget that every input can reach the end of.
PORTAL_LIMITS = (
    PortalLimits(),
    PortalLimits(max_page_lines=7, max_page_links=3, max_page_chars=300),
)
#: Characters a page may have beyond its budget: the page around it (style sheet, header
#: strip with the URL, title, footer) and the note that says it was cut.
PAGE_FRAME_CHARS = 20_000
PORTAL_CAPSULES = (None, parse_url("gemini://cap.test/"))


def portal_page(data: bytes) -> None:
    """The portal's request path to HTML: an origin-form request target routed (all of
    Geminispace, or one capsule) to a Gemini URL, then a Gemini response to it rendered.
    A target is a URL within the request limit (in the capsule when there is one) or a
    4xx page; every answer has a status and, as HTML, stays within the page budget, has
    no script, and no link that leaves the portal unmarked (``//host``) or runs code."""
    cursor = Cursor(data)
    capsule = cursor.choose(PORTAL_CAPSULES)
    limits = cursor.choose(PORTAL_LIMITS)
    pages = Pages(limits, capsule)
    split = cursor.byte() * 4
    raw, body = cursor.rest()[:split], cursor.rest()[split:]
    path, mark, query = ("/" + raw.decode("latin-1")).partition("?")
    target = pages.target(path, query if mark else None)
    if isinstance(target, HTTPResponse):
        assert 400 <= target.status < 500, target.status
        return
    assert len(request_line(target)) <= MAX_REQUEST_BYTES + 2
    assert capsule is None or target.authority == capsule.authority
    line, _, rest = body.partition(b"\r\n")
    try:
        header = parse_header(line)
    except FetchError:
        return
    content = rest if header.status // 10 == 2 else b""
    response = Response(target, header, content, "0" * 64, Trust.NEW)
    answer = pages.response(response, Strip(str(target)))
    assert 200 <= answer.status < 600
    if (b"content-type", b"text/html; charset=utf-8") not in answer.headers:
        assert answer.body == content  # passed through as the capsule sent it
        return
    html = answer.body.decode("utf-8")
    assert len(html) <= limits.max_page_chars + PAGE_FRAME_CHARS
    assert "<script" not in html.lower()
    for href in re.findall(r'href="([^"]*)"', html):
        assert not href.startswith("//"), href
        assert scheme_of(href) in (None, *LINKABLE_SCHEMES), href


TARGETS: dict[str, Target] = {
    "robots_txt": robots_txt,
    "ext20": ext20,
    "robots2_txt": robots2_txt,
    "agents_txt": agents_txt,
    "render_roundtrip": render_roundtrip,
    "gemini_response": gemini_response,
    "charset": charset,
    "gemtext": gemtext,
    "capsule_request": capsule_request,
    "html": html,
    "portal_page": portal_page,
}
