"""robots.txt (RFC 9309) with Gemini's virtual user agents.

Parsing follows Google's open-source reference parser line for line (see docs/policy.md
for the list): lines end at CR, LF or CRLF; a UTF-8 byte order mark (or a prefix of one)
is skipped; ``#`` starts a comment anywhere; keys are matched by case-insensitive prefix,
with Google's accepted typos; a missing ``:`` is accepted when the line has exactly two
words; a ``User-agent`` line after an Allow or Disallow line starts a new group (other
lines, such as Sitemap or Crawl-delay, do not end a group); product
tokens are the leading run of ``[A-Za-z_-]`` of the value; ``*`` matches any run of
characters and a final ``$`` anchors; the longest matching pattern wins and an allow wins
a tie. Two intended differences: ``/robots.txt`` is always allowed, and the URL is
percent-encoding normalised before matching (:mod:`geminibot.policy.paths`).

Nothing here raises on any input: what the parser noticed is kept as diagnostics.
"""

from __future__ import annotations

import re

from geminibot.policy.diagnostics import Diagnostic, Level
from geminibot.policy.paths import normalise_pattern
from geminibot.policy.robots import RobotsFile
from geminibot.policy.robots_model import AgentLine, Group, Rule

#: RFC 9309 section 2.5: crawlers must parse at least 500 KiB; we parse exactly that much.
MAX_ROBOTS_BYTES = 500 * 1024
#: Google's parser keeps at most this many bytes of one line (2083 * 8, less its NUL).
MAX_LINE_BYTES = 2083 * 8 - 1

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
_PRODUCT_TOKEN = re.compile(rb"[A-Za-z_-]*")
_PRODUCT_TOKEN_TEXT = re.compile(r"[A-Za-z_-]*")
#: A template placeholder such as ``$DOMAIN`` (lint reports it as ``template-left``).
_TEMPLATE_VARIABLE = re.compile(r"\$\{?[A-Z][A-Z0-9_]{2,}")
#: What may follow a product token on a User-agent line without changing which crawler
#: it names: a version (``/1.0``), words after a space (``Kangaroo Bot``), a domain
#: suffix (``quillbot.com``). Anything else (``AI2Bot``: a digit) cuts the name itself.
_HARMLESS_SUFFIX = re.compile(r"/|\s|\.[A-Za-z]{2,}(?:\.[A-Za-z]{2,})*\Z")
_WHITESPACE = b" \t"
_BOM = b"\xef\xbb\xbf"

_USER_AGENT_KEYS = (b"user-agent", b"useragent", b"user agent")
_DISALLOW_KEYS = (b"disallow", b"dissallow", b"dissalow", b"disalow", b"diasllow", b"disallaw")
_SITEMAP_KEYS = (b"sitemap", b"site-map")
#: The fields RFC 9309 defines: (kind, canonical spelling, it lowered, accepted prefixes).
_FIELDS = tuple(
    (kind, canonical, canonical.lower().encode(), variants)
    for kind, canonical, variants in (
        ("user-agent", "User-agent", _USER_AGENT_KEYS),
        ("allow", "Allow", (b"allow",)),
        ("disallow", "Disallow", _DISALLOW_KEYS),
        ("sitemap", "Sitemap", _SITEMAP_KEYS),
    )
)
#: Fields some crawlers read that RFC 9309 does not define: noted, not warned about.
_KNOWN_EXTENSIONS = {
    b"crawl-delay": "read as the group's crawl delay (not part of RFC 9309; Google ignores it)",
    b"host": "a Yandex extension; ignored",
    b"clean-param": "a Yandex extension; ignored",
    b"request-rate": "a robots 'version 2.0' extension; read by the site policy, not here",
    b"visit-time": "a robots 'version 2.0' extension; read by the site policy, not here",
    b"robot-version": "a robots 'version 2.0' extension; read by the site policy, not here",
    b"comment": "a robots 'version 2.0' extension; ignored",
    b"noindex": "not a robots.txt field (Google stopped reading it in 2019); ignored",
}


