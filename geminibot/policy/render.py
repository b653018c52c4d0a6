"""Render a structured agent policy (TOML) as robots.txt, robots2.txt or agents.txt.

This is the production rule of the robots.txt .kno document: a header comment naming the
source, one record per entry of ``agents`` in order, a default ``*`` record driven by
``default_policy``, ``Sitemap:`` from ``sitemap_url`` and a comment pointing at
``llms_txt_url``. The same input always gives byte-identical output (no clock, no
dictionary-order dependence: directives and categories come out in a fixed order).

The policy file (every key optional unless marked)::

    source = "kno://content/agent-policy"      # named in the header comment
    identity = "01KPY2..."                      # ULID or other id, also in the header
    default_policy = "disallow"                 # "allow" | "disallow" (required)
    sitemap_url = "https://example.org/sitemap.xml"
    llms_txt_url = "https://example.org/llms.txt"

    [default]                                   # rules for everyone else ("*")
    rules = [{ allow = "/public/" }, { disallow = "/api/", limit = 30 }]

    [[agents]]                                  # in order; tokens are product tokens
    tokens = ["ChatGPT-User", "Claude-User"]
    comment = "On-demand agents"
    policy = "allow"                            # where no rule matches (default "allow")
    rules = [{ disallow = "/private/" }]

    [ai]                                        # robots2.txt global directives
    crawl = "yes"
    rate = 30                                   # or "polite"
    market = "reference-publishing"
    report_to = ["https://robotsv2.org/report"]
    chain = "https://robotsv2.org/community-baseline.txt"
    chain_id = "example-v1"

    [signals]                                   # robots2.txt content signals
    content-type = "reference"

    [categories.search-indexer]                 # robots2.txt override blocks
    crawl = "yes"

What the policy means (and what every rendering must decide like): an agent named by an
entry gets that entry's rules, others get ``[default]``; the longest matching rule wins,
allow wins a tie, and where no rule matches the entry's ``policy`` (or ``default_policy``)
decides. agents.txt has no per-agent records, so it renders the default rules only (and
no wildcard patterns: its paths are literal prefixes). ``limit`` (requests per minute)
is an agents.txt parameter and appears only there.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from geminibot.policy.agents_txt import content_hash
from geminibot.policy.ext20_patterns import longest_match
from geminibot.policy.robots2 import (
    CATEGORIES,
    DIRECTIVE_VALUES,
    SIGNAL_VALUES,
    SPEC_VERSION,
    USAGE_DIRECTIVES,
)

Format = Literal["robots", "robots2", "agents"]
FORMATS: tuple[Format, ...] = ("robots", "robots2", "agents")
GENERATOR = "geminibot policy render"
_TOKEN = re.compile(r"[A-Za-z_-]+")
_PATTERN = re.compile(r"/[^\s#]*")
_AGENTS_PATH = re.compile(r"/(?:[A-Za-z0-9\-._~!&'()+,;=:@/?]|%[0-9A-Fa-f]{2})*")
#: robots2 directives in the order they are written: the usage ones, then rate and honest.
_AI_ORDER = (*USAGE_DIRECTIVES, "rate", "honest")
_AI_EXTRA = ("market", "report_to", "chain", "chain_id")


class PolicyError(ValueError):
    """The policy file is not a valid agent policy; the message names the key."""


@dataclass(frozen=True, slots=True)
class PolicyRule:
    """One allow or disallow of a structured policy, with its rate limit if any."""

    allow: bool
    pattern: str
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class RuleSet:
    """The rules of a structured policy for some agents, and what they allow by default."""

    rules: tuple[PolicyRule, ...]
    fallback_allow: bool

    def allows(self, path: str) -> bool:
        best = longest_match(self.rules, path)
        return self.fallback_allow if best is None else best.allow


@dataclass(frozen=True, slots=True)
class AgentEntry:
    """The agents (product tokens) one rule set is for, with a comment."""

    tokens: tuple[str, ...]
    comment: str
    rule_set: RuleSet


@dataclass(frozen=True)
class AgentPolicy:
    """A structured policy (the file :func:`load_policy` reads), from which every policy
    file is rendered."""

    source: str
    identity: str
    agents: tuple[AgentEntry, ...]
    default: RuleSet
    sitemap_url: str | None
    llms_txt_url: str | None
    ai: Mapping[str, str]
    market: str | None
    report_to: tuple[str, ...]
    chain: str | None
    chain_id: str | None
    signals: Mapping[str, str]
    categories: Mapping[str, Mapping[str, str]]

    def rules_for(self, agent: str) -> RuleSet:
        low = agent.lower()
        for entry in self.agents:
            if any(t.lower() == low for t in entry.tokens):
                return entry.rule_set
        return self.default

    def allows(self, path: str, agent: str) -> bool:
        """The policy's own decision (what every rendering must reproduce)."""
        if path == "/robots.txt":
            return True
        return self.rules_for(agent).allows(path)

    def usage(self, category: str | None) -> dict[str, str]:
        """robots2 directive values for a category: its block over the global values."""
        out = dict(self.ai)
        if category is not None:
            out.update(self.categories.get(category, {}))
        return out


