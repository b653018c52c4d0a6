"""robots2.txt v0.2.1: the AI usage layer on top of robots.txt.

Pure logic: :func:`parse_robots2` reads a file (never raises), :class:`ChainWalker` (or
:func:`resolve_chain`, with an injected fetch mapping or callable) follows ``chain:``. The
ask protocol is :mod:`geminibot.policy.robots2_ask`.

Project readings (docs/dialects.md has the reasons):

* Path rules (``User-agent``/``Allow``/``Disallow``/``Sitemap``/``Crawl-delay``) are read by
  the robots.txt engine from a copy of the file in which every other line is blanked, so
  line numbers stay true. They are global even when written inside an override block.
* Everything after ``[agent: CATEGORY]`` belongs to that block until the next block header,
  except the site-wide lines (content signals, ``market``, ``report-to``, ``chain``).
* An unknown value counts as the most restrictive value of its directive (reported). A
  directive repeated in one scope keeps its most restrictive value (reported).
* ``rate`` is requests per minute; ``polite`` leaves the pace to the bot's rule of thumb.
* ``chain:`` counts only on the last non-blank line. A chained file fills in what the files
  before it leave unset; it never overrides them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from geminibot.policy.diagnostics import Diagnostic
from geminibot.policy.ext20 import strip_comment
from geminibot.policy.robots import RobotsFile
from geminibot.policy.robots_parse import parse_robots
from geminibot.policy.textlines import numbered_lines, whole_lines_within
from geminibot.urls import resolve_reference

SPEC_VERSION = "0.2.1"
#: The ``# meta: spec-version:`` values this engine reads as written: the document's own
#: version, and the ``2.0`` its example file declares. Any other is linted (``spec-version``).
IMPLEMENTED_SPEC_VERSIONS = (SPEC_VERSION, "2.0")

#: Allowed values of each directive, from least to most restrictive. ``rate`` and the free
#: text ``market`` are handled apart.
DIRECTIVE_VALUES: dict[str, tuple[str, ...]] = {
    "crawl": ("yes", "ask", "no"),
    "read": ("yes", "ask", "no"),
    "summarise": ("yes", "ask", "no"),
    "quote": ("yes", "short-only", "no"),
    "derivative": ("yes", "ask", "no"),
    "train": ("yes", "ask", "no"),
    "store": ("yes", "session-only", "no"),
    "compete": ("yes", "no"),
    "personalise": ("yes", "no"),
    "monetise": ("yes", "ask", "no"),
    "attribution": ("none", "preferred", "required"),
    "link-back": ("none", "preferred", "required"),
    "announce": ("no", "yes"),
    "honest": ("yes",),
}
#: The directives a usage question is about, in the order answers are given.
USAGE_DIRECTIVES: tuple[str, ...] = (
    "crawl",
    "read",
    "summarise",
    "quote",
    "derivative",
    "train",
    "store",
    "compete",
    "personalise",
    "monetise",
    "attribution",
    "link-back",
    "announce",
)
ASKABLE = frozenset(d for d, values in DIRECTIVE_VALUES.items() if "ask" in values)
SIGNAL_VALUES: dict[str, tuple[str, ...] | None] = {
    "content-type": (
        "opinion",
        "news",
        "reference",
        "satire",
        "commercial",
        "research",
        "personal",
    ),
    "editorialised": ("yes", "no", "partial"),
    "ai-assisted": ("yes", "no", "partial"),
    "primary-language": None,
}
CATEGORIES: tuple[str, ...] = (
    "search-indexer",
    "ai-assistant",
    "ai-researcher",
    "code-assistant",
    "data-harvester",
    "content-generator",
    "ad-network",
    "monitoring",
)
META_KEYS = (
    "spec-version",
    "last-update",
    "update-frequency",
    "significant-change",
    "authored-by",
    "contact",
    "jurisdiction",
    "licence",
    "chain-id",
)
PATH_FIELDS = frozenset(
    {"user-agent", "useragent", "user agent", "allow", "disallow", "sitemap", "crawl-delay"}
)
_SPELLINGS = {"summarize": "summarise", "personalize": "personalise", "monetize": "monetise"}
#: The value an unknown ``rate`` counts as: 1 request per minute.
RATE_FALLBACK = "1"
#: Only the first this many bytes (whole lines) of a robots2.txt are read, as for robots.txt.
MAX_ROBOTS2_BYTES = 500 * 1024
#: Robots2 chains are followed at most this many files deep (the first file included).
MAX_CHAIN_DEPTH = 3
_LANGUAGE_TAG = re.compile(r"[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*")
_BLOCK = re.compile(r"\[\s*agent\s*:\s*([^\]]*?)\s*\]", re.IGNORECASE)
_META = re.compile(r"#\s*meta\s*:\s*([A-Za-z][A-Za-z0-9_-]*)\s*:?\s*(.*)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Setting:
    """One directive's value and where it came from (``source`` is set for chained files)."""

    value: str
    line: int
    stated: str
    source: str = ""


