"""The compliance judge: which client broke which capsule's policy, from the access log.

Every capsule's policy is the :class:`~geminibot.policy.site_policy.SitePolicy` a bot
obtains from the running server (robots.txt through its redirects, robots2.txt and its
chain, agents.txt; 41/44/51 answers mapped as RFC 9309 asks), the same object the crawler
obeys. Each request of each client (:data:`CLIENT_IS`) is judged, at the time the log gives it,
under every *identity* a bot may have: each virtual agent in precedence and in strict
mode, the ``--agent`` product token on its own (both modes), and ``*`` (a bot no group
names). Judged under each identity:

- ``forbidden``: :meth:`SitePolicy.may_fetch` refuses the request (robots.txt 1.0 and 2.0
  rules, ``Visit-time`` on the log's clock, robots2.txt path rules and ``crawl: no`` or
  ``ask`` for the identity's robots2 category, agents.txt, fail-closed included). The
  policy files themselves (and the redirects and chain links that lead to them) are never
  forbidden;
- ``too fast``: the request came sooner after the client's previous request to the host
  than :meth:`SitePolicy.delay` asks (Crawl-delay, Request-rate, robots2 ``rate``,
  agents.txt ``limit=``; never the rule of thumb, which no file states). Requests for the
  policy files are not paced (a bot cannot know the pace before reading them).

Judged the same for every identity:

- ``before robots.txt``: a request on a host before the client read its robots.txt to
  the end of any redirect chain;
- ``honeypot``: a request under a capsule's ``honeypots`` prefixes (expect.toml);
- ``during 44 wait``: a request to a host while an earlier ``44`` asked the client to
  wait (the meta's seconds, else one second); the requests of one wait are one breach;
- ``maze depth`` / ``maze pages``: deeper than :data:`MAZE_MAX_DEPTH` path segments into
  a link maze, or more than :data:`MAZE_MAX_PAGES` of its pages;
- ``redirects``: a request reached by following more than :data:`MAX_REDIRECTS` redirects
  in a row;
- ``size``: a file of :data:`LARGE_FILE_BYTES` or more fetched in full more than once.

Breaches of one rule on one host fold into one line with a count. A client is
``compliant`` when at least one identity has no breach. The report then details the
breaches of the identity it came closest to (fewest breaching requests), or of ``--as``.

:func:`build_report` is pure (records and policies in, reports out) and the one judging
routine: ``capsule-server report`` runs it on a log, the range on the records it kept (the
same records, so they always agree); :func:`load_policies`
reads the capsules' folders; :mod:`capsule_server.report` renders the reports and is the
``report`` command.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from capsule_server.expect import ExpectError, load_expectation, served_policy
from capsule_server.files import load_capsules
from geminibot.crawl.settings import ROLE_CATEGORIES
from geminibot.gemini.accesslog import AccessRecord
from geminibot.gemini.gemtext import resolve_link
from geminibot.net.addresses import address_key
from geminibot.net.limits import MAX_REDIRECTS
from geminibot.policy import VIRTUAL_AGENTS, RobotsFile
from geminibot.policy.site_policy import Bot, FetchDecision, SitePolicy

POLICY_FILES = ("/robots.txt", "/robots2.txt", "/agents.txt")
#: How clients are told apart, as the server's per-address limits count them
#: (:func:`geminibot.net.addresses.address_key`).
CLIENT_IS = "an IPv4 address or an IPv6 /64 network"
NO_VIRTUAL_AGENT = "*"
#: The product token of the ``*`` identity: one no policy file names.
NOBODY = "*"
#: A link maze deeper than this many path segments is a breach (the crawler's default
#: depth bound, ``geminibot.store.traps.DEFAULT_MAX_DEPTH``).
MAZE_MAX_DEPTH = 16
#: More pages than this of one link maze is a breach.
MAZE_MAX_PAGES = 1000
#: A file at least this large may be fetched in full once per client.
LARGE_FILE_BYTES = 1024 * 1024
#: Tolerance on pacing (seconds): the log's times are those of accept(), to the millisecond.
PACE_SLACK = 0.05
#: Breach kinds, in the order the report lists them.
KINDS = (
    "before robots.txt",
    "honeypot",
    "forbidden",
    "during 44 wait",
    "too fast",
    "redirects",
    "maze depth",
    "maze pages",
    "size",
)


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a client may be: a name for the report, and the bot it stands for."""

    name: str
    bot: Bot