def _str(table: Mapping[str, Any], key: str, where: str) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or "\n" in value or "\r" in value:
        raise PolicyError(f"{where}{key} must be a one-line, non-empty string")
    return value.strip()


def _check_keys(table: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in table:
        if key not in allowed:
            raise PolicyError(f"unknown key {where}{key} (known: {', '.join(allowed)})")


def _policy_word(value: object, where: str) -> bool:
    if value not in ("allow", "disallow"):
        raise PolicyError(f'{where} must be "allow" or "disallow"')
    return value == "allow"


def _rules(raw: object, where: str) -> tuple[PolicyRule, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise PolicyError(f"{where} must be a list of {{ allow = ... }} / {{ disallow = ... }}")
    out: list[PolicyRule] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        here = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise PolicyError(f"{here} must be a table")
        _check_keys(item, ("allow", "disallow", "limit"), f"{here}.")
        kinds = [k for k in ("allow", "disallow") if k in item]
        if len(kinds) != 1:
            raise PolicyError(f"{here} needs exactly one of allow or disallow")
        pattern = item[kinds[0]]
        if not isinstance(pattern, str) or _PATTERN.fullmatch(pattern) is None:
            raise PolicyError(
                f"{here}.{kinds[0]} must be a path starting with '/' without spaces or '#'"
            )
        if pattern in seen:
            raise PolicyError(f"{here}: pattern {pattern!r} appears twice")
        seen.add(pattern)
        limit = item.get("limit")
        if limit is not None and (
            not isinstance(limit, int) or isinstance(limit, bool) or limit < 1
        ):
            raise PolicyError(f"{here}.limit must be a positive integer (requests per minute)")
        out.append(PolicyRule(kinds[0] == "allow", pattern, limit))
    return tuple(out)


def _directives(
    table: object, where: str, allow_extra: bool
) -> tuple[dict[str, str], dict[str, Any]]:
    if not isinstance(table, dict):
        raise PolicyError(f"{where} must be a table")
    known = _AI_ORDER + (_AI_EXTRA if allow_extra else ())
    _check_keys(table, known, f"{where}.")
    values: dict[str, str] = {}
    for key in _AI_ORDER:
        if key not in table:
            continue
        value = table[key]
        if key == "rate":
            if value == "polite":
                values[key] = "polite"
            elif isinstance(value, int) and not isinstance(value, bool) and value >= 1:
                values[key] = str(value)
            else:
                raise PolicyError(f'{where}.rate must be a positive integer or "polite"')
            continue
        choices = DIRECTIVE_VALUES[key]
        if value not in choices:
            raise PolicyError(f"{where}.{key} must be one of {' | '.join(choices)}")
        values[key] = str(value)
    extra = {k: table[k] for k in _AI_EXTRA if k in table}
    return values, extra


def load_policy(data: bytes | str) -> AgentPolicy:
    """Read and validate a policy file. Raises :class:`PolicyError` with the key at fault."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        doc = tomllib.loads(text)
    except UnicodeDecodeError:
        raise PolicyError("the policy file is not UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"not valid TOML: {exc}") from None
    _check_keys(
        doc,
        (
            "source",
            "identity",
            "default_policy",
            "sitemap_url",
            "llms_txt_url",
            "default",
            "agents",
            "ai",
            "signals",
            "categories",
        ),
        "",
    )
    default = _default_rule_set(doc)
    agents = _agent_entries(doc.get("agents", []))
    ai, extra = _directives(doc.get("ai", {}), "ai", allow_extra=True)
    report_to = extra.get("report_to", [])
    if not isinstance(report_to, list) or not all(
        isinstance(r, str) and r.strip() and "\n" not in r for r in report_to
    ):
        raise PolicyError("ai.report_to must be a list of URLs or e-mail addresses")
    signals = _signals(doc.get("signals", {}))
    categories = _categories(doc.get("categories", {}))
    return AgentPolicy(
        source=_str(doc, "source", "") or "agent-policy",
        identity=_str(doc, "identity", "") or "",
        agents=agents,
        default=default,
        sitemap_url=_str(doc, "sitemap_url", ""),
        llms_txt_url=_str(doc, "llms_txt_url", ""),
        ai=ai,
        market=_str(extra, "market", "ai."),
        report_to=tuple(r.strip() for r in report_to),
        chain=_str(extra, "chain", "ai."),
        chain_id=_str(extra, "chain_id", "ai."),
        signals=signals,
        categories=categories,
    )


def _default_rule_set(doc: Mapping[str, Any]) -> RuleSet:
    """``default_policy`` and the ``[default]`` table's rules."""
    if "default_policy" not in doc:
        raise PolicyError('default_policy is required ("allow" or "disallow")')
    default_allow = _policy_word(doc["default_policy"], "default_policy")
    default_table = doc.get("default", {})
    if not isinstance(default_table, dict):
        raise PolicyError("[default] must be a table")
    _check_keys(default_table, ("rules",), "default.")
    return RuleSet(_rules(default_table.get("rules"), "default.rules"), default_allow)


def _agent_entries(raw_agents: object) -> tuple[AgentEntry, ...]:
    """The ``[[agents]]`` tables; no product token may be named twice."""
    agents: list[AgentEntry] = []
    seen_tokens: set[str] = set()
    if not isinstance(raw_agents, list):
        raise PolicyError("agents must be an array of tables ([[agents]])")
    for i, entry in enumerate(raw_agents):
        where = f"agents[{i}]"
        if not isinstance(entry, dict):
            raise PolicyError(f"{where} must be a table")
        _check_keys(entry, ("tokens", "comment", "policy", "rules"), f"{where}.")
        tokens = entry.get("tokens")
        if not isinstance(tokens, list) or not tokens:
            raise PolicyError(f"{where}.tokens must be a non-empty list of product tokens")
        for token in tokens:
            if not isinstance(token, str) or _TOKEN.fullmatch(token) is None:
                raise PolicyError(
                    f"{where}.tokens: {token!r} is not a product token (letters, '-', '_')"
                )
            if token.lower() in seen_tokens:
                raise PolicyError(f"{where}.tokens: {token!r} is already named by an earlier entry")
            seen_tokens.add(token.lower())
        comment = _str(entry, "comment", f"{where}.") or ""
        allow = _policy_word(entry.get("policy", "allow"), f"{where}.policy")
        agents.append(
            AgentEntry(
                tuple(tokens), comment, RuleSet(_rules(entry.get("rules"), f"{where}.rules"), allow)
            )
        )
    return tuple(agents)


def _signals(signals_table: object) -> dict[str, str]:
    """The ``[signals]`` table, each value checked against its choices."""
    if not isinstance(signals_table, dict):
        raise PolicyError("[signals] must be a table")
    _check_keys(signals_table, tuple(SIGNAL_VALUES), "signals.")
    signals: dict[str, str] = {}
    for key in SIGNAL_VALUES:
        if key in signals_table:
            value = _str(signals_table, key, "signals.")
            choices = SIGNAL_VALUES[key]
            if choices is not None and value not in choices:
                raise PolicyError(f"signals.{key} must be one of {' | '.join(choices)}")
            assert value is not None
            signals[key] = value
    return signals


def _categories(categories_table: object) -> dict[str, dict[str, str]]:
    """The ``[categories.NAME]`` tables of robots2 directives."""
    if not isinstance(categories_table, dict):
        raise PolicyError("[categories] must be a table of [categories.NAME] tables")
    _check_keys(categories_table, CATEGORIES, "categories.")
    return {
        name: _directives(categories_table[name], f"categories.{name}", allow_extra=False)[0]
        for name in CATEGORIES
        if name in categories_table
    }


def _record_lines(rule_set: RuleSet) -> list[str]:
    lines = [f"{'Allow' if r.allow else 'Disallow'}: {r.pattern}" for r in rule_set.rules]
    has_root = any(r.pattern == "/" for r in rule_set.rules)
    if not rule_set.fallback_allow and not has_root:
        lines.append("Disallow: /")
    if not lines:
        lines.append("Allow: /")
    return lines


def _header(policy: AgentPolicy, name: str) -> list[str]:
    ident = f" • Identity: {policy.identity}" if policy.identity else ""
    return [
        f"# {name} — generated by {GENERATOR}; edit the policy, not this file",
        f"# Source: {policy.source}{ident}",
    ]


def _path_records(policy: AgentPolicy) -> list[str]:
    out: list[str] = []
    for entry in policy.agents:
        out.append("")
        if entry.comment:
            out.append(f"# {entry.comment}")
        out.extend(f"User-agent: {t}" for t in entry.tokens)
        out.extend(_record_lines(entry.rule_set))
    out.append("")
    out.append(f"# Default: {'allow' if policy.default.fallback_allow else 'deny'} everything else")
    out.append("User-agent: *")
    out.extend(_record_lines(policy.default))
    return out


def render_robots(policy: AgentPolicy) -> str:
    lines = _header(policy, "robots.txt")
    lines.extend(_path_records(policy))
    if policy.sitemap_url:
        lines.extend(["", f"Sitemap: {policy.sitemap_url}"])
    if policy.llms_txt_url:
        lines.extend(
            ["", "# LLM corpus index (well-known: llmstxt.org)", f"# {policy.llms_txt_url}"]
        )
    return "\n".join(lines) + "\n"


def render_robots2(policy: AgentPolicy) -> str:
    lines = _header(policy, "robots2.txt")
    lines.append(f"# meta: spec-version: {SPEC_VERSION}")
    if policy.chain_id:
        lines.append(f"# meta: chain-id: {policy.chain_id}")
    lines.extend(_path_records(policy))
    if policy.sitemap_url:
        lines.append(f"Sitemap: {policy.sitemap_url}")
    lines.extend(_usage_lines(policy))
    if policy.llms_txt_url:
        lines.extend(
            ["", "# LLM corpus index (well-known: llmstxt.org)", f"# {policy.llms_txt_url}"]
        )
    if policy.chain:
        lines.extend(["", f"chain: {policy.chain}"])
    return "\n".join(lines) + "\n"


def _usage_lines(policy: AgentPolicy) -> list[str]:
    """robots2.txt's AI usage directives, content signals, report-to and category blocks."""
    lines: list[str] = []
    ai = [f"{k}: {policy.ai[k]}" for k in _AI_ORDER if k in policy.ai]
    if policy.market:
        ai.append(f"market: {policy.market}")
    if ai:
        lines.extend(["", "# AI usage policy", *ai])
    if policy.signals:
        lines.extend(["", "# Content signals", *(f"{k}: {v}" for k, v in policy.signals.items())])
    if policy.report_to:
        lines.append("")
        lines.extend(f"report-to: {r}" for r in policy.report_to)
    for name in CATEGORIES:
        block = policy.categories.get(name)
        if block is None:
            continue
        lines.extend(
            ["", f"[agent: {name}]", *(f"{k}: {block[k]}" for k in _AI_ORDER if k in block)]
        )
    return lines


def render_agents(policy: AgentPolicy) -> str:
    directives: list[str] = []
    for rule in policy.default.rules:
        if _AGENTS_PATH.fullmatch(rule.pattern) is None:
            raise PolicyError(
                f"default rule {rule.pattern!r} cannot be written in agents.txt "
                "(literal URI paths only: no '*', '$' or spaces, '%' only in %XX escapes)"
            )
        extra = f" limit={rule.limit}" if rule.limit is not None else ""
        directives.append(f"{rule.pattern} {'ALLOW' if rule.allow else 'DISALLOW'}{extra}")
    if not any(r.pattern == "/" for r in policy.default.rules):
        if not policy.default.fallback_allow:
            directives.append("/ DISALLOW")
        elif not directives:
            directives.append("/ ALLOW")
    lines = _header(policy, "agents.txt")
    lines.append("# version: 1.0")
    if policy.agents:
        lines.append("# agents.txt has no per-agent records: this file carries the default policy")
    lines.append(f"*{content_hash(directives)}")
    lines.extend(directives)
    return "\n".join(lines) + "\n"


def render(policy: AgentPolicy, fmt: Format) -> str:
    if fmt == "robots":
        return render_robots(policy)
    if fmt == "robots2":
        return render_robots2(policy)
    return render_agents(policy)