@dataclass(frozen=True)
class Robots2File:
    """A parsed robots2.txt: its site-wide directives, its per-category blocks, the content
    signals and what else it says. Build it with :func:`parse_robots2`."""

    directives: Mapping[str, Setting]
    blocks: Mapping[str, Mapping[str, Setting]]
    block_lines: Mapping[str, int]
    signals: Mapping[str, Setting]
    market: Setting | None
    report_to: tuple[Setting, ...]
    meta: tuple[tuple[int, str, str], ...]
    chain: Setting | None
    path_text: str
    diagnostics: tuple[Diagnostic, ...]
    _robots: list[RobotsFile] = field(default_factory=list, repr=False, compare=False)

    @property
    def chain_id(self) -> str | None:
        for _, key, value in self.meta:
            if key == "chain-id" and value:
                return value
        return None

    def setting(self, directive: str, category: str | None = None) -> Setting | None:
        """The block's value for ``category`` if it names the directive, else the global."""
        if category is not None:
            found = self.blocks.get(category, {}).get(directive)
            if found is not None:
                return found
        return self.directives.get(directive)

    def robots(self) -> RobotsFile:
        """The file's path rules, read by the robots.txt engine (line numbers kept)."""
        if not self._robots:
            self._robots.append(parse_robots(self.path_text))
        return self._robots[0]

    @property
    def rate_interval(self) -> Setting | None:
        return self.directives.get("rate")

    def with_source(self, source: str) -> Robots2File:
        def tag(s: Setting) -> Setting:
            return Setting(s.value, s.line, s.stated, source)

        return Robots2File(
            {k: tag(v) for k, v in self.directives.items()},
            {c: {k: tag(v) for k, v in b.items()} for c, b in self.blocks.items()},
            self.block_lines,
            {k: tag(v) for k, v in self.signals.items()},
            tag(self.market) if self.market else None,
            tuple(tag(s) for s in self.report_to),
            self.meta,
            tag(self.chain) if self.chain else None,
            self.path_text,
            self.diagnostics,
        )


def rate_seconds(setting: Setting | None) -> float | None:
    """Seconds between requests from a ``rate`` setting (None for ``polite`` or unset)."""
    if setting is None or setting.value == "polite":
        return None
    return 60.0 / int(setting.value)


def _most_restrictive(directive: str, a: str, b: str) -> str:
    if directive == "rate":
        if a == "polite":
            return b
        if b == "polite":
            return a
        return a if int(a) <= int(b) else b
    order = DIRECTIVE_VALUES[directive]
    return a if order.index(a) >= order.index(b) else b


def _normalise_value(directive: str, raw: str, line: int, diags: list[Diagnostic]) -> str:
    value = raw.strip().lower()
    if directive == "rate":
        if value == "polite" or (value.isdigit() and value.isascii() and int(value) > 0):
            return str(int(value)) if value != "polite" else value
        diags.append(
            Diagnostic(
                line,
                "warning",
                "unknown-value",
                f"rate: {raw.strip()[:30]!r} is not a positive integer or 'polite'; "
                f"read as the most restrictive, {RATE_FALLBACK} request per minute",
            )
        )
        return RATE_FALLBACK
    values = DIRECTIVE_VALUES[directive]
    if value in values:
        return value
    strictest = values[-1]
    diags.append(
        Diagnostic(
            line,
            "warning",
            "unknown-value",
            f"{directive}: {raw.strip()[:30]!r} is not one of {' | '.join(values)}; "
            f"read as the most restrictive value, {strictest}",
        )
    )
    return strictest


def parse_robots2(data: bytes | str) -> Robots2File:
    """Parse a robots2.txt. Never raises; every finding is a diagnostic with its line."""
    data, cut = whole_lines_within(data, MAX_ROBOTS2_BYTES)
    lines = numbered_lines(data)
    last_line = max((n for n, t in lines if t.strip()), default=0)
    reader = _Robots2Reader(len(lines), last_line)
    if cut:
        reader.diags.append(
            Diagnostic(
                len(lines) + 1,
                "warning",
                "size-limit",
                f"only the first {MAX_ROBOTS2_BYTES} bytes (whole lines) are read",
            )
        )
    for number, raw in lines:
        reader.read(number, raw)
    return reader.result()


