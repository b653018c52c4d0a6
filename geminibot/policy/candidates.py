"""Concrete paths made from a site's own rules (pure), for the tools that look for where
policies differ: ``classify --against`` (one bot against ``*``) and ``compare`` (the web
against Gemini) both decide :func:`candidate_paths`. A rule can only change a decision at
the paths it matches and just past them, so deciding these paths exercises every rule on
both of its sides.
"""

from __future__ import annotations

import re

from geminibot.policy.paths import path_of
from geminibot.policy.robots import RobotsFile
from geminibot.policy.site_policy import SitePolicy

#: What stands in for a pattern's ``*`` (and a glob's ``?`` or ``[...]``) by default.
FILLER = "x"
#: What the ``*`` of a pattern are replaced by when making candidate paths (all the stars
#: of one pattern get the same filler, so a pattern gives a bounded number of paths).
FILLERS = ("", FILLER, "a/b")
#: Most candidate paths decided (the shortest are kept): a large robots.txt has tens of
#: thousands of rules.
MAX_CANDIDATE_PATHS = 5_000
#: Paths always decided, whatever the rules say.
BASE_PATHS = ("/", "/index.html", "/x")

_GLOB_CLASS = re.compile(r"\[[^\]]*\]")


def concrete_paths(pattern: str, *, glob: bool = False, filler: str = FILLER) -> tuple[str, ...]:
    """Concrete paths around one rule pattern: the pattern with each wildcard filled, the
    same just past its end, and its parent directory.

    ``/private/*.gmi$`` gives ``/private/x.gmi``, ``/private/x.gmix`` (past the anchor)
    and ``/private/``; ``/tmp`` gives ``/tmp``, ``/tmp/x`` and ``/``. In robots.txt only
    ``*`` and a final ``$`` are special; ``glob`` (a version 2.0 shell glob) also fills
    ``?`` and ``[...]`` (with :data:`FILLER`; ``filler`` replaces the stars).
    """
    anchored = pattern.endswith("$") and not glob
    body = pattern[:-1] if anchored else pattern
    if glob:
        body = _GLOB_CLASS.sub(FILLER, body).replace("?", FILLER)
    body = body.replace("*", filler)
    if not body.startswith("/"):
        body = "/" + body
    out = [body]
    if anchored or body.endswith("/"):
        out.append(body + FILLER)
    else:
        out.append(body + "/" + FILLER)
    out.append(body[: body.rstrip("/").rfind("/") + 1] or "/")
    return tuple(dict.fromkeys(out))


def rule_patterns(site: SitePolicy) -> list[tuple[str, bool]]:
    """Every rule pattern of the site's files, each with whether it is a shell glob:
    robots.txt groups (or its version 2.0 rule sets, regular expressions left out),
    robots2.txt path rules along the chain, agents.txt directive paths."""
    patterns: list[tuple[str, bool]] = []

    def from_robots(robots: RobotsFile | None) -> None:
        if robots is not None:
            patterns.extend((rule.pattern, False) for g in robots.groups for rule in g.rules)

    from_robots(site.robots)
    if site.ext20 is not None and site.ext20.has_version_lines:
        patterns.extend(
            (r.pattern, r.kind == "glob")
            for s in site.ext20.sets
            for r in s.rules
            if r.kind != "regex"
        )
    if site.robots2 is not None:
        for link in site.robots2.links:
            from_robots(link.file.robots())
    if site.agents is not None:
        patterns.extend((d.path, False) for d in site.agents.directives)
    return patterns


def pattern_paths(pattern: str, *, glob: bool = False) -> list[str]:
    """Concrete paths for one pattern: :func:`concrete_paths` with each filler of
    :data:`FILLERS` (the pattern, just past its end or its ``$``, its parent), plus the
    filled pattern one character longer and one character short (the two sides of a
    prefix rule's edge)."""
    out: list[str] = []
    for filler in FILLERS:
        paths = concrete_paths(pattern, glob=glob, filler=filler)
        filled = paths[0]
        out.extend((*paths, filled + FILLER))
        if len(filled) > 1:
            out.append(filled[:-1])
    return out


def candidate_paths(*policies: SitePolicy) -> tuple[tuple[str, ...], bool]:
    """Every candidate path from the rules of ``policies`` (normalised, deduplicated,
    shortest first, at most :data:`MAX_CANDIDATE_PATHS`), always with :data:`BASE_PATHS`,
    and whether the list was cut at the limit."""
    found = set(BASE_PATHS)
    for policy in policies:
        for pattern, glob in rule_patterns(policy):
            if pattern:
                found.update(path_of(p) for p in pattern_paths(pattern, glob=glob))
    found.discard("/robots.txt")
    ordered = sorted(found, key=lambda p: (len(p), p))
    return tuple(ordered[:MAX_CANDIDATE_PATHS]), len(ordered) > MAX_CANDIDATE_PATHS
