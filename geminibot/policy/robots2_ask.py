"""The ask protocol of robots2.txt v0.2.1: :func:`ask_request` describes the HEAD request
that asks a site for a directive whose value is ``ask``, :func:`ask_outcome` turns its
response into what the bot may do and for how long it may remember that, and
:class:`AskLedger` remembers the answers. Pure: the HTTP exchange belongs to the caller.

Ask scopes are globs whose ``*`` matches any run of characters, ``/`` included (the spec's
example reads "/blog/*" as everything under /blog/).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal
from urllib.parse import quote

from geminibot.policy.paths import path_of
from geminibot.policy.robots2 import ASKABLE

ASK_PATH = "/.well-known/robots2-ask"
#: An ``allow`` may be remembered at most this long (the spec's SHOULD, 24 hours).
ASK_ALLOW_CACHE = timedelta(hours=24)
#: A ``deny`` (or a 404: no endpoint) is remembered this long, so the bot does not ask again
#: for every URL; ask again after that.
ASK_DENY_CACHE = timedelta(hours=24)
#: Wait after a 429 without a usable Retry-After, and the longest wait a Retry-After can ask.
ASK_RETRY_DEFAULT = timedelta(seconds=60)
ASK_RETRY_MAX = timedelta(hours=24)

AskKind = Literal["allow", "allow-once", "deny", "not-found", "retry", "unparseable", "no-endpoint"]


@dataclass(frozen=True, slots=True)
class AskRequest:
    """The HEAD request of the ask protocol; the HTTP helper only performs it."""

    method: str
    path: str
    query: str
    headers: tuple[tuple[str, str], ...]

    @property
    def target(self) -> str:
        return f"{self.path}?{self.query}"


def agent_identity(name: str, version: str, category: str | None = None) -> str:
    """``name/version (category)``, the X-Agent-Identity value the spec recommends."""
    ident = f"{name}/{version}"
    return f"{ident} ({category})" if category else ident


def ask_request(directive: str, identity: str) -> AskRequest:
    """Describe the ask for ``directive`` by a bot announcing itself as ``identity``."""
    if directive not in ASKABLE:
        raise ValueError(f"{directive!r} cannot be asked; askable: {', '.join(sorted(ASKABLE))}")
    agent = identity.split(" ", 1)[0]
    query = f"directive={quote(directive, safe='')}&agent={quote(agent, safe='/')}"
    return AskRequest("HEAD", ASK_PATH, query, (("X-Agent-Identity", identity),))


@dataclass(frozen=True, slots=True)
class AskResponse:
    """What came back: ``status`` None means no endpoint could be reached at all."""

    status: int | None
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class AskOutcome:
    """What an ask's answer lets the bot do, where, and until when."""

    kind: AskKind
    #: Whether the bot may go ahead (for the paths ``scopes`` covers).
    proceed: bool
    #: Glob scopes the decision is limited to; empty means site-wide.
    scopes: tuple[str, ...]
    #: Until when the outcome may be reused; None means ask again next time.
    cache_until: datetime | None
    #: For 429: not before this time.
    retry_at: datetime | None
    reason: str

    def covers(self, path: str) -> bool:
        """Whether ``path`` (or a URL) is inside the scopes of this decision."""
        if not self.scopes:
            return True
        p = path_of(path)
        return any(fnmatch.fnmatchcase(p, scope) for scope in self.scopes)


def _header_values(headers: Iterable[tuple[str, str]], name: str) -> list[str]:
    low = name.lower()
    return [v.strip() for k, v in headers if k.strip().lower() == low]


