"""Why a page is in the search index or not, from what the crawl recorded (pure: the
records in, the answer out; the time is a parameter).

:func:`explain_url` names one reason, in words a capsule owner understands, from every
way a page stays out: a policy line (file, line, group, mode), a policy file the crawl
could not read (``41``, ``44``, ``5x``), a trap bound, the depth or per-host bound, a
duplicate, failed requests, not found (``51``, asked again) or gone (``52``), the operator's ``--exclude``, a host the
crawl was not told to visit, not reached yet, never linked. It never recomputes a recorded
decision from today's files: only for a URL the crawl never met does it say what the
files it holds *would* decide, and says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import lru_cache
from typing import Literal

from geminibot.cliutil import counted, with_article
from geminibot.crawl.runrecord import RunOptions
from geminibot.gemini.status import Status
from geminibot.policy import VIRTUAL_AGENTS
from geminibot.policy.robots_model import rule_from_text
from geminibot.policy.site_policy import ROBOTS, Bot, SitePolicy
from geminibot.store.freshness import DAY, NOT_FOUND_DELIST_AFTER, NOT_FOUND_DELIST_MISSES
from geminibot.store.traps import CAP_REASON
from geminibot.urls import host_name, host_protocol
from geminibot.why.records import FetchRow, PolicyFileRow, UrlRecords

Code = Literal[
    "searchable",
    "policy",
    "policy_file",
    "trap",
    "depth",
    "host_bound",
    "duplicate",
    "failed",
    "gone",
    "not_found",
    "excluded",
    "host_not_allowed",
    "queued",
    "not_linked",
    "not_text",
]

#: Hosts whose parsed policy is kept for the next answer (in each process).
POLICIES_KEPT = 8

#: What each reason is called, for a capsule owner.
HEADLINES: dict[str, str] = {
    "searchable": "searchable: in the index",
    "policy": "kept out by the capsule's policy",
    "policy_file": "kept out: the capsule's policy file could not be read",
    "trap": "kept out by a trap bound (the URL looks like a link maze)",
    "depth": "kept out: too many links away from where the crawl started",
    "host_bound": "kept out: the capsule has too many URLs",
    "duplicate": "not searchable: the same page as another URL",
    "failed": "not searchable: the requests for it failed",
    "gone": "not searchable: the capsule says it is gone",
    "not_found": "not searchable: the capsule says it is not found",
    "excluded": "kept out by the crawl's operator (--exclude)",
    "host_not_allowed": "kept out: the crawl was not told to visit this capsule",
    "queued": "not reached yet: waiting in the crawl's queue",
    "not_linked": "unknown: nothing the crawl fetched links to it",
    "not_text": "fetched, but nothing searchable in it",
}
_LINE = re.compile(r"\(line (\d+)\)")
_RULE = re.compile(r"by '(.+?)' \(line")
_GROUP = re.compile(r"in the group for (.+?) \(User-agent line (\d+)\)")


@dataclass(frozen=True)
class PolicyLine:
    """The policy line a decision rests on: file, line (0: the file as a whole), the rule,
    the group (its User-agent and what kind of name that is) and the mode."""

    file: str
    line: int
    rule: str
    group: str | None
    group_kind: str | None
    mode: str

    def as_dict(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "rule": rule_from_text(self.file, self.line, self.rule, self.group),
            "group": self.group,
            "group_kind": self.group_kind,
            "mode": self.mode,
        }

    def words(self) -> str:
        where = f"{self.file} line {self.line}" if self.line else self.file
        rule = f": {self.rule}" if self.rule else ""
        group = f"; the group for {self.group} ({self.group_kind})" if self.group else ""
        return f"{where}{rule}{group}; {self.mode} mode"


@dataclass(frozen=True)
class Answer:
    """One URL's answer: whether it is searchable, the one reason, and what else the
    crawl knows (its last answers, its next visit, who links to it)."""

    url: str
    host: str
    code: Code
    reason: str
    policy: PolicyLine | None = None
    last_fetched: float | None = None
    last_answer: str | None = None
    history: tuple[FetchRow, ...] = ()
    next_visit: float | None = None
    linked_from: tuple[str, ...] = ()
    duplicate_of: str | None = None
    aliases: tuple[str, ...] = ()
    #: What the policy files the crawl holds would decide now (only for unknown URLs).
    would_now: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def searchable(self) -> bool:
        return self.code == "searchable"

    @property
    def headline(self) -> str:
        return HEADLINES[self.code]

    def as_dict(self) -> dict[str, object]:
        return {
            "url": self.url,
            "host": self.host,
            "searchable": self.searchable,
            "code": self.code,
            "headline": self.headline,
            "reason": self.reason,
            "policy": None if self.policy is None else self.policy.as_dict(),
            "last_fetched": _iso(self.last_fetched),
            "last_answer": self.last_answer,
            "history": [
                {
                    "at": _iso(f.started),
                    "status": f.status,
                    "meta": f.meta,
                    "error": f.error,
                }
                for f in self.history
            ],
            "next_visit": _iso(self.next_visit),
            "linked_from": list(self.linked_from),
            "duplicate_of": self.duplicate_of,
            "aliases": list(self.aliases),
            "would_now": self.would_now,
            "notes": list(self.notes),
        }


def _iso(when: float | None) -> str | None:
    return None if when is None else datetime.fromtimestamp(when, UTC).isoformat()


def day(when: float) -> str:
    """A time as the answers show it."""
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d %H:%M UTC")


def policy_line(reason: str, agent: str, strict: bool | None) -> PolicyLine:
    """The policy line a recorded refusal names (``FILE: words``, as the policy core
    words it)."""
    file, _, text = reason.partition(": ")
    line = _LINE.search(text)
    rule = _RULE.search(text)
    group = _GROUP.search(text)
    token = group.group(1) if group else None
    kind = None
    if token is not None:
        if token == "*":
            kind = "every robot"
        elif token.lower() == agent.lower():
            kind = "this crawler's product token"
        elif token.lower() in VIRTUAL_AGENTS:
            kind = "a virtual agent"
        else:
            kind = "a product token"
    is_strict = "strict mode" in text or bool(strict)
    return PolicyLine(
        file,
        int(line.group(1)) if line else 0,
        rule.group(1) if rule else "",
        token,
        kind,
        "strict" if is_strict else "precedence",
    )


def unreadable_file(files: tuple[PolicyFileRow, ...]) -> PolicyFileRow | None:
    """The host's robots.txt when its last fetch left it unreachable (41, 44, 5x...)."""
    return next((f for f in files if f.name == ROBOTS and f.outcome == "unreachable"), None)