class _Robots2Reader:
    """What parse_robots2 has read so far; :meth:`read` takes the lines in order."""

    def __init__(self, line_count: int, last_line: int) -> None:
        self.last_line = last_line  # the last non-blank line: the only place for chain:
        self.diags: list[Diagnostic] = []
        self.directives: dict[str, Setting] = {}
        self.blocks: dict[str, dict[str, Setting]] = {}
        self.block_lines: dict[str, int] = {}
        self.signals: dict[str, Setting] = {}
        self.market: Setting | None = None
        self.report_to: list[Setting] = []
        self.meta: list[tuple[int, str, str]] = []
        self.chain: Setting | None = None
        self.path_lines = [""] * line_count
        self.scope: dict[str, Setting] = self.directives
        self.scope_name = "global"

    def result(self) -> Robots2File:
        path_text = "\n".join(self.path_lines) + "\n"
        robots = parse_robots(path_text)
        all_diags = sorted([*self.diags, *robots.diagnostics], key=lambda d: d.line)
        return Robots2File(
            self.directives,
            self.blocks,
            self.block_lines,
            self.signals,
            self.market,
            tuple(self.report_to),
            tuple(self.meta),
            self.chain,
            path_text,
            tuple(all_diags),
            [robots],
        )

    def read(self, number: int, raw: str) -> None:
        stripped = raw.strip()
        if stripped.startswith("#"):
            if m := _META.fullmatch(stripped):
                self._meta(number, m.group(1).lower(), m.group(2).strip())
            return
        text = strip_comment(raw)[0].strip()
        if not text:
            return
        if block := _BLOCK.fullmatch(text):
            self._block(number, block.group(1).lower())
            return
        name, sep, value = text.partition(":")
        key = name.strip().lower()
        value = value.strip()
        if not sep:
            self.diags.append(
                Diagnostic(number, "error", "no-colon", f"not 'key: value': {text[:60]!r}")
            )
            return
        if key in PATH_FIELDS:
            self._path_rule(number, raw)
            return
        if key in _SPELLINGS:
            self.diags.append(
                Diagnostic(number, "info", "spelling", f"{key}: read as {_SPELLINGS[key]}:")
            )
            key = _SPELLINGS[key]
        self._field(number, key, value)

    def _meta(self, number: int, key: str, value: str) -> None:
        self.meta.append((number, key, value))
        if key == "spec-version" and value.lower().lstrip("v") not in IMPLEMENTED_SPEC_VERSIONS:
            self.diags.append(
                Diagnostic(
                    number,
                    "warning",
                    "spec-version",
                    f"spec-version {value!r} is not the one this engine implements "
                    f"(v{SPEC_VERSION}, whose example declares 2.0): every directive is "
                    f"read as v{SPEC_VERSION} defines it",
                )
            )
        elif key not in META_KEYS:
            self.diags.append(
                Diagnostic(number, "info", "unknown-meta", f"meta key {key!r} is not in the spec")
            )

    def _block(self, number: int, category: str) -> None:
        """``[agent: CATEGORY]``: the directives that follow are that category's."""
        if category not in CATEGORIES:
            self.diags.append(
                Diagnostic(
                    number,
                    "warning",
                    "unknown-category",
                    f"[agent: {category}] is not a standard category; its block applies to no bot",
                )
            )
        elif category in self.blocks:
            self.diags.append(
                Diagnostic(
                    number,
                    "warning",
                    "repeated-block",
                    f"second [agent: {category}] block merged into the first",
                )
            )
        self.scope = self.blocks.setdefault(category, {})
        self.block_lines.setdefault(category, number)
        self.scope_name = f"[agent: {category}]"

    def _path_rule(self, number: int, raw: str) -> None:
        """A robots.txt path line, kept for the robots.txt engine (always global)."""
        self.path_lines[number - 1] = raw
        if self.scope is not self.directives:
            self.diags.append(
                Diagnostic(
                    number,
                    "info",
                    "path-rule-in-block",
                    f"path rules are global; this one is not limited to {self.scope_name}",
                )
            )

    def _field(self, number: int, key: str, value: str) -> None:
        """A ``key: value`` line other than a path rule (``key`` in its spec spelling)."""
        if key == "chain":
            self._chain(number, value)
        elif key in DIRECTIVE_VALUES or key == "rate":
            self._directive(number, key, value)
        elif key in SIGNAL_VALUES:
            self._signal(number, key, value)
        elif key == "market":
            self.market = Setting(value, number, value)
        elif key == "report-to":
            if value:
                self.report_to.append(Setting(value, number, value))
        else:
            self.diags.append(
                Diagnostic(
                    number, "warning", "unknown-directive", f"unknown directive {key!r} ignored"
                )
            )

    def _chain(self, number: int, value: str) -> None:
        if number != self.last_line:
            self.diags.append(
                Diagnostic(
                    number, "warning", "chain-not-last", "chain: is not the last line; ignored"
                )
            )
        elif not value:
            self.diags.append(
                Diagnostic(number, "warning", "empty-chain", "chain: without a URL; ignored")
            )
        else:
            self.chain = Setting(value, number, value)

    def _directive(self, number: int, key: str, value: str) -> None:
        """A usage directive or ``rate``; repeated in one scope, the most restrictive counts."""
        normal = _normalise_value(key, value, number, self.diags)
        previous = self.scope.get(key)
        if previous is not None:
            normal = _most_restrictive(key, previous.value, normal)
            self.diags.append(
                Diagnostic(
                    number,
                    "warning",
                    "repeated-directive",
                    f"{key}: repeated in {self.scope_name} (line {previous.line}); the most restrictive value, {normal}, counts",
                )
            )
            if normal == previous.value:
                return
        self.scope[key] = Setting(normal, number, value)

    def _signal(self, number: int, key: str, value: str) -> None:
        allowed = SIGNAL_VALUES[key]
        low = value.lower()
        ok = _LANGUAGE_TAG.fullmatch(value) is not None if allowed is None else low in allowed
        if not ok:
            expected = "an IETF language tag" if allowed is None else " | ".join(allowed)
            self.diags.append(
                Diagnostic(
                    number,
                    "warning",
                    "unknown-value",
                    f"{key}: {value[:30]!r} is not {expected}; signal ignored",
                )
            )
            return
        self.signals[key] = Setting(value if allowed is None else low, number, value)