class _Collector:
    """Accumulates groups and diagnostics while lines are read."""

    def __init__(self) -> None:
        self.groups: list[Group] = []
        self.sitemaps: list[str] = []
        self.diagnostics: list[Diagnostic] = []
        self._agents: list[AgentLine] = []
        self._rules: list[Rule] = []
        self._delay: float | None = None
        self._delay_line = 0
        self._open = False  # a group is being filled
        self._separator = False  # an Allow/Disallow line was seen since the last User-agent
        self._between: tuple[int, str] | None = None  # another line between User-agent lines

    def note(self, line: int, level: Level, code: str, message: str) -> None:
        self.diagnostics.append(Diagnostic(line, level, code, message))

    def close_group(self) -> None:
        if self._open:
            if not self._rules:
                first = self._agents[0].line
                self.note(
                    first,
                    "warning",
                    "empty-group",
                    "group has no Allow or Disallow rule: everything is allowed to the agents it names",
                )
            self.groups.append(
                Group(tuple(self._agents), tuple(self._rules), self._delay, self._delay_line)
            )
        self._agents, self._rules, self._delay, self._delay_line = [], [], None, 0
        self._open = False

    def _note_joining(self, line: int, what: str) -> None:
        """Remember a non-rule line between User-agent lines: it does not end the group."""
        if self._open and not self._separator and self._between is None:
            self._between = (line, what)

    def user_agent(self, line: int, raw: bytes) -> None:
        if self._open and self._separator:
            self.close_group()
        elif self._open and self._between is not None:
            where, what = self._between
            self.note(
                where,
                "warning",
                "group-not-closed",
                f"{what} does not end a group: the User-agent lines before it and line {line} "
                "share the rules that follow (as in Google's parser); add the rules in between",
            )
        self._between = None
        self._open = True
        self._separator = False
        value = _decode(raw)
        token = agent_token(value)
        if token == "*":
            if len(raw) > 1:
                self.note(line, "info", "agent-star-text", f"'{value}' is read as '*'")
            self._agents.append(AgentLine(line, value, "*"))
            return
        match = _PRODUCT_TOKEN.match(raw)
        if not token:
            self.note(
                line,
                "warning",
                "agent-no-token",
                f"User-agent '{value}' has no product token (letters, '-', '_'): it matches no crawler",
            )
        elif len(token) != len(raw):
            read_as = match.group(0).decode() if match else ""
            rest = value[len(read_as) :]
            if _HARMLESS_SUFFIX.match(rest):
                self.note(
                    line,
                    "info",
                    "agent-token-suffix",
                    f"User-agent '{value}' is read as '{read_as}' (what follows the "
                    "product token is ignored, as intended)",
                )
            else:
                self.note(
                    line,
                    "warning",
                    "agent-token-cut",
                    f"User-agent '{value}' is read as '{read_as}' (a product token is "
                    f"letters, '-' and '_' only): this group names every crawler called "
                    f"'{read_as}', not only '{value}'",
                )
        self._agents.append(AgentLine(line, value, token))

    def rule(self, line: int, allow: bool, raw: bytes) -> None:
        directive = "Allow" if allow else "Disallow"
        if not self._open:
            self.note(
                line,
                "error",
                "rule-outside-group",
                f"{directive} before any User-agent line belongs to no group and is ignored",
            )
            return
        self._separator = True
        pattern = normalise_pattern(raw)
        if pattern and pattern[0] not in "/*":
            self.note(
                line,
                "warning",
                "pattern-no-slash",
                f"{directive} pattern '{pattern}' does not start with '/' or '*': it can never match",
            )
        if not pattern and not allow:
            self.note(line, "info", "empty-disallow", "empty Disallow: allows everything")
        body = pattern[:-1]
        if "$" in body and not _TEMPLATE_VARIABLE.search(pattern):
            self.note(
                line,
                "warning",
                "dollar-inside",
                f"'$' inside {directive} pattern '{pattern}' is a plain character: only a "
                "'$' at the very end anchors",
            )
        self._rules.append(Rule(line, allow, pattern))
        if allow:
            slash = pattern.rfind("/")
            if slash != -1 and pattern.startswith("/index.htm", slash):
                derived = pattern[: slash + 1] + "$"
                self._rules.append(Rule(line, True, derived, derived_from=pattern))

    def other(self, line: int, key: bytes, raw: bytes) -> None:
        self._note_joining(line, "'" + _decode(key) + "'")
        lowered = key.lower()
        if lowered == b"crawl-delay":
            self._crawl_delay(line, raw)
            return
        extension = _KNOWN_EXTENSIONS.get(lowered)
        if extension is not None:
            self.note(line, "info", "extension-field", f"'{_decode(key)}': {extension}")
        else:
            self.note(
                line, "warning", "unknown-field", f"unknown field '{_decode(key)}' is ignored"
            )

    def _crawl_delay(self, line: int, raw: bytes) -> None:
        text = _decode(raw)
        try:
            delay = float(text)
        except ValueError:
            delay = -1.0
        if not (0 <= delay < float("inf")):
            self.note(
                line,
                "warning",
                "bad-crawl-delay",
                f"Crawl-delay '{text}' is not a number of seconds; ignored",
            )
        elif not self._open:
            self.note(
                line,
                "warning",
                "delay-outside-group",
                "Crawl-delay before any User-agent line is ignored",
            )
        elif self._delay is None or delay > self._delay:
            self._delay, self._delay_line = delay, line

    def sitemap(self, line: int, raw: bytes) -> None:
        self._note_joining(line, "Sitemap")
        url = _decode(raw)
        if "://" not in url:
            self.note(
                line, "warning", "sitemap-not-absolute", f"Sitemap '{url}' is not an absolute URL"
            )
        self.sitemaps.append(url)


