"""The compliance report: which client broke which capsule's policy, from the access log.

For each client address, in log order:

- ``robots_first``: per host, whether its first request there was /robots.txt;
- ``forbidden``: every request the capsule's served robots.txt policy forbids, and for which
  identities: each virtual agent on its own (``archiver``...), and ``*`` for a bot that acts
  as no virtual agent. Decisions use :mod:`geminibot.policy` in the default (precedence)
  mode for the product token given with ``--agent`` (default ``geminibot``). The policy
  files themselves (``POLICY_FILES``) are never forbidden;
- ``honeypots``: requests under a capsule's ``honeypots`` prefixes (expect.toml);
- ``rate``: requests the server refused with 44 for going over its rate, requests made while
  an earlier 44 asked the client to wait, and requests sooner after the previous one to
  the same host than the capsule's Crawl-delay for an identity;
- ``consistent_with``: the identities (virtual agents, ``*``) under which no request of the
  client was forbidden, no honeypot was hit and no crawl delay was broken;
- ``compliant``: robots.txt first everywhere, no honeypot hit, no request during a 44 wait,
  and consistent with at least one identity. The command exits 1 if any client is not.

:func:`build_report` is pure (records and policies in, reports out); the CLI reads files.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capsule_server.expect import ExpectError, load_expectation, served_robots
from capsule_server.files import CapsuleConfigError, bundled_capsules, load_capsules
from capsule_server.log import AccessRecord, LogFormatError, read_log
from geminibot.cliutil import EXIT_NEGATIVE, EXIT_OK, CommandError, emit_json
from geminibot.policy import VIRTUAL_AGENTS, RobotsFile

POLICY_FILES = ("/robots.txt", "/robots2.txt", "/agents.txt")
NO_VIRTUAL_AGENT = "*"
IDENTITIES: tuple[str, ...] = (*VIRTUAL_AGENTS, NO_VIRTUAL_AGENT)


@dataclass(frozen=True, slots=True)
class HostPolicy:
    robots: RobotsFile
    honeypots: tuple[str, ...] = ()


@dataclass(slots=True)
class Violation:
    time: str
    host: str
    path: str
    identities: tuple[str, ...] = ()
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"time": self.time, "host": self.host, "path": self.path}
        if self.identities:
            out["for"] = list(self.identities)
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass(slots=True)
class ClientReport:
    client: str
    requests: int = 0
    robots_first: dict[str, bool] = field(default_factory=dict)
    forbidden: list[Violation] = field(default_factory=list)
    honeypots: list[Violation] = field(default_factory=list)
    rate_refused: list[Violation] = field(default_factory=list)
    during_wait: list[Violation] = field(default_factory=list)
    too_fast: list[Violation] = field(default_factory=list)
    consistent_with: tuple[str, ...] = ()

    @property
    def compliant(self) -> bool:
        """robots.txt first on every host, no honeypot, no request during a 44 wait, and
        behaviour consistent with at least one identity."""
        return (
            bool(self.consistent_with)
            and not (self.honeypots or self.during_wait)
            and all(self.robots_first.values())
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "requests": self.requests,
            "robots_first": self.robots_first,
            "forbidden": [v.as_dict() for v in self.forbidden],
            "honeypots": [v.as_dict() for v in self.honeypots],
            "rate": {
                "refused_with_44": [v.as_dict() for v in self.rate_refused],
                "during_44_wait": [v.as_dict() for v in self.during_wait],
                "faster_than_crawl_delay": [v.as_dict() for v in self.too_fast],
            },
            "consistent_with": list(self.consistent_with),
            "compliant": self.compliant,
        }


def _when(record: AccessRecord) -> float | None:
    try:
        return dt.datetime.fromisoformat(record.time).timestamp()
    except ValueError:
        return None


def _wait_seconds(meta: str | None) -> float:
    try:
        return float(meta or "")
    except ValueError:
        return 1.0  # no number: exponential back-off from one second, per v0.24.1


def build_report(
    records: Iterable[AccessRecord], policies: Mapping[str, HostPolicy], agent: str = "geminibot"
) -> list[ClientReport]:
    """One report per client address, in order of first appearance."""
    reports: dict[str, ClientReport] = {}
    blocked_until: dict[tuple[str, str], float] = {}
    last_request: dict[tuple[str, str], float] = {}
    broken: dict[str, set[str]] = {}
    # Records are written when connections end; order them by when they began.
    for record in sorted(records, key=lambda r: _when(r) or 0.0):
        if record.host is None or record.path is None:
            continue  # no request was read (timeout, TLS failure, malformed line)
        report = reports.setdefault(record.client, ClientReport(record.client))
        bad = broken.setdefault(record.client, set())
        report.requests += 1
        host, path = record.host, record.path
        now = _when(record)
        key = (record.client, host)
        here = Violation(record.time, host, path)
        if host not in report.robots_first:
            report.robots_first[host] = path == "/robots.txt"
        if now is not None:
            until = blocked_until.get(key)
            if until is not None and now < until:
                report.during_wait.append(
                    Violation(record.time, host, path, detail=f"{until - now:.1f} s early")
                )
        if record.status == 44:
            if record.limited == "rate":
                report.rate_refused.append(here)
            if now is not None:
                blocked_until[key] = now + _wait_seconds(record.meta)
        policy = policies.get(host)
        if policy is None:
            continue
        if any(path.startswith(prefix) for prefix in policy.honeypots):
            report.honeypots.append(here)
            bad.update(IDENTITIES)
        if path not in POLICY_FILES:
            forbidden_for = tuple(
                identity
                for identity in IDENTITIES
                if not _allowed(policy.robots, path, agent, identity)
            )
            if forbidden_for:
                report.forbidden.append(Violation(record.time, host, path, forbidden_for))
                bad.update(forbidden_for)
        if now is not None:
            previous = last_request.get(key)
            if previous is not None:
                slow_for = tuple(
                    identity
                    for identity in IDENTITIES
                    if now - previous < (_delay(policy.robots, agent, identity) or 0.0)
                )
                if slow_for:
                    report.too_fast.append(
                        Violation(
                            record.time,
                            host,
                            path,
                            slow_for,
                            f"{now - previous:.2f} s after the last",
                        )
                    )
                    bad.update(slow_for)
            last_request[key] = now
    for report in reports.values():
        report.consistent_with = tuple(
            i for i in IDENTITIES if i not in broken.get(report.client, set())
        )
    return list(reports.values())


def _virtual(identity: str) -> tuple[str, ...]:
    return () if identity == NO_VIRTUAL_AGENT else (identity,)


def _allowed(robots: RobotsFile, path: str, agent: str, identity: str) -> bool:
    return robots.allowed(path, agent, _virtual(identity))


def _delay(robots: RobotsFile, agent: str, identity: str) -> float | None:
    return robots.crawl_delay(agent, _virtual(identity))


def load_policies(directory: Path) -> dict[str, HostPolicy]:
    """The served robots.txt policy and honeypots of every capsule in ``directory``."""
    policies = {}
    for host, capsule in load_capsules(directory).items():
        try:
            honeypots = load_expectation(capsule.root).honeypots
        except ExpectError:
            honeypots = ()
        policies[host] = HostPolicy(served_robots(capsule), honeypots)
    return policies


def format_text(report: ClientReport) -> list[str]:
    lines = [f"{report.client}: {report.requests} requests to {len(report.robots_first)} hosts"]
    late = sorted(h for h, first in report.robots_first.items() if not first)
    lines.append(
        "  robots.txt first: yes" if not late else f"  robots.txt first: no on {', '.join(late)}"
    )
    lines.append(f"  forbidden requests: {len(report.forbidden)}")
    for v in report.forbidden:
        lines.append(f"    {v.host}{v.path}  forbidden for {', '.join(v.identities)}")
    lines.append(f"  honeypot hits: {len(report.honeypots)}")
    for v in report.honeypots:
        lines.append(f"    {v.host}{v.path}")
    lines.append(
        f"  rate: {len(report.rate_refused)} refused with 44, "
        f"{len(report.during_wait)} during a 44 wait, "
        f"{len(report.too_fast)} faster than Crawl-delay"
    )
    for v in report.during_wait + report.too_fast:
        lines.append(f"    {v.host}{v.path}  {v.detail}")
    consistent = ", ".join(report.consistent_with) or "none"
    lines.append(f"  consistent with: {consistent}")
    return lines


def run_report(args: argparse.Namespace) -> int:
    directory = Path(args.capsules) if args.capsules else bundled_capsules()
    if directory is None:
        raise CommandError("no bundled capsules found; give --capsules DIR")
    try:
        policies = load_policies(directory)
        records = [record for _, record in read_log(Path(args.log))]
    except FileNotFoundError as exc:
        raise CommandError(f"{exc.filename}: no such file") from None
    except (LogFormatError, CapsuleConfigError) as exc:
        raise CommandError(str(exc)) from None
    reports = build_report(records, policies, args.agent)
    for report in reports:
        if args.json:
            emit_json(report.as_dict())
        else:
            print("\n".join(format_text(report)))
    return EXIT_OK if all(r.compliant for r in reports) else EXIT_NEGATIVE


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "report", help="say which client broke which capsule's policy, from an access log"
    )
    parser.add_argument("log", metavar="LOG", help="access log (JSON lines) from 'serve --log'")
    parser.add_argument("--capsules", metavar="DIR", help="capsules folder (default: bundled)")
    parser.add_argument(
        "--agent", default="geminibot", help="product token to decide for (default: geminibot)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per client")
    parser.set_defaults(run=run_report)
