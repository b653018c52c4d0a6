"""Linting a policy file: what each dialect's parser noticed, what only a reader of the
whole file can see (a template left in, a User-agent that is nearly a known crawler's
token), and a fix hint on every warning and error.

Levels: an *error* is a line the parser ignores or cannot read as intended; a *warning* a
line read, but probably not as meant; an *info* something worth knowing that changes
nothing (``Name/1.0`` read as ``Name``). Pure: the known crawlers' tokens are a parameter
(``policy lint`` passes the classify registry's).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import replace

from geminibot.policy.agents_txt import parse_agents
from geminibot.policy.diagnostics import Diagnostic
from geminibot.policy.ext20 import parse_ext20, strip_comment
from geminibot.policy.robots2 import SPEC_VERSION, parse_robots2
from geminibot.policy.robots_model import VIRTUAL_AGENTS
from geminibot.policy.robots_parse import agent_token, parse_robots, read_field
from geminibot.policy.site_policy import detect_dialect
from geminibot.policy.textlines import numbered_lines

#: A placeholder of a template left in a published file: ``$DOMAIN``, ``${HOST}``,
#: ``{{ site }}``, ``{% ... %}``, ``<%= ... %>``, or the documentation domains of RFC 2606.
TEMPLATE = re.compile(
    r"\$\{?[A-Z][A-Z0-9_]{2,}\}?|\{\{.*?\}\}|\{%.*?%\}|<%=?.*?%>"
    r"|(?<![\w-])example\.(?:com|org|net)(?![\w-])",
    re.IGNORECASE,
)
#: The shortest token compared with the known crawlers' (shorter ones are too ambiguous).
MIN_NEAR_TOKEN = 4

#: What to do about each finding, by code: every warning and error has one.
HINTS: dict[str, str] = {
    # robots.txt (RFC 9309 as Google reads it)
    "nul-byte": "save the file as plain text; a NUL byte ends what crawlers read of it",
    "no-separator": "write the line as 'Field: value', or make it a comment with '#'",
    "rule-outside-group": "put a 'User-agent:' line (e.g. 'User-agent: *') before the rule",
    "agent-no-token": "name the crawler by its product token, e.g. 'User-agent: Googlebot'",
    "agent-token-cut": "a token with digits cannot be named exactly; keep the line only if "
    "its rules suit every crawler called by the shorter name",
    "pattern-no-slash": "start the pattern with '/' (a path) or '*' (any path)",
    "empty-group": "add the rules meant for these agents, or 'Disallow:' to say none",
    "group-not-closed": "move the line after the group's rules, or give each User-agent "
    "its own rules",
    "unknown-field": "check the spelling (User-agent, Allow, Disallow, Sitemap, "
    "Crawl-delay) or delete the line",
    "bad-crawl-delay": "write the delay as a number of seconds, e.g. 'Crawl-delay: 10'",
    "delay-outside-group": "put the Crawl-delay inside the group it is for",
    "sitemap-not-absolute": "write the full URL, e.g. 'Sitemap: https://host/sitemap.xml'",
    "typo-accepted": "fix the spelling: Google's parser accepts it, other crawlers may not",
    "missing-colon": "add the ':' after the field name",
    "not-utf8": "save the file as UTF-8",
    "line-too-long": "split the rule into shorter ones; the rest of the line is not read",
    "size-limit": "move what matters into the first part of the file, or make it smaller",
    "dollar-inside": "to anchor the end, move '$' to the end of the pattern; if URLs "
    "really contain '$' there, the line is right as it is",
    # robots.txt version 2.0 extensions
    "ambiguous-comment": "put a space before '#' to start a comment, or write %23",
    "ambiguous-pattern": "write '~ ' before a regular expression; a plain value is a glob",
    "bad-agent": "name one product token per User-agent line",
    "bad-version": "write 'Robot-version: 2.0' (or 1.0)",
    "late-version": "put Robot-version directly after the User-agent lines",
    "no-group": "put a 'User-agent:' line before it",
    "repeated-visit-time": "keep one Visit-time per set, or merge the windows",
    "explicit-directory": "add '*' to cover everything below the directory",
    "non-ascii-class": "write the alternatives out, e.g. (?:é|è)",
    "bad-glob": "close each '[' with ']' and keep the glob under the length limit",
    "bad-regex": "fix the regular expression (RE2 syntax), or write a glob",
    "bad-rate": "write the rate as documents/time, e.g. 'Request-rate: 1/10s'",
    "bad-visit-time": "write the window as HHMM-HHMM in UTC, e.g. 'Visit-time: 0100-0600'",
    "repeated-version": "keep one Robot-version line per set",
    # robots2.txt
    "no-colon": "write the line as 'key: value'",
    "unknown-category": "use one of the categories robots2.txt 0.2.1 lists",
    "unknown-directive": "check the spelling against robots2.txt 0.2.1, or delete the line",
    "unknown-value": "use one of the directive's values; unknown ones count as the most "
    "restrictive",
    "repeated-directive": "keep one line per directive in each block",
    "repeated-block": "merge the blocks for the same category",
    "chain-not-last": "move the 'chain:' line to the end of the file",
    "empty-chain": "give 'chain:' the URL of the next file, or delete it",
    "spec-version": f"check the file against robots2.txt v{SPEC_VERSION}, then declare "
    "the version it follows",
    # agents.txt
    "no-hash-line": "start the directives with '*' and the SHA-256 of the directives",
    "bad-hash-line": "write '*' followed by the 64 hex digits of the SHA-256",
    "hash-mismatch": "recompute the SHA-256 of the directives after each edit",
    "bad-directive": "write '<path> ALLOW|DISALLOW [key=value ...]'",
    "site-restricted": "fix the errors above: until then the file restricts the whole site",
    "unknown-parameter": "use the parameters the draft defines (limit=)",
    "request": "fix the line as the message says",
    # whole-file findings (this module)
    "template-left": "replace the placeholder with your site's own value before publishing",
    "agent-near-known": "write the crawler's token exactly as it names itself",
}


def lint_policy(
    name: str, data: bytes, known_tokens: Collection[str] = ()
) -> tuple[Diagnostic, ...]:
    """Every finding about one policy file (dialect by name, else by content), sorted by
    line, each warning and error with its fix hint. ``known_tokens``: product tokens of
    known crawlers, for ``agent-near-known``."""
    dialect = detect_dialect(name, data)
    if dialect == "agents":
        found = list(parse_agents(data).diagnostics)
    elif dialect == "robots2":
        found = list(parse_robots2(data).diagnostics)
    else:
        found = _robots_findings(data)
    found += _template_findings(data)
    if dialect != "agents":
        found += _near_known_findings(data, known_tokens)
    found.sort(key=lambda d: d.line)
    return tuple(_with_hint(d) for d in found)


def _with_hint(diag: Diagnostic) -> Diagnostic:
    if diag.hint or diag.level == "info":
        return diag
    return replace(diag, hint=HINTS.get(diag.code, ""))


def _robots_findings(data: bytes) -> list[Diagnostic]:
    rfc9309 = parse_robots(data)
    diags = list(rfc9309.diagnostics)
    v2 = parse_ext20(data, rfc9309)
    if v2.has_version_lines or any(s.rates or s.visit_times for s in v2.sets):
        # A 2.0 set's rules are read by the 2.0 engine: what RFC 9309 would make of them
        # (a regex "does not start with '/'", a glob's '$') is not what happens.
        v2_lines = {r.line for s in v2.sets if s.kind == "2.0" for r in s.rules}
        rfc_only = ("pattern-no-slash", "dollar-inside")
        diags = [d for d in diags if d.line not in v2_lines or d.code not in rfc_only]
        seen = {(d.line, d.code) for d in diags}
        diags.extend(
            d for d in v2.diagnostics if d.code != "unknown-field" and (d.line, d.code) not in seen
        )
    return diags


def _template_findings(data: bytes) -> list[Diagnostic]:
    """A placeholder left in a line's value (comments aside)."""
    out: list[Diagnostic] = []
    for number, text in numbered_lines(data):
        value = strip_comment(text)[0] if not text.lstrip().startswith("#") else ""
        found = TEMPLATE.search(value)
        if found is not None:
            what = found.group(0)
            example = what.lower().startswith("example")
            kind = "the documentation example domain" if example else "a template placeholder"
            out.append(
                Diagnostic(
                    number,
                    "warning",
                    "template-left",
                    f"'{what[:40]}' is {kind} left in: crawlers read it literally",
                )
            )
    return out