def explain_url(records: UrlRecords, now: float) -> Answer:
    """The answer for one URL from its records, at ``now``."""
    base = Answer(
        records.url,
        records.host,
        "searchable",
        "",
        linked_from=records.linked_from,
        aliases=records.aliases,
        history=records.history,
    )
    row = records.row
    if row is None:
        return _unknown(records, base, now)
    page = records.page
    if page is not None:
        base = _with_page(base, records)
    base = replace(base, next_visit=row.next_visit)
    if row.state == "trapped":
        return _trapped(base, row.reason or "")
    if row.state == "refused":
        return _refused(base, records, row.reason or "")
    if row.state == "failed":
        return _failed(base, row.reason)
    if row.state == "gone":
        status = page.status if page else None
        return replace(
            base,
            code="gone",
            reason=f"it answered {status if status is not None else 52} (gone) on "
            f"{day(row.updated_at)}; the crawl does not ask again unless told to "
            "(geminibot recheck)",
            next_visit=row.next_visit,
        )
    if row.state == "not_found":
        return _not_found(base, records)
    if row.state in ("queued", "leased") or page is None:
        return _queued(base, records, now)
    return _fetched(base, records)


def _not_found(answer: Answer, records: UrlRecords) -> Answer:
    """A URL that answered "not found" (51, 404), asked again later: out of the index, or
    still in it with its last live answer until it has stayed missing."""
    row, page = records.row, records.page
    assert row is not None
    last = next((f.status for f in records.history if f.status is not None), None)
    since = row.missing_since if row.missing_since is not None else row.updated_at
    times = "once" if row.misses <= 1 else f"{row.misses} times in a row"
    said = (
        f"it answered {last if last is not None else 'not found'} (not found) {times} "
        f"since {day(since)}"
    )
    if row.next_visit is not None:
        said += f"; the crawl asks again on {day(row.next_visit)}"
    if page is not None and page.text_indexed:
        kept = (
            f"in the index as {page.title!r}, its last answer before; {said}; it leaves the "
            f"index once it has stayed missing ({NOT_FOUND_DELIST_MISSES} answers in a "
            f"row, over {NOT_FOUND_DELIST_AFTER / DAY:g} days)"
        )
        return replace(answer, code="searchable", reason=kept)
    return replace(answer, code="not_found", reason=said)


