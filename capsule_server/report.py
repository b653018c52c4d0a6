"""The compliance report: each client's verdict, breaches and scorecard as text, gemtext
or JSON, and the ``report`` command that judges an access log
(:mod:`capsule_server.judge` judges)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from capsule_server.files import CapsuleConfigError, capsules_dir
from capsule_server.judge import (
    CLIENT_IS,
    ClientReport,
    HostPolicy,
    build_report,
    load_policies,
    record_time,
    short_time,
)
from geminibot.cliutil import (
    EXIT_NEGATIVE,
    EXIT_OK,
    CommandError,
    clipped,
    emit_json,
    terminal_safe,
    wrapped,
)
from geminibot.gemini.accesslog import AccessRecord, LogFormatError, read_log

# -- output ------------------------------------------------------------------------------


def _requests(report: ClientReport) -> str:
    n, hosts = report.requests, len(report.hosts)
    return f"{n} request{'s' if n != 1 else ''} to {hosts} host{'s' if hosts != 1 else ''}"


def _span(report: ClientReport) -> str:
    """``from 2026-12-07 18:52:08 to 19:01:13`` (the date again only if it changed)."""
    first, last = short_time(report.first_time), short_time(report.last_time)
    return f"from {first} to {last[11:] if last[:10] == first[:10] else last}"


def _breach_lines(report: ClientReport) -> list[str]:
    lines = []
    for b in report.breaches:
        times = f" ({b.count} requests)" if b.count > 1 else ""
        lines.append(f"  {short_time(b.time)}  {b.kind}{times}")
        lines.extend(wrapped(f"gemini://{b.host}{b.path}", "    "))
        broke = b.where or "-"
        lines.extend(wrapped(f"broke {broke}" + (f"; {b.detail}" if b.detail else ""), "    "))
    return lines


def format_text(report: ClientReport) -> list[str]:
    head, _, first = report.verdict().partition(", first at ")
    lines = wrapped(f"{report.client}: {head}", "")
    if first:
        lines.extend(wrapped(f"first at {first}", "  "))
    refused = f", {len(report.rate_refused)} refused with 44" if report.rate_refused else ""
    lines.append(f"  {_requests(report)}{refused}")
    lines.append(f"  {_span(report)}")
    lines.append(f"  told apart by address: a client is {CLIENT_IS}")
    if not report.compliant:
        lines.append("  consistent with: no identity")
    if report.breaches:
        lines.append(f"  breaches as {report.judged_as}:")
        lines.extend("  " + line for line in _breach_lines(report))
    lines.append("  scorecard:")
    width = max((len(h) for h in report.capsules), default=0)
    for host, score in report.scorecard():
        line = f"    {host:<{width}}  {terminal_safe(score)}"
        lines.append(clipped(line))
    lines.append(f"  verdict: {'compliant' if report.compliant else 'not compliant'}")
    return lines


def format_gmi(report: ClientReport) -> list[str]:
    """The scorecard as a gemtext page (a range may publish it as a capsule page)."""
    lines = [
        f"# Scorecard for {terminal_safe(report.client)}",
        "",
        report.verdict(),
        "",
    ]
    lines.append(f"Requests: {_requests(report)}, {_span(report)}.")
    lines.append(f"Clients are told apart by address: a client is {CLIENT_IS}.")
    lines.append(f"Consistent with: {', '.join(report.consistent_with) or 'no identity'}.")
    lines.append("")
    lines.append(f"## Capsules (as {report.judged_as})")
    lines.append("")
    for host, score in report.scorecard():
        lines.append(f"* {host}: {terminal_safe(score)}")
    if report.breaches:
        lines += ["", "## Breaches", ""]
        for b in report.breaches:
            times = f", {b.count} requests" if b.count > 1 else ""
            broke = f": broke {b.where}" if b.where else ""
            detail = f"; {b.detail}" if b.detail else ""
            lines.append(
                terminal_safe(
                    f"* {short_time(b.time)} {b.kind}{times} gemini://{b.host}{b.path}"
                    f"{broke}{detail}"
                )
            )
    lines += ["", f"Verdict: {'compliant' if report.compliant else 'not compliant'}"]
    return lines


FORMATS = ("text", "json", "gmi")


def render(report: ClientReport, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(report.as_dict(), ensure_ascii=False)
    return "\n".join(format_gmi(report) if fmt == "gmi" else format_text(report))


# -- the command -------------------------------------------------------------------------


def policies_for(given: str | None) -> dict[str, HostPolicy]:
    """The judged policies of the capsules in ``given`` (default: the bundled ones)."""
    directory = capsules_dir(given, "--capsules DIR", "a folder of capsules")
    try:
        policies = load_policies(directory)
    except CapsuleConfigError as exc:
        raise CommandError(str(exc)) from None
    if not policies:
        raise CommandError(f"{directory}: no capsule folders (named like host.test) to judge by")
    return policies


def read_records(log: Path) -> list[AccessRecord]:
    """The log's records; a CommandError when it is not an access log with requests."""
    if log.is_dir():
        raise CommandError(f"{log}: is a directory, expected an access log file")
    try:
        numbered = list(read_log(log))
    except FileNotFoundError:
        raise CommandError(f"{log}: no such file") from None
    except OSError as exc:
        raise CommandError(f"{log}: cannot read: {exc.strerror}") from None
    except LogFormatError as exc:
        raise CommandError(str(exc)) from None
    for number, record in numbered:
        if not record.client or not record.time:
            raise CommandError(f"{log}:{number}: not an access log record (no client or time)")
        if record_time(record) is None:
            raise CommandError(
                f"{log}:{number}: time {terminal_safe(record.time)!r} is not ISO 8601"
            )
    records = [r for _, r in numbered]
    if not any(r.host is not None and r.path is not None for r in records):
        raise CommandError(f"{log}: no requests in the log, nothing to judge")
    return records


