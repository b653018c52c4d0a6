"""What the crawl knows of a host, for its owner (pure: the records in, the summary out).

The policy files as fetched (when, status, size), the lint findings on them (the first
:data:`MAX_FINDINGS` of each file, the others counted by kind), what each
Gemini virtual agent may do at the host's root in both modes (the policy core's
decision, as ``geminibot policy check`` gives it on the same files, with the first
:data:`MAX_REFUSED` rules that keep it out of other paths), the delay between
requests and the longest wait sat out, the host's URLs by what became of them (the
frontier's states, as ``geminibot stats`` counts them), and where the crawl also saw
the host's web policy, where the two differ (``geminibot compare``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache

from geminibot.census.model import Census
from geminibot.policy import VIRTUAL_AGENTS
from geminibot.policy.candidates import candidate_paths
from geminibot.policy.cli import lint_file
from geminibot.policy.compare import bot_classes, compare
from geminibot.policy.diagnostics import Diagnostic
from geminibot.policy.security_txt import SECURITY_TXT
from geminibot.policy.site_policy import Bot, SitePolicy
from geminibot.urls import host_url
from geminibot.why.explain import crawl_bot, site_policy
from geminibot.why.records import HostRecords, PolicyFileRow

#: The modes each virtual agent is shown in.
MODES = ("precedence", "strict")
#: Paths decided for each virtual agent and mode (of the candidates the host's rules
#: name, shortest first: :func:`geminibot.policy.candidates.candidate_paths`).
MAX_PATHS = 100
#: Lint findings shown for each policy file; the others are counted by kind (code).
MAX_FINDINGS = 20
#: Rules shown that keep one virtual agent out of paths; the others are counted.
MAX_REFUSED = 10
#: Policy files whose lint findings are kept for the next answer (in each process).
LINTS_KEPT = 8


@dataclass(frozen=True)
class FileSummary:
    """One policy file of a host as the crawl fetched it: when, its status, what became
    of it, and its lint findings (the first :data:`MAX_FINDINGS`; ``more_findings``
    counts the others by code)."""

    name: str
    fetched_at: float
    status: int | None
    outcome: str
    reason: str
    size: int
    findings: tuple[Diagnostic, ...] = ()
    more_findings: tuple[tuple[str, int], ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "fetched_at": datetime.fromtimestamp(self.fetched_at, UTC).isoformat(),
            "status": self.status,
            "outcome": self.outcome,
            "reason": self.reason,
            "size": self.size,
            "findings": [d.as_dict() for d in self.findings],
            "more_findings": dict(self.more_findings),
        }


@dataclass(frozen=True)
class Permission:
    """What one virtual agent may do on the host in one mode: whether it may crawl the
    root (and the policy core's reason), and the rules that keep it out of other paths,
    each with the shortest path it refuses (``/private/ (robots.txt line 9: ...)``), the
    first :data:`MAX_REFUSED` of them (``more_refused`` counts the others)."""

    agent: str
    mode: str
    allowed: bool
    reason: str
    refused: tuple[str, ...] = ()
    more_refused: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "agent": self.agent,
            "mode": self.mode,
            "allowed": self.allowed,
            "reason": self.reason,
            "refused": list(self.refused),
            "more_refused": self.more_refused,
        }

    def words(self) -> str:
        said = "may crawl /" if self.allowed else f"may not crawl /: {self.reason}"
        out = f"{self.agent}, {self.mode} mode: {said}"
        if not self.refused:
            return out
        rules = len(self.refused) + self.more_refused
        shown = ", ".join(self.refused) + (", …" if self.more_refused else "")
        return out + f"; kept out of paths by {rules} rule{'s' * (rules > 1)}: {shown}"


@dataclass(frozen=True)
class HostAnswer:
    """What the crawl knows of a host, for its owner: its policy files, what each
    virtual agent may do, its delay, and its URLs counted by state; and the capsule's
    census (``geminibot census --host``), which the faces' ``/check`` adds
    (:mod:`geminibot.why.reads`; None: not taken)."""

    host: str
    root: str
    agent: str
    files: tuple[FileSummary, ...]
    permissions: tuple[Permission, ...]
    delay: float | None
    delay_rule: str
    longest_wait: float | None
    counts: dict[str, int]
    skipped: str | None = None
    web_host: str | None = None
    differences: str | None = None
    notes: tuple[str, ...] = field(default=())
    census: Census | None = None

    def as_dict(self) -> dict[str, object]:
        census = {} if self.census is None else {"census": self.census.as_json()}
        return {
            "host": self.host,
            "root": self.root,
            "agent": self.agent,
            "files": [f.as_dict() for f in self.files],
            "permissions": [p.as_dict() for p in self.permissions],
            "delay": self.delay,
            "delay_rule": self.delay_rule,
            "longest_wait": self.longest_wait,
            "counts": self.counts,
            "skipped": self.skipped,
            "web_host": self.web_host,
            "differences": self.differences,
            "notes": list(self.notes),
            **census,
        }


def counts(records: HostRecords) -> dict[str, int]:
    """The host's URLs by what became of them: the frontier's states (as ``geminibot
    stats`` names them), and of the pages fetched, the searchable ones and duplicates."""
    out = {"searchable": records.searchable, "duplicates": records.duplicates}
    out.update(sorted(records.states.items()))
    return out


@lru_cache(maxsize=LINTS_KEPT)
def _lint(name: str, body: bytes) -> tuple[tuple[Diagnostic, ...], tuple[tuple[str, int], ...]]:
    """The first :data:`MAX_FINDINGS` findings on a file, and the others counted by code."""
    findings = lint_file(name, body)
    more = Counter(d.code for d in findings[MAX_FINDINGS:])
    return findings[:MAX_FINDINGS], tuple(more.most_common())


def _file(row: PolicyFileRow) -> FileSummary:
    body = row.body or b""
    policy_file = row.name != SECURITY_TXT  # security.txt is read, not linted as a policy
    linted = row.outcome == "success" and body and policy_file
    findings, more = _lint(row.name, body) if linted else ((), ())
    return FileSummary(
        row.name, row.fetched_at, row.status, row.outcome, row.reason, len(body), findings, more
    )


def _refused(
    policy: SitePolicy, bot: Bot, host: str, paths: tuple[str, ...], at: datetime
) -> tuple[str, ...]:
    """The rules that refuse ``bot`` some of ``paths`` (other than the root), each once,
    with the shortest path it refuses."""
    found: dict[str, str] = {}
    for path in paths:
        if path == "/":
            continue
        for r in policy.may_fetch(host_url(host, path), bot, at).reasons:
            if not r.allowed and r.line:
                found.setdefault(f"{r.file} line {r.line}: {r.rule}", path)
    return tuple(f"{path} ({rule})" for rule, path in found.items())


def explain_host(records: HostRecords, now: float) -> HostAnswer:
    """The summary of one host from its records, at ``now``."""
    at = datetime.fromtimestamp(now, UTC)
    s = records.settings
    root = host_url(records.host, "/")
    policy = site_policy(records.host, records.files)
    permissions: list[Permission] = []
    delay, rule = None, "no policy file fetched yet"
    if policy is not None:
        paths = candidate_paths(policy)[0][:MAX_PATHS]
        for agent in VIRTUAL_AGENTS:
            for mode in MODES:
                bot = Bot(s.agent, (agent,), None, mode == "strict")
                d = policy.may_fetch(root, bot, at)
                refused = _refused(policy, bot, records.host, paths, at)
                shown, more = refused[:MAX_REFUSED], len(refused[MAX_REFUSED:])
                permissions.append(Permission(agent, mode, d.allowed, d.reason, shown, more))
        strict = s.run.strict if s.run else False
        last = records.host_row.last_duration if records.host_row else None
        answer = policy.delay(crawl_bot(s.agent, s.role, strict), at, last)
        delay = answer.seconds
        rule = f"{answer.file} line {answer.line}: {answer.rule}" if answer.file else answer.rule
    differences = None
    if policy is not None and records.web_files:
        web = site_policy(records.web_host or "", records.web_files)
        if web is not None:
            classes = bot_classes([web, policy])
            differences = compare(web, policy, classes, at).summary()
    return HostAnswer(
        records.host,
        root,
        s.agent,
        tuple(_file(f) for f in records.files),
        tuple(permissions),
        delay,
        rule,
        records.longest_wait,
        counts(records),
        records.host_row.skipped_reason if records.host_row else None,
        records.web_host,
        differences,
    )