def identities(agent: str = "geminibot") -> tuple[Identity, ...]:
    """Every virtual agent (precedence, strict), ``agent`` alone (both modes), ``*``."""
    out = []
    for va in VIRTUAL_AGENTS:
        category = ROLE_CATEGORIES.get(va)
        out.append(Identity(va, Bot(agent, (va,), category)))
        out.append(Identity(f"{va} (strict)", Bot(agent, (va,), category, strict=True)))
    out.append(Identity(agent, Bot(agent)))
    out.append(Identity(f"{agent} (strict)", Bot(agent, strict=True)))
    out.append(Identity(NO_VIRTUAL_AGENT, Bot(NOBODY)))
    return tuple(out)


def identity_names(agent: str = "geminibot") -> tuple[str, ...]:
    return tuple(i.name for i in identities(agent))


@dataclass(slots=True)
class HostPolicy:
    """What the range judges on one capsule."""

    site: SitePolicy
    #: Paths a bot fetches to read the policy (never forbidden, never paced).
    policy_paths: frozenset[str] = frozenset(POLICY_FILES)
    honeypots: tuple[str, ...] = ()
    maze_prefix: str | None = None
    #: Paths of files of :data:`LARGE_FILE_BYTES` or more, with their size.
    large_files: Mapping[str, int] = field(default_factory=dict)

    @property
    def robots(self) -> RobotsFile:
        return self.site.robots or RobotsFile.allow_all("no robots.txt")


@dataclass(slots=True)
class Breach:
    """One rule broken on one host: the first request that broke it, and how many did."""

    kind: str
    time: str
    host: str
    path: str
    file: str = ""
    line: int = 0
    rule: str = ""
    detail: str = ""
    count: int = 1

    @property
    def where(self) -> str:
        """``file:line rule`` (what was broken), or the rule alone."""
        place = f"{self.file}:{self.line}" if self.file and self.line else self.file
        return " ".join(p for p in (place, self.rule) if p)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "time": self.time,
            "host": self.host,
            "path": self.path,
            "file": self.file,
            "line": self.line,
            "rule": self.rule,
            "detail": self.detail,
            "count": self.count,
        }


@dataclass(slots=True)
class ClientReport:
    """What one client (:data:`CLIENT_IS`) did and broke: its requests, its breaches
    under each identity, the identity it is judged as, and the verdict and scorecard that
    follow."""

    client: str
    requests: int = 0
    #: The log's times of its first and last requests.
    first_time: str = ""
    last_time: str = ""
    hosts: dict[str, int] = field(default_factory=dict)
    #: Breaches by identity name (the shared ones included in each).
    by_identity: dict[str, list[Breach]] = field(default_factory=dict)
    #: The identity the details are for: ``--as``, else the closest one.
    judged_as: str = ""
    #: True when ``--as`` chose :attr:`judged_as`: then only that identity can pass.
    judged_as_given: bool = False
    capsules: tuple[str, ...] = ()
    #: Per identity name: the numbers (in time order) of the requests that broke a rule.
    offending: dict[str, set[int]] = field(default_factory=dict)
    #: Requests the server itself refused with 44 for going over its rate (not a breach).
    rate_refused: list[Breach] = field(default_factory=list)

    @property
    def during_wait(self) -> list[Breach]:
        return [b for b in self.breaches if b.kind == "during 44 wait"]

    @property
    def consistent_with(self) -> tuple[str, ...]:
        """The identities under which the client broke nothing."""
        return tuple(name for name, found in self.by_identity.items() if not found)

    @property
    def compliant(self) -> bool:
        """Consistent with the ``--as`` identity, or without one with any identity."""
        if self.judged_as_given:
            return self.judged_as in self.consistent_with
        return bool(self.consistent_with)

    @property
    def breaches(self) -> list[Breach]:
        """The breaches of :attr:`judged_as`, in time order."""
        return self.by_identity.get(self.judged_as, [])

    @property
    def forbidden_requests(self) -> int:
        """How many requests broke a rule as :attr:`judged_as` (one may break several)."""
        return len(self.offending.get(self.judged_as, ()))

    @property
    def robots_first(self) -> dict[str, bool]:
        late = {b.host for b in self.breaches if b.kind == "before robots.txt"}
        return {host: host not in late for host in self.hosts}

    def verdict(self) -> str:
        if self.compliant:
            return f"compliant as {', '.join(self.consistent_with)}"
        first = self.breaches[0]
        n = self.forbidden_requests
        return (
            f"not compliant: {n} forbidden request{'s' if n != 1 else ''}, first at "
            f"{short_time(first.time)} gemini://{first.host}{first.path} ({first.kind})"
        )

    def scorecard(self) -> list[tuple[str, str]]:
        """(capsule, ``pass`` / ``fail: reason`` / ``not visited``) per capsule."""
        out = []
        for host in self.capsules:
            if host not in self.hosts:
                out.append((host, "not visited"))
                continue
            found = [b for b in self.breaches if b.host == host]
            if not found:
                out.append((host, "pass"))
                continue
            first = found[0]
            more = sum(b.count for b in found) - 1
            reason = f"{first.kind} {first.path}"
            if first.where:
                reason += f" ({first.where})"
            if more:
                reason += f" and {more} more"
            out.append((host, f"fail: {reason}"))
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "verdict": self.verdict(),
            "compliant": self.compliant,
            "client_is": CLIENT_IS,
            "requests": self.requests,
            "first_request": self.first_time,
            "last_request": self.last_time,
            "consistent_with": list(self.consistent_with),
            "judged_as": self.judged_as,
            "breaches": [b.as_dict() for b in self.breaches],
            "forbidden_requests": self.forbidden_requests,
            "refused_with_44": len(self.rate_refused),
            "robots_first": self.robots_first,
            "identities": {name: len(self.offending[name]) for name in self.by_identity},
            "scorecard": dict(self.scorecard()),
        }