def agent_token(value: str) -> str:
    """The product token a User-agent value (or a bot's own ``--agent``) matches as, as
    Google's parser reads it: ``*`` for ``*`` alone or followed by whitespace, else the
    leading run of ``[A-Za-z_-]`` lower-cased (``MJ12bot/1.0`` -> ``mj12bot``; "" if none)."""
    if value[:1] == "*" and (len(value) == 1 or value[1:2].isspace()):
        return "*"
    match = _PRODUCT_TOKEN_TEXT.match(value)
    return match.group(0).lower() if match else ""


def own_token(agent: str) -> tuple[str, str | None]:
    """A bot's own product token (``--agent``) as it can match a User-agent line: cut as
    :func:`agent_token` cuts a User-agent value, and a warning to show when the cut changed
    it (None for a plain token). ValueError when ``agent`` has no product token."""
    stripped = agent.strip()
    token = agent_token(stripped)
    if not token or token == "*":
        raise ValueError(
            f"--agent {agent!r} has no product token (letters, '-', '_'), e.g. --agent geminibot"
        )
    if len(token) == len(agent):
        return agent, None
    cut = stripped[: len(token)]
    return cut, (
        f"--agent '{agent}' is matched as '{cut}': a product token is the leading letters, "
        f"'-' and '_', as Google's parser reads it (a 'User-agent: {stripped}' line is read "
        f"as '{cut}' too)"
    )


def read_field(text: str) -> tuple[str, str, str] | None:
    """(kind, key as written, value) of one comment-free line, its key read as Google's
    parser reads it: ``kind`` is ``user-agent``, ``allow``, ``disallow`` or ``sitemap``
    (accepting Google's typos and key prefixes such as ``Disallowed``), else the key
    lower-cased. A missing colon is accepted when the line is exactly two words. None for
    a line that is not ``field: value``. The version 2.0 reading uses this too, so both
    engines split a file into the same groups."""
    parts = _split_key_value(text.strip().encode("utf-8", "surrogateescape"))
    if parts is None:
        return None
    key, value, _ = parts
    kind, _ = _key_kind(key.lower())
    key_text = key.decode("utf-8", "surrogateescape")
    value_text = value.decode("utf-8", "surrogateescape")
    return (kind if kind != "other" else key_text.lower()), key_text, value_text


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _to_bytes(data: bytes | str) -> bytes:
    if isinstance(data, bytes):
        return data
    try:
        return data.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return data.encode("utf-8", "surrogatepass")