def run_report(args: argparse.Namespace) -> int:
    records = read_records(Path(args.log))
    policies = policies_for(args.capsules)
    if not any(r.host in policies for r in records):
        raise CommandError(
            f"{args.log}: no request for any of these capsules; give the --capsules DIR "
            "the log was served from"
        )
    try:
        reports = build_report(records, policies, args.agent, args.judge_as)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    fmt = "json" if args.json else args.format
    for i, report in enumerate(reports):
        if fmt == "json":
            emit_json(report.as_dict())
        else:
            if i:
                print()
            print(render(report, fmt))
    return EXIT_OK if all(r.compliant for r in reports) else EXIT_NEGATIVE


def add_judging_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent", default="geminibot", help="product token to judge for (default: geminibot)"
    )
    parser.add_argument(
        "--detail",
        dest="judge_as",
        metavar="IDENTITY",
        help="detail the breaches of this identity (indexer, 'indexer (strict)', *, the "
        "--agent token...; default: the one the client came closest to)",
    )
    # The old spelling: elsewhere --as names the virtual agents a bot acts as.
    parser.add_argument("--as", dest="judge_as", help=argparse.SUPPRESS)


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "report",
        help="judge each client of an access log against every capsule's policy",
        description="Judge each client of an access log against every policy the capsules "
        "serve; lead with a verdict per client, then its breaches and a scorecard. "
        "Exit 0 if every client is compliant, 1 if one is not, 2 on bad input.",
    )
    parser.add_argument("log", metavar="LOG", help="access log (JSON lines) from 'serve --log'")
    parser.add_argument(
        "--capsules",
        metavar="DIR",
        help="capsules folder the log was served from (default: bundled)",
    )
    add_judging_options(parser)
    parser.add_argument(
        "--format", choices=FORMATS, default="text", help="output format (default: text)"
    )
    parser.add_argument("--json", action="store_true", help="same as --format json")
    parser.set_defaults(run=run_report)