def record_time(record: AccessRecord) -> float | None:
    try:
        moment = dt.datetime.fromisoformat(record.time)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


def short_time(time: str) -> str:
    """``2026-11-23T23:00:05.123Z`` as ``2026-11-23 23:00:05``."""
    return time[:19].replace("T", " ")


def wait_seconds(meta: str | None) -> float:
    """The seconds a ``44``'s meta asks to wait (one without a number)."""
    try:
        return float(meta or "")
    except ValueError:
        return 1.0  # no number: exponential back-off from one second, per v0.24.1


@dataclass(slots=True)
class _HostState:
    """One client's progress on one host."""

    robots_read: bool = False
    robots_next: str | None = "/robots.txt"  # the next path of robots.txt's redirect chain
    last: float | None = None  # when the last paced request was accepted
    wait_until: float | None = None
    wait_rule: str = ""
    maze_pages: set[str] = field(default_factory=set)
    large_fetched: set[str] = field(default_factory=set)


class _Judge:
    """Judges one client's records, in time order."""

    def __init__(
        self, client: str, policies: Mapping[str, HostPolicy], idents: Sequence[Identity]
    ) -> None:
        self.report = ClientReport(
            client,
            by_identity={i.name: [] for i in idents},
            offending={i.name: set() for i in idents},
        )
        self.policies = policies
        self.idents = idents
        self.hosts: dict[str, _HostState] = {}
        self.redirected: dict[str, int] = {}  # URL a redirect pointed at -> hops so far
        self.folded: dict[tuple[str, tuple[object, ...]], Breach] = {}

    def add(self, breach: Breach, key: tuple[object, ...], who: Iterable[str]) -> None:
        for name in who:
            self.report.offending[name].add(self.report.requests)
            found = self.folded.get((name, key))
            if found is not None:
                found.count += 1
                continue
            copy = replace(breach)
            self.folded[(name, key)] = copy
            self.report.by_identity[name].append(copy)

    def everyone(self, breach: Breach, key: tuple[object, ...]) -> None:
        self.add(breach, (breach.kind, breach.host, *key), self.report.by_identity)

    def judge(self, record: AccessRecord) -> None:
        host, path = record.host or "", record.path or ""
        now = record_time(record)
        report = self.report
        report.requests += 1
        report.first_time = report.first_time or record.time
        report.last_time = record.time
        report.hosts[host] = report.hosts.get(host, 0) + 1
        seen = _Seen(
            record,
            host,
            path,
            f"gemini://{host}{path}",
            now,
            dt.datetime.fromtimestamp(now, dt.UTC) if now is not None else None,
            self.hosts.setdefault(host, _HostState()),
        )
        self._judge_redirects(seen)
        policy = self.policies.get(host)
        is_policy = policy is not None and path in policy.policy_paths
        if not seen.state.robots_read:
            self._judge_robots_first(seen, is_policy)
        self._judge_waits(seen)
        if policy is None:
            return
        trapped = self._judge_traps(seen, policy)
        if is_policy or seen.at is None:
            return
        self._judge_rules(seen, policy, seen.at, trapped=trapped)
        if now is not None:
            seen.state.last = now

    def _judge_redirects(self, seen: _Seen) -> None:
        """More than MAX_REDIRECTS in a row; remembers where this one points."""
        record = seen.record
        hops = self.redirected.pop(seen.url, 0)
        if hops > MAX_REDIRECTS:
            rule = f"at most {MAX_REDIRECTS} redirects in a row"
            self.everyone(seen.breach("redirects", rule=rule, detail=f"{hops} followed"), ())
        if record.status in (30, 31) and record.meta:
            self.redirected[resolve_link(record.meta.strip(), seen.url)] = hops + 1

    def _judge_robots_first(self, seen: _Seen, is_policy: bool) -> None:
        """Follows robots.txt's redirect chain; any other request before its end is a breach."""
        record, state, host = seen.record, seen.state, seen.host
        if seen.path == state.robots_next and record.status is not None:
            target = resolve_link((record.meta or "").strip(), seen.url)
            if record.status in (30, 31) and urlsplit(target).netloc == host:
                state.robots_next = urlsplit(target).path or "/"
            elif record.status != 44 and record.status // 10 != 4:
                state.robots_read = True
            else:
                state.robots_next = "/robots.txt"  # unreachable: fetch again later
        elif not is_policy:
            detail = "robots.txt not read (to the end of its redirects)"
            self.everyone(
                seen.breach("before robots.txt", rule="robots.txt first", detail=detail), ()
            )

    def _judge_waits(self, seen: _Seen) -> None:
        """Requests during a 44's wait; a 44 starts (or extends) one."""
        record, state, now = seen.record, seen.state, seen.now
        during = now is not None and state.wait_until is not None and now < state.wait_until
        if during and now is not None and state.wait_until is not None:
            detail = f"{state.wait_until - now:.1f} s early"
            self.everyone(
                seen.breach("during 44 wait", rule=state.wait_rule, detail=detail),
                (state.wait_rule,),
            )
        if record.status == 44 and record.limited == "rate":
            self.report.rate_refused.append(
                seen.breach("refused with 44", rule="the server's rate")
            )
        if record.status == 44 and now is not None:
            seconds = wait_seconds(record.meta)
            state.wait_until = now + seconds
            if not during:  # a 44 answered to a request made during a wait extends that wait
                when = short_time(record.time)[11:]
                state.wait_rule = f"44 at {when} asked for {seconds:g} s"

    def _judge_traps(self, seen: _Seen, policy: HostPolicy) -> bool:
        """Honeypots, the maze's limits, large files fetched twice; True if trapped."""
        path, state = seen.path, seen.state
        trapped = any(path.startswith(prefix) for prefix in policy.honeypots)
        if trapped:  # the honeypot breach stands for the forbidden request too
            at = seen.at or _EPOCH
            refusal = _first_refusal(policy.site.may_fetch(seen.url, Bot(NOBODY), at))
            file, line, rule = refusal if refusal else ("expect.toml", 0, "honeypots")
            self.everyone(seen.breach("honeypot", file=file, line=line, rule=rule), (path,))
        if policy.maze_prefix is not None and path.startswith(policy.maze_prefix):
            self._judge_maze(seen)
        size = policy.large_files.get(path)
        if size is not None and seen.record.status == 20:
            if path in state.large_fetched:
                rule = f"a file of {size >> 20} MiB fetched once"
                self.everyone(seen.breach("size", rule=rule, detail="fetched again"), (path,))
            state.large_fetched.add(path)
        return trapped

    def _judge_maze(self, seen: _Seen) -> None:
        path, state = seen.path, seen.state
        depth = len([s for s in path.split("?")[0].split("/") if s])
        if depth > MAZE_MAX_DEPTH:
            rule = f"at most {MAZE_MAX_DEPTH} levels into the maze"
            self.everyone(seen.breach("maze depth", rule=rule, detail=f"{depth} levels"), ())
        state.maze_pages.add(path)
        if len(state.maze_pages) == MAZE_MAX_PAGES + 1:
            rule = f"at most {MAZE_MAX_PAGES} maze pages"
            self.everyone(seen.breach("maze pages", rule=rule), ())

    def _judge_rules(
        self, seen: _Seen, policy: HostPolicy, at: dt.datetime, *, trapped: bool
    ) -> None:
        """Each identity's own verdict: forbidden by a rule, or faster than its pace."""
        record, host, path, url = seen.record, seen.host, seen.path, seen.url
        last, now = seen.state.last, seen.now
        for ident in self.idents:
            decision = policy.site.may_fetch(url, ident.bot, at)
            refusal = _first_refusal(decision)
            if refusal is not None and not trapped:
                file, line, rule = refusal
                found = Breach("forbidden", record.time, host, path, file, line, rule)
                self.add(found, ("forbidden", host, file, line), (ident.name,))
            if last is not None and now is not None:
                pace = policy.site.delay(ident.bot, at, url=url)
                gap = now - last
                if pace.file and gap + PACE_SLACK < pace.seconds:
                    found = Breach(
                        "too fast",
                        record.time,
                        host,
                        path,
                        _short_file(pace.file),
                        pace.line,
                        pace.rule,
                        f"{gap:.2f} s after the previous request",
                    )
                    self.add(found, ("too fast", host, pace.file, pace.line), (ident.name,))


