"""The census's policy figures: how capsules use robots.txt, the virtual agents,
robots2.txt, agents.txt and "version 2.0" rule sets, read from the policy files the crawl
keeps (``robots``: each file's last fetch, its outcome, status and body) and the fetches
that got them (their MIME type).

What a virtual agent is refused is read from robots.txt alone, as the crawl's own agent
token acting as that virtual agent (most-restrictive combination), in each mode:
closed entirely (``/`` disallowed), in part (``/`` allowed, some path a rule of its groups
names disallowed), not at all (no rule disallows it anything; also a capsule without a
robots.txt).

security.txt (RFC 9116) is read where a ``crawl --as researcher`` fetched it: well-formed
when it has a Contact URI and one RFC 3339 Expires, expired or not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime

from geminibot.census.model import Figure
from geminibot.policy import VIRTUAL_AGENTS, RobotsFile, has_errors, parse_robots
from geminibot.policy.cli import lint_file
from geminibot.policy.ext20 import parse_ext20
from geminibot.policy.security_txt import SECURITY_TXT, parse_security_txt
from geminibot.store import census_reads, policy_reads
from geminibot.store.database import Database

#: The policy files a crawl fetches, as the ``robots`` table names them.
ROBOTS, ROBOTS2, AGENTS = "robots.txt", "robots2.txt", "agents.txt"
_WINDOW = "each capsule's last fetch of the file"


def probe_paths(robots: RobotsFile, tokens: set[str]) -> list[str]:
    """Paths the Disallow rules of the groups naming ``tokens`` (or ``*``) name: each
    pattern's prefix up to its first ``*``, and a path the whole pattern matches."""
    paths: list[str] = []
    for group in robots.groups:
        if not {a.token for a in group.agents} & (tokens | {"*"}):
            continue
        for rule in group.rules:
            if not rule.allow and rule.pattern:
                # the pattern's own prefix, and a path it matches (each * as one letter)
                for written in (rule.pattern.split("*", 1)[0], rule.pattern.replace("*", "x")):
                    path = written.removesuffix("$")
                    paths.append(path if path.startswith("/") else "/" + path)
    return paths


def refusal(robots: RobotsFile, base: str, agent: str, virtual: str, strict: bool) -> str:
    """``entirely``, ``in part`` or ``not at all``: what robots.txt refuses ``agent`` acting
    as ``virtual`` (in the ``strict`` mode or not) on the capsule at ``base`` (its URL
    without a path)."""
    acting = (virtual,)
    if not robots.allowed(base + "/", agent, acting, strict=strict):
        return "entirely"
    for path in probe_paths(robots, {agent, virtual}):
        if not robots.allowed(base + path, agent, acting, strict=strict):
            return "in part"
    return "not at all"


class _RobotsTally:
    """The robots.txt figures, counted one capsule at a time."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.status: Counter[str] = Counter()
        self.mime: Counter[str] = Counter()
        self.present = self.well_formed = self.v2 = 0
        self.naming: Counter[str] = Counter({va: 0 for va in VIRTUAL_AGENTS})
        self.refused: dict[tuple[str, bool], Counter[str]] = {
            (va, strict): Counter({"entirely": 0, "in part": 0, "not at all": 0})
            for va in VIRTUAL_AGENTS
            for strict in (False, True)
        }
        self.lint: Counter[str] = Counter()

    def add(self, host: str, fetched: tuple[str, int | None, bytes] | None, mime: str) -> None:
        """One capsule's robots.txt as last fetched (None: never fetched)."""
        if fetched is None:
            self.status["not fetched"] += 1
            return
        outcome, status, body = fetched
        self.status["error" if status is None else str(status)] += 1
        parsed = RobotsFile.allow_all("no robots.txt")
        if outcome == "success":
            self.present += 1
            self.mime[mime] += 1
            parsed = parse_robots(body)
            findings = lint_file(ROBOTS, body)
            self.well_formed += not has_errors(findings)
            self.lint.update(f"robots.txt {d.code}" for d in findings if d.level != "info")
            for va in VIRTUAL_AGENTS:
                self.naming[va] += va in parsed.tokens
            self.v2 += parse_ext20(body, parsed).has_version_lines
        elif outcome == "unreachable":
            parsed = RobotsFile.disallow_all("robots.txt unreachable")
        for (va, strict), counts in self.refused.items():
            counts[refusal(parsed, f"gemini://{host}", self.agent, va, strict)] += 1