def _split_key_value(line: bytes) -> tuple[bytes, bytes, bool] | None:
    """(key, value, colon_missing) of a comment-stripped, whitespace-stripped line."""
    colon = line.find(b":")
    missing = colon == -1
    if missing:
        # Google: a forgotten colon is accepted when the line is exactly two words
        # separated by spaces or tabs.
        gaps = [i for i in (line.find(b" "), line.find(b"\t")) if i != -1]
        if not gaps:
            return None
        key, value = line[: min(gaps)], line[min(gaps) :].lstrip(_WHITESPACE)
        if b" " in value or b"\t" in value:
            return None
    else:
        key, value = line[:colon], line[colon + 1 :]
    key, value = key.strip(), value.strip()
    if not key:
        return None
    return key, value, missing


def _key_kind(lowered: bytes) -> tuple[str, str | None]:
    """(kind, canonical spelling if the key was accepted as a variant of it)."""
    for kind, canonical, exact, variants in _FIELDS:
        if lowered.startswith(variants):
            return kind, None if lowered == exact else canonical
    return "other", None


def parse_robots(data: bytes | str) -> RobotsFile:
    """Parse a robots.txt body. Never raises; see the module docstring for the rules."""
    raw = _to_bytes(data)
    out = _Collector()
    size = len(raw)
    truncated = size > MAX_ROBOTS_BYTES
    if truncated:
        cut = raw[:MAX_ROBOTS_BYTES]
        last_break = max(cut.rfind(b"\n"), cut.rfind(b"\r"))
        raw = cut[: last_break + 1] if last_break >= 0 else b""
    bom = 0
    while bom < 3 and bom < len(raw) and raw[bom] == _BOM[bom]:
        bom += 1
    if bom:
        out.note(1, "info", "bom", "a UTF-8 byte order mark was skipped")
        raw = raw[bom:]
    lines = _LINE_BREAK.split(raw)
    if truncated:
        out.note(
            len(lines),
            "warning",
            "size-limit",
            f"file is {size} bytes; only the first {MAX_ROBOTS_BYTES} bytes (whole lines) are read",
        )
    for number, line in enumerate(lines, start=1):
        if not line:
            continue
        _parse_line(out, number, line)
    out.close_group()
    return RobotsFile(
        groups=tuple(out.groups),
        sitemaps=tuple(out.sitemaps),
        diagnostics=tuple(out.diagnostics),
        size=size,
        truncated=truncated,
    )


def _parse_line(out: _Collector, number: int, line: bytes) -> None:
    line = _line_content(out, number, line)
    if not line:
        return
    parts = _split_key_value(line)
    if parts is None:
        out.note(
            number, "error", "no-separator", f"'{_decode(line)}' is not 'field: value'; ignored"
        )
        return
    key, value, colon_missing = parts
    kind, canonical = _key_kind(key.lower())
    if colon_missing:
        out.note(
            number,
            "warning",
            "missing-colon",
            f"no ':' after '{_decode(key)}'; read as '{_decode(key)}: {_decode(value)}'",
        )
    if canonical is not None:
        out.note(number, "warning", "typo-accepted", f"'{_decode(key)}' is read as '{canonical}'")
    if kind == "user-agent":
        out.user_agent(number, value)
    elif kind == "allow":
        out.rule(number, True, value)
    elif kind == "disallow":
        out.rule(number, False, value)
    elif kind == "sitemap":
        out.sitemap(number, value)
    else:
        out.other(number, key, value)


def _line_content(out: _Collector, number: int, line: bytes) -> bytes:
    """The line cut at MAX_LINE_BYTES, at a NUL byte and at its comment, stripped."""
    if len(line) > MAX_LINE_BYTES:
        out.note(number, "warning", "line-too-long", f"line is cut at {MAX_LINE_BYTES} bytes")
        line = line[:MAX_LINE_BYTES]
    nul = line.find(b"\0")
    if nul != -1:
        out.note(number, "error", "nul-byte", "NUL byte: the rest of the line is ignored")
        line = line[:nul]
    hash_at = line.find(b"#")
    if hash_at != -1:
        line = line[:hash_at]
    line = line.strip()
    if line:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            out.note(number, "warning", "not-utf8", "line is not valid UTF-8")
    return line