def _near_known_findings(data: bytes, known_tokens: Collection[str]) -> list[Diagnostic]:
    """A User-agent whose token is not a known crawler's but nearly is (``Google`` for
    ``Googlebot``, ``GPT-Bot`` for ``GPTBot``): a group that names nobody it meant to."""
    known = {t.lower(): t for t in known_tokens}
    out: list[Diagnostic] = []
    for number, text in numbered_lines(data):
        field = read_field(text.split("#", 1)[0])
        if field is None or field[0] != "user-agent":
            continue
        token = agent_token(field[2].strip())
        if not token or token == "*" or token in known or token in VIRTUAL_AGENTS:
            continue
        meant = nearest_token(token, known)
        if meant is not None:
            out.append(
                Diagnostic(
                    number,
                    "warning",
                    "agent-near-known",
                    f"User-agent '{field[2].strip()}' names no known crawler; "
                    f"'{meant}' is a known crawler's token: a group applies only to the "
                    "exact token (case aside)",
                    hint=f"if you meant {meant}, write 'User-agent: {meant}'",
                )
            )
    return out


def nearest_token(token: str, known: dict[str, str]) -> str | None:
    """The known token (as spelled in ``known``'s values) that ``token`` (lower-case) most
    likely meant, or None: the same letters but for '-' and '_', a beginning of it
    (``google`` of ``googlebot``), or one edit away (two for a long token)."""
    if len(token) < MIN_NEAR_TOKEN:
        return None
    bare = token.replace("-", "").replace("_", "")
    candidates: list[tuple[int, str]] = []
    for lower, spelled in known.items():
        if lower.replace("-", "").replace("_", "") == bare:
            candidates.append((0, spelled))
        elif lower.startswith(token):
            candidates.append((len(lower) - len(token), spelled))
        elif abs(len(lower) - len(token)) <= 2:
            distance = _edit_distance(token, lower)
            if distance <= (2 if len(token) >= 9 else 1):
                candidates.append((distance, spelled))
    return min(candidates)[1] if candidates else None


def _edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions) of two short strings."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]