def ask_outcome(response: AskResponse, now: datetime) -> AskOutcome:
    """The state machine of the ask protocol: one response in, what the bot may do out."""
    if response.status != 200:
        return _status_outcome(response, now)
    decisions = {v.lower() for v in _header_values(response.headers, "X-Robots2-Decision")}
    if len(decisions) != 1:
        what = "no" if not decisions else "conflicting"
        return AskOutcome(
            "unparseable",
            False,
            (),
            None,
            None,
            f"{what} X-Robots2-Decision header: do not proceed",
        )
    decision = decisions.pop()
    scopes = _ask_scopes(response.headers)
    if isinstance(scopes, AskOutcome):
        return scopes
    where = f" for {', '.join(scopes)}" if scopes else " site-wide"
    if decision == "allow":
        return AskOutcome(
            "allow",
            True,
            scopes,
            now + ASK_ALLOW_CACHE,
            None,
            f"allowed{where}; reuse for up to 24 h",
        )
    if decision == "allow-once":
        return AskOutcome(
            "allow-once",
            True,
            scopes,
            None,
            None,
            f"allowed once{where}; never cached, ask again",
        )
    if decision == "deny":
        return AskOutcome("deny", False, (), now + ASK_DENY_CACHE, None, "denied")
    return AskOutcome(
        "unparseable", False, (), None, None, f"unknown decision {decision[:20]!r}: do not proceed"
    )


def _status_outcome(response: AskResponse, now: datetime) -> AskOutcome:
    """The outcome of an answer other than 200 (or of no answer): never proceed."""
    status = response.status
    if status is None:
        return AskOutcome("no-endpoint", False, (), None, None, "no ask endpoint: ask counts as no")
    if status == 404:
        return AskOutcome(
            "not-found",
            False,
            (),
            now + ASK_DENY_CACHE,
            None,
            "404: no ask endpoint, treated as deny",
        )
    if status == 429:
        wait = ASK_RETRY_DEFAULT
        values = _header_values(response.headers, "Retry-After")
        if values and values[0].isdigit() and values[0].isascii():
            wait = min(timedelta(seconds=int(values[0])), ASK_RETRY_MAX)
        return AskOutcome(
            "retry",
            False,
            (),
            None,
            now + wait,
            f"429: rate limited, ask again after {int(wait.total_seconds())} s",
        )
    return AskOutcome(
        "unparseable",
        False,
        (),
        None,
        None,
        f"status {status}: not an ask answer, do not proceed",
    )


def _ask_scopes(headers: Iterable[tuple[str, str]]) -> tuple[str, ...] | AskOutcome:
    """The X-Robots2-Scope globs, or the outcome that refuses a malformed one."""
    scopes: list[str] = []
    for value in _header_values(headers, "X-Robots2-Scope"):
        for scope in (s.strip() for s in value.split(",")):
            if not scope.startswith("/") or any(c.isspace() for c in scope):
                return AskOutcome(
                    "unparseable",
                    False,
                    (),
                    None,
                    None,
                    f"bad X-Robots2-Scope {scope[:40]!r}: do not proceed",
                )
            scopes.append(scope)
    return tuple(scopes)


@dataclass
class AskLedger:
    """Remembered ask outcomes per directive, consulted with an explicit time."""

    entries: dict[str, AskOutcome] = field(default_factory=dict)

    def record(self, directive: str, outcome: AskOutcome) -> None:
        if outcome.cache_until is not None or outcome.retry_at is not None:
            self.entries[directive] = outcome
        else:
            self.entries.pop(directive, None)

    def answer(self, directive: str, url: str, now: datetime) -> tuple[bool, str] | None:
        """(may proceed, why) from a still-valid remembered outcome; None: ask (again)."""
        outcome = self.entries.get(directive)
        if outcome is None:
            return None
        if outcome.retry_at is not None:
            if now < outcome.retry_at:
                return False, f"{directive}: {outcome.reason}"
            return None
        if outcome.cache_until is None or now >= outcome.cache_until:
            return None
        if outcome.proceed and not outcome.covers(url):
            return (
                False,
                f"{directive}: outside the scopes of the remembered allow ({', '.join(outcome.scopes)})",
            )
        return outcome.proceed, f"{directive}: remembered ask answer: {outcome.reason}"