# --------------------------------------------------------------------------------------
# Chains
# --------------------------------------------------------------------------------------

ChainFetch = Callable[[str], bytes | str | None] | Mapping[str, bytes | str | None]


@dataclass(frozen=True, slots=True)
class ChainLink:
    """One file of a chain and the URL it came from."""

    url: str
    file: Robots2File


@dataclass(frozen=True, slots=True)
class Chain:
    """The files collected along a chain, first (the site's own) first, and why it ended."""

    links: tuple[ChainLink, ...]
    stop: str

    def setting(self, directive: str, category: str | None = None) -> Setting | None:
        """The first file that says something wins (its block, then its global value)."""
        for link in self.links:
            found = link.file.setting(directive, category)
            if found is not None:
                return found
        return None

    def signal(self, name: str) -> Setting | None:
        for link in self.links:
            if name in link.file.signals:
                return link.file.signals[name]
        return None


class ChainWalker:
    """The chain rules as a sans-I/O state machine, for callers that fetch asynchronously.

    ``next_url()`` names the file to fetch next (None: the chain is finished), ``feed(url,
    body)`` hands over its body (None when the fetch failed), ``result()`` gives the
    :class:`Chain`. At most :data:`MAX_CHAIN_DEPTH` files are collected (the first
    included); a file whose chain-id, or lacking one its URL, was already seen ends the
    chain; what was collected is kept.
    """

    def __init__(self, first: Robots2File, url: str) -> None:
        self._links = [ChainLink(url, first.with_source(url))]
        self._seen_urls = {url}
        self._seen_ids = {first.chain_id} if first.chain_id else set()
        self._current, self._current_url = first, url
        self._stop: str | None = None
        self._pending: str | None = None
        self._advance()

    def _advance(self) -> None:
        if self._current.chain is None:
            self._stop = "end of chain"
        elif len(self._links) >= MAX_CHAIN_DEPTH:
            self._stop = f"depth limit of {MAX_CHAIN_DEPTH} files reached"
        else:
            target = resolve_reference(self._current_url, self._current.chain.value)
            if target in self._seen_urls:
                self._stop = f"loop: {target} was already read"
            else:
                self._seen_urls.add(target)
                self._pending = target

    def next_url(self) -> str | None:
        return self._pending

    def feed(self, url: str, body: bytes | str | None) -> None:
        if url != self._pending:
            raise ValueError(f"expected the body of {self._pending!r}, got {url!r}")
        self._pending = None
        if body is None:
            self._stop = f"could not fetch {url}"
            return
        parsed = parse_robots2(body)
        if parsed.chain_id is not None and parsed.chain_id in self._seen_ids:
            self._stop = f"loop: chain-id {parsed.chain_id!r} was already read"
            return
        if parsed.chain_id:
            self._seen_ids.add(parsed.chain_id)
        self._links.append(ChainLink(url, parsed.with_source(url)))
        self._current, self._current_url = parsed, url
        self._advance()

    def result(self) -> Chain:
        stop = self._stop if self._stop is not None else "unfinished: chain not fetched further"
        return Chain(tuple(self._links), stop)


def resolve_chain(first: Robots2File, url: str, fetch: ChainFetch) -> Chain:
    """Follow ``chain:`` lines from ``first`` (fetched from ``url``) with a synchronous
    ``fetch(url)`` or mapping ``fetch[url]`` (None: the fetch failed). See ChainWalker."""
    walker = ChainWalker(first, url)
    while (target := walker.next_url()) is not None:
        walker.feed(target, fetch.get(target) if isinstance(fetch, Mapping) else fetch(target))
    return walker.result()