def _with_page(answer: Answer, records: UrlRecords) -> Answer:
    page = records.page
    assert page is not None
    said = f"{page.status} {page.meta}".strip()
    return replace(answer, last_fetched=page.fetched_at, last_answer=said)


def _trapped(answer: Answer, reason: str) -> Answer:
    if reason.startswith("deeper than"):
        return replace(answer, code="depth", reason=f"the link is {reason}")
    if reason.endswith(CAP_REASON):
        return replace(answer, code="host_bound", reason=f"the capsule has {reason}")
    return replace(answer, code="trap", reason=f"the URL has {reason}")


def _refused(answer: Answer, records: UrlRecords, reason: str) -> Answer:
    if reason.startswith("excluded by --exclude"):
        pattern = reason.removeprefix("excluded by --exclude").strip()
        return replace(answer, code="excluded", reason=f"it matches --exclude {pattern}")
    run = records.settings.run
    line = policy_line(reason, records.settings.agent, run.strict if run else None)
    return replace(answer, code="policy", reason=reason, policy=line)


def _failed(answer: Answer, reason: str | None) -> Answer:
    errors = [f for f in answer.history if f.status is None or f.error]
    tried = f" ({len(errors)} of its last requests failed)" if errors else ""
    return replace(answer, code="failed", reason=f"{reason or 'the request failed'}{tried}")


def _queued(answer: Answer, records: UrlRecords, now: float) -> Answer:
    unreadable = unreadable_file(records.files)
    if unreadable is not None:
        status = unreadable.status if unreadable.status is not None else "no answer"
        return replace(
            answer,
            code="policy_file",
            reason=f"{unreadable.name} answered {status} ({unreadable.reason}) on "
            f"{day(unreadable.fetched_at)}: everything on the capsule is disallowed "
            "until it can be read",
            next_visit=unreadable.expires_at,
        )
    slowed = records.robots_answer
    if slowed is not None and slowed.status == Status.SLOW_DOWN and not _read_robots(records):
        return replace(
            answer,
            code="policy_file",
            reason=f"robots.txt answered {slowed.status} {slowed.meta} on "
            f"{day(slowed.started)}: the crawl sits out the wait and asks again; nothing "
            "else of the capsule is fetched before robots.txt is read",
            next_visit=records.host_row.not_before if records.host_row else None,
        )
    host = records.host_row
    ahead = records.queued_before
    waiting = f"{counted(ahead, 'URL')} of the capsule {'is' if ahead == 1 else 'are'} ahead of it"
    when = None
    if host is not None:
        # roughly: the host's next turn, then one delay per URL ahead of it
        when = max(host.not_before, now) + records.queued_before * _delay(records, now)
        if host.skipped_reason:
            waiting += f"; the last run left the capsule for later: {host.skipped_reason}"
    return replace(answer, code="queued", reason=waiting, next_visit=when)


def _read_robots(records: UrlRecords) -> bool:
    """Whether the crawl holds the host's robots.txt as read since its last answer."""
    answer = records.robots_answer
    return any(
        f.name == ROBOTS and (answer is None or f.fetched_at >= answer.started)
        for f in records.files
    )


def _delay(records: UrlRecords, now: float) -> float:
    """The seconds between two requests to the URL's host that its files set (0: none
    known yet)."""
    policy = site_policy(records.host, records.files)
    if policy is None:
        return 0.0
    s = records.settings
    bot = crawl_bot(s.agent, s.role, s.run.strict if s.run else False)
    last = records.host_row.last_duration if records.host_row else None
    return policy.delay(bot, datetime.fromtimestamp(now, UTC), last).seconds