@dataclass(slots=True, frozen=True)
class _Seen:
    """One record as the judge reads it: where it went, when, and its host's state."""

    record: AccessRecord
    host: str
    path: str
    url: str
    now: float | None
    at: dt.datetime | None
    state: _HostState

    def breach(self, kind: str, **kw: Any) -> Breach:
        return Breach(kind, self.record.time, self.host, self.path, **kw)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _first_refusal(decision: FetchDecision) -> tuple[str, int, str] | None:
    for reason in decision.reasons:
        if not reason.allowed:
            rule = reason.rule or _LINE_PREFIX.sub("", reason.text)  # the line is given apart
            return _short_file(reason.file), reason.line, rule
    return None


_LINE_PREFIX = re.compile(r"^line \d+: ")


def _short_file(file: str) -> str:
    """A chain link's URL as its path (the host is the breach's own)."""
    return (urlsplit(file).path if "://" in file else file).lstrip("/")


def build_report(
    records: Iterable[AccessRecord],
    policies: Mapping[str, HostPolicy],
    agent: str = "geminibot",
    judge_as: str | None = None,
) -> list[ClientReport]:
    """One report per client (:data:`CLIENT_IS`: :func:`address_key` of the record's
    address), in order of first appearance."""
    idents = identities(agent)
    names = [i.name for i in idents]
    if judge_as is not None and judge_as not in names:
        raise ValueError(f"unknown identity {judge_as!r}; known: {', '.join(names)}")
    judges: dict[str, _Judge] = {}
    # Records are written when connections end; order them by when they began.
    for record in sorted(records, key=lambda r: record_time(r) or 0.0):
        if record.host is None or record.path is None:
            continue  # no request was read (timeout, TLS failure, malformed line)
        client = address_key(record.client)
        judge = judges.get(client)
        if judge is None:
            judge = judges[client] = _Judge(client, policies, idents)
        judge.judge(record)
    reports = []
    for judge in judges.values():
        report = judge.report
        report.capsules = tuple(sorted(policies))
        for found in report.by_identity.values():
            found.sort(key=lambda b: (_when_text(b.time), KINDS.index(b.kind)))
        if judge_as is not None:
            report.judged_as, report.judged_as_given = judge_as, True
        else:
            report.judged_as = min(names, key=lambda n: len(report.offending[n]))
        reports.append(report)
    return reports


def _when_text(time: str) -> float:
    return record_time(AccessRecord("", time=time)) or 0.0


# -- the policies the capsules serve ----------------------------------------------------


def load_policies(directory: Path) -> dict[str, HostPolicy]:
    """What the range judges on every capsule of ``directory``."""
    policies = {}
    for host, capsule in load_capsules(directory).items():
        try:
            honeypots = load_expectation(capsule.root).honeypots
        except ExpectError:
            honeypots = ()
        site, paths = served_policy(capsule)
        large = {
            path: gen.size
            for path, (gen, _mime) in capsule.config.generated.items()
            if gen.size >= LARGE_FILE_BYTES and path not in paths
        }
        policies[host] = HostPolicy(site, paths, honeypots, capsule.config.maze_prefix, large)
    return policies