def policy_figures(conn: Database, host: str | None, agent: str) -> Iterator[Figure]:
    """The policy section's figures over ``host`` (None: every Gemini capsule)."""
    capsules = census_reads.hosts(conn, host)
    files: dict[tuple[str, str], tuple[str, int | None, bytes]] = {
        (f.host, f.name): (str(f.outcome.kind), f.status, f.body or b"")
        for f in policy_reads.files(conn, host)
    }
    mimes = _policy_mimes(conn, host)

    tally = _RobotsTally(agent)
    for capsule in capsules:
        fetched = files.get((capsule, ROBOTS))
        tally.add(capsule, fetched, mimes.get((capsule, ROBOTS), "-"))
    robots_status, robots_mime, naming, refused, lint = (
        tally.status,
        tally.mime,
        tally.naming,
        tally.refused,
        tally.lint,
    )
    present, well_formed, v2 = tally.present, tally.well_formed, tally.v2
    others: dict[str, int] = {ROBOTS2: 0, AGENTS: 0}
    for (_, name), (outcome, _, body) in files.items():
        if name in others and outcome == "success":
            others[name] += 1
            findings = lint_file(name, body)
            lint.update(f"{name} {d.code}" for d in findings if d.level != "info")
    yield Figure(
        "robots.capsules", "capsules whose policy files the census reads", len(capsules), _WINDOW
    )
    yield Figure("robots.present", "capsules with a robots.txt (answered 20)", present, _WINDOW)
    yield Figure(
        "robots.well_formed", "robots.txt files with no error found by lint", well_formed, _WINDOW
    )
    yield Figure(
        "robots.status", "robots.txt fetches by status", dict(robots_status.most_common()), _WINDOW
    )
    yield Figure(
        "robots.mime", "robots.txt files by MIME type", dict(robots_mime.most_common()), _WINDOW
    )
    yield Figure(
        "robots.naming",
        "robots.txt files with a group naming each virtual agent",
        dict(naming),
        _WINDOW,
    )
    for strict in (False, True):
        mode = "strict" if strict else "non-strict"
        for va in VIRTUAL_AGENTS:
            yield Figure(
                f"refused{'_strict' if strict else ''}.{va}",
                f"capsules whose robots.txt refuses {va} ({mode} mode): entirely, in part,"
                " not at all",
                dict(refused[(va, strict)]),
                _WINDOW,
            )
    yield Figure("robots.v2", 'robots.txt files with "version 2.0" rule sets', v2, _WINDOW)
    yield Figure(
        "robots2.present", "capsules with a robots2.txt (answered 20)", others[ROBOTS2], _WINDOW
    )
    yield Figure(
        "agents.present", "capsules with an agents.txt (answered 20)", others[AGENTS], _WINDOW
    )
    yield Figure(
        "lint.findings",
        "lint warnings and errors in policy files, by file and kind",
        dict(sorted(lint.items(), key=lambda kv: (-kv[1], kv[0]))),
        _WINDOW,
    )


def security_figures(conn: Database, host: str | None, now: float) -> Iterator[Figure]:
    """How many capsules of ``host`` (None: every Gemini capsule) publish a security.txt,
    well-formed, expired at ``now``."""
    at = datetime.fromtimestamp(now, UTC)
    capsules = census_reads.host_count(conn, host)
    present = well_formed = expired = read_files = 0
    for file in policy_reads.files(conn, host, SECURITY_TXT):
        read_files += 1
        if file.outcome.kind == "success":
            present += 1
            read = parse_security_txt(file.body or b"")
            well_formed += read.well_formed
            expired += read.well_formed and read.expired(at)
    not_read = capsules - read_files
    window = "each capsule's last fetch of /.well-known/security.txt"
    yield Figure("security.present", "capsules with a security.txt (answered 20)", present, window)
    yield Figure(
        "security.well_formed",
        "security.txt files well-formed (a Contact URI, one RFC 3339 Expires)",
        well_formed,
        window,
    )
    yield Figure(
        "security.expired",
        "well-formed security.txt files expired at the census",
        expired,
        window,
    )
    yield Figure(
        "security.not_read",
        "capsules whose security.txt the crawl did not read (not a researcher's crawl;"
        " robots.txt refused it or was not read)",
        not_read,
        window,
    )


def _policy_mimes(conn: Database, host: str | None) -> dict[tuple[str, str], str]:
    """Each capsule's policy files' MIME type, from the last 20 answer that got them."""
    found: dict[tuple[str, str], str] = {}
    for key, url, meta in policy_reads.file_fetches(conn, host):
        name = url.rsplit("/", 1)[-1]
        found[(key, name)] = meta.split(";", 1)[0].strip().lower() or "-"
    return found