def _fetched(answer: Answer, records: UrlRecords) -> Answer:
    page = records.page
    assert page is not None
    if page.duplicate_of is not None:
        kept = records.kept
        state = "searchable" if kept and kept.text_indexed else "kept as its canonical URL"
        return replace(
            answer,
            code="duplicate",
            duplicate_of=page.duplicate_of,
            reason=f"the same body as {page.duplicate_of}, which the index keeps ({state})",
        )
    if page.text_indexed:
        return replace(answer, code="searchable", reason=f"in the index as {page.title!r}")
    if page.redirect_to:
        why = f"a redirect to {page.redirect_to}"
    elif not 20 <= page.status < 30 and page.status != 200:
        why = f"it answered {page.status} {page.meta}".rstrip()
    elif records.settings.role not in ("indexer", "archiver"):
        why = f"the crawl keeps no text as {with_article(records.settings.role)}"
    else:
        why = f"no text to index ({page.mime or 'no type'}), or the capsule asks not to store it"
    return replace(answer, code="not_text", reason=why)


def _unknown(records: UrlRecords, answer: Answer, now: float) -> Answer:
    """A URL without a row: linked but never queued (excluded, another host), or never
    linked at all; and what the host's files would decide."""
    run = records.settings.run
    would = would_now(records, now)
    answer = replace(answer, would_now=would)
    if records.linked_from:
        outside = None if run is None else out_of_scope(run, records.url, records.host)
        if outside is not None:
            return replace(answer, code=outside[0], reason=outside[1])
        return replace(
            answer,
            code="host_not_allowed",
            reason="linked, but never queued: the crawl was not told to follow it "
            "(another capsule or protocol, or --exclude)",
        )
    return replace(
        answer,
        code="not_linked",
        reason="the crawl never met this URL: no page it fetched links to it",
    )


def out_of_scope(run: RunOptions, url: str, host: str) -> tuple[Code, str] | None:
    """Why the crawl's last ``run`` would not take ``url`` (on ``host``), as its code and
    reason (None: it would): an ``--exclude`` pattern, or a host neither a seed's nor
    allowed. ``why`` says it of a link never queued; ``/submit`` of a URL it refuses."""
    scope = run.scope()
    pattern = scope.excluded_by(url)
    if pattern is not None:
        return "excluded", f"it matches --exclude {pattern}"
    if not scope.host_allowed(host):
        return (
            "host_not_allowed",
            f"{host_name(host)} is neither a seed's host nor named by --allow-host, "
            "so links to it are not followed",
        )
    return None


def crawl_bot(records_agent: str, role: str, strict: bool) -> Bot:
    return Bot(records_agent, (role,) if role in VIRTUAL_AGENTS else (), None, strict)


@lru_cache(maxsize=POLICIES_KEPT)
def site_policy(host: str, files: tuple[PolicyFileRow, ...]) -> SitePolicy | None:
    """The host's policy from the files the crawl holds (None: it holds none); the last
    :data:`POLICIES_KEPT` are kept, so that asking again about a host, or about another
    of its URLs, does not parse its files again until they are fetched again."""
    named = {f.name: f.fetched() for f in files}
    if not named:
        return None
    return SitePolicy.build(
        host_protocol(host),
        named.get("robots.txt"),
        named.get("robots2.txt"),
        named.get("agents.txt"),
    )


def would_now(records: UrlRecords, now: float) -> str | None:
    """What the crawl's copies of the host's files would decide about the URL now."""
    policy = site_policy(records.host, records.files)
    if policy is None:
        return None
    s = records.settings
    strict = s.run.strict if s.run else False
    bot = crawl_bot(s.agent, s.role, strict)
    decision = policy.may_fetch(records.url, bot, datetime.fromtimestamp(now, UTC))
    robots = next((f for f in records.files if f.name == ROBOTS), None)
    fetched = f"the {ROBOTS} fetched on {day(robots.fetched_at)}" if robots else "its policy files"
    verdict = "allowed" if decision.allowed else f"refused ({decision.reason})"
    return f"with {fetched}, this URL would now be {verdict}"
