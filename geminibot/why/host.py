"""What the crawl knows of a host, for its owner (pure: the records in, the summary out).

The policy files as fetched (when, status, size), the lint findings on them, what each
Gemini virtual agent may do at the host's root in both modes (the policy core's
decision, as ``geminibot policy check`` gives it on the same files), the delay between
requests and the longest wait sat out, the host's URLs by what became of them (the
frontier's states, as ``geminibot stats`` counts them), and where the crawl also saw
the host's web policy, where the two differ (``geminibot compare``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from geminibot.crawl.schemes import host_url
from geminibot.policy import VIRTUAL_AGENTS
from geminibot.policy.cli import lint_file
from geminibot.policy.compare import bot_classes, compare
from geminibot.policy.diagnostics import Diagnostic
from geminibot.policy.site_policy import Bot
from geminibot.why.explain import crawl_bot, site_policy
from geminibot.why.records import HostRecords, PolicyFileRow

#: The modes each virtual agent is shown in.
MODES = ("precedence", "strict")


@dataclass(frozen=True)
class FileSummary:
    name: str
    fetched_at: float
    status: int | None
    outcome: str
    reason: str
    size: int
    findings: tuple[Diagnostic, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "fetched_at": datetime.fromtimestamp(self.fetched_at, UTC).isoformat(),
            "status": self.status,
            "outcome": self.outcome,
            "reason": self.reason,
            "size": self.size,
            "findings": [d.as_dict() for d in self.findings],
        }


@dataclass(frozen=True)
class Permission:
    """What one virtual agent may do at the host's root in one mode."""

    agent: str
    mode: str
    allowed: bool
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {
            "agent": self.agent,
            "mode": self.mode,
            "allowed": self.allowed,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class HostAnswer:
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

    def as_dict(self) -> dict[str, object]:
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
        }


def counts(records: HostRecords) -> dict[str, int]:
    """The host's URLs by what became of them: the frontier's states (as ``geminibot
    stats`` names them), and of the pages fetched, the searchable ones and duplicates."""
    out = {"searchable": records.searchable, "duplicates": records.duplicates}
    out.update(sorted(records.states.items()))
    return out


def _file(row: PolicyFileRow) -> FileSummary:
    body = row.body or b""
    findings = lint_file(row.name, body) if row.outcome == "success" and body else ()
    return FileSummary(
        row.name, row.fetched_at, row.status, row.outcome, row.reason, len(body), findings
    )


def explain_host(records: HostRecords, now: float) -> HostAnswer:
    """The summary of one host from its records, at ``now``."""
    at = datetime.fromtimestamp(now, UTC)
    s = records.settings
    root = host_url(records.host, "/")
    policy = site_policy(records.host, records.files)
    permissions: list[Permission] = []
    delay, rule = None, "no policy file fetched yet"
    if policy is not None:
        for agent in VIRTUAL_AGENTS:
            for mode in MODES:
                bot = Bot(s.agent, (agent,), None, mode == "strict")
                d = policy.may_fetch(root, bot, at)
                permissions.append(Permission(agent, mode, d.allowed, d.reason))
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
