"""One claimed URL's visit: the site policy's decision (after the robots2 ask exchange
when robots2.txt says ``crawl: ask``; a closed visit window waited for, or left for a
later run), the fetch in the host's turn (:mod:`geminibot.crawl.downloader`), and the
commit of what the item pipeline (:mod:`geminibot.crawl.pipeline`) makes of the answer:
a page with its links, a refusal, a failure retried with back-off, or a slow-down that
queues the URL again. Every decision is recorded.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol

from geminibot.crawl.adapters import FetchResult, adapter_for
from geminibot.crawl.downloader import Downloader, Lost
from geminibot.crawl.pipeline import (
    PageAnswer,
    failed_revisit,
    may_store,
    page_item,
    refused_revisit,
)
from geminibot.crawl.policy_files import Later, Sent
from geminibot.crawl.progress import Progress
from geminibot.crawl.scope import CrawlScope
from geminibot.policy.robots2_ask import AskLedger, AskOutcome, AskRequest, AskResponse, ask_outcome
from geminibot.policy.site_policy import Bot, FetchDecision, SitePolicy
from geminibot.store.crawlstore import CrawlStore, DecisionRecord, FetchRecord
from geminibot.store.frontier import Claim
from geminibot.urls import host_protocol, host_url

#: An ask answer is applied to the decision it was asked for during this long.
ASK_DECISION_WINDOW = timedelta(seconds=1)

#: What became of a claimed URL: its row closed (``"done"``), the host lost, or the URL
#: back in the queue (for the host's next turn: :class:`Later`; None: for a later run).
Visited = Literal["done"] | Lost | Later | None


class Archive(Protocol):
    """Where ``--as archiver`` keeps every response (WARC files)."""

    def write(self, url: str, response: FetchResult, fetched_at: float) -> None: ...


class Visitor:
    """Decides, fetches and commits claimed URLs, and keeps each host's robots2 ask
    answers."""

    def __init__(
        self,
        downloader: Downloader,
        store: CrawlStore,
        scope: CrawlScope,
        bot: Bot,
        role: str,
        progress: Progress,
        archive: Archive | None = None,
    ) -> None:
        self.downloader = downloader
        self.store = store
        self.scope = scope
        self.bot = bot
        self.role = role
        self.progress = progress
        self.archive = archive
        self._asks: dict[str, AskLedger] = {}
        #: hosts with newly queued URLs, with how many, since :meth:`woken` was asked
        self._woken: dict[str, int] = {}

    def _now(self) -> float:
        return self.downloader.clock.now()

    def _at(self, when: float | None = None) -> datetime:
        return datetime.fromtimestamp(self._now() if when is None else when, UTC)

    def woken(self) -> dict[str, int]:
        """The hosts that got newly queued URLs since the last call, with how many."""
        woken, self._woken = self._woken, {}
        return woken

    async def visit(self, claim: Claim, policy: SitePolicy) -> Visited:
        """Decide, fetch and commit one URL: ``"done"`` when its row is closed, ``"lost"``
        when the host is another process's now; otherwise (:class:`Later`, None) the
        URL goes back to the queue."""
        pattern = self.scope.excluded_by(claim.url)
        if pattern is not None:  # queued by an earlier run without this --exclude
            why = f"excluded by --exclude {pattern}"
            self.store.refused(DecisionRecord(claim.url, claim.host, False, why, self._now()))
            self.progress.excluded += 1
            return "done"
        decided = await self._decide(claim, policy)
        if not isinstance(decided, tuple):
            return decided
        decision, asked = decided
        if not decision.allowed:
            asks = self._asks[claim.host]
            opens = policy.next_allowed(claim.url, self.bot, self._at(), asks)
            if opens is not None:  # outside the visit window: wait for it, or come back later
                scheduler = self.downloader.scheduler
                if not scheduler.wait_for_window(claim.host, opens.timestamp()):
                    return None
                decision = policy.may_fetch(claim.url, self.bot, opens, asks)
        if not decision.allowed:
            revisit = refused_revisit(self.store.previous(claim.url), self._now())
            self.store.refused(self._decision(claim, decision), revisit)
            self.progress.refused += 1
            return "done"
        # (after an ask, its answer holds for this request only: wait for the turn)
        sent = await self.downloader.request(
            claim.host, claim.url, policy, claimed=claim.url, wait=asked
        )
        if not isinstance(sent, Sent):
            return sent
        self._commit(claim, decision, sent, policy)
        return "done"

    def _decision(self, claim: Claim, decision: FetchDecision) -> DecisionRecord:
        return DecisionRecord(claim.url, claim.host, decision.allowed, decision.reason, self._now())

    async def _decide(
        self, claim: Claim, policy: SitePolicy
    ) -> tuple[FetchDecision, bool] | Later | Lost | None:
        """The site policy's decision, and whether the host was asked for it (the ask
        exchange, when robots2.txt says ``crawl: ask`` and nothing else refuses). None:
        ask again later (429, skipped)."""
        asks = self._asks.setdefault(claim.host, AskLedger())
        decision = policy.may_fetch(claim.url, self.bot, self._at(), asks)
        refusals = [r for r in decision.reasons if not r.allowed]
        if decision.ask is None or len(refusals) != 1:
            return decision, False
        outcome = await self._ask(claim, policy, decision.ask)
        if not isinstance(outcome, AskOutcome):
            return outcome
        if outcome.kind == "retry":
            return None  # the 429 slowed the host down; the URL is asked about again later
        asks.record("crawl", outcome)
        # Apply this answer to this decision (an allow-once is never remembered beyond it).
        now = self._at()
        once = AskLedger({"crawl": replace(outcome, cache_until=now + ASK_DECISION_WINDOW)})
        return policy.may_fetch(claim.url, self.bot, now, once), True

    async def _ask(
        self, claim: Claim, policy: SitePolicy, request: AskRequest
    ) -> AskOutcome | Later | Lost | None:
        """The robots2 ask exchange (HEAD) for ``claim``'s host; the request logged."""
        url = host_url(claim.host, request.target)
        sent = await self.downloader.request(
            claim.host,
            url,
            policy,
            method=request.method,
            headers=request.headers,
            claimed=claim.url,
        )
        if not isinstance(sent, Sent):
            return sent
        self.store.log_fetch(sent.record)
        return ask_outcome(AskResponse(sent.response.status, sent.response.headers), self._at())

    def _commit(
        self, claim: Claim, decision: FetchDecision, sent: Sent, policy: SitePolicy
    ) -> None:
        """Commit what came of a request: a slow-down (the URL queued again), a failure
        (retried with back-off), or the page and its links."""
        adapter = adapter_for(claim.host)
        response, record = sent.response, sent.record
        if adapter.slows_down(response.status):
            self.progress.slow_downs += 1
            self.store.slowed_down(record)
            self._woken[claim.host] = self._woken.get(claim.host, 0) + 1
            return
        if response.status is None or response.cut:
            self._failed(claim, decision, record)
            return
        try:
            extracted = adapter.extract(claim.url, claim.host, response, record.started)
        except Exception as exc:  # a hostile page must not stop the crawl
            error = f"cannot read the page: {type(exc).__name__}: {exc}"
            self._failed(claim, decision, replace(record, error=error))
            self.progress.errors += 1
            return
        page = extracted.page
        original = None
        if page.content_hash is not None:
            original = self.store.duplicate_of(page.content_hash, page.url)
        keeps_copies = may_store(policy, self.bot)
        answer = PageAnswer(
            self._decision(claim, decision),
            record,
            extracted,
            host_protocol(claim.host),
            self.store.previous(claim.url),
            original,
            keeps_copies,
            self.role,
            response.body,
        )
        item = page_item(
            answer, self._now(), lambda links: self.scope.followed(links, claim.depth, claim.url)
        )
        if self.archive is not None and keeps_copies:
            self.archive.write(claim.url, response, record.started)
        woken = self.store.fetched(item)
        self.progress.pages += 1
        self.progress.unchanged += item.unchanged and not item.not_found
        self.progress.gone += item.gone
        self.progress.not_found += item.not_found
        for host, urls in woken.items():
            self._woken[host] = self._woken.get(host, 0) + urls

    def _failed(self, claim: Claim, decision: FetchDecision, record: FetchRecord) -> None:
        """Record a failed request; retried with back-off, a bounded number of times."""
        revisit = failed_revisit(self.store.previous(claim.url), self._now())
        self.store.failed(self._decision(claim, decision), record, revisit)
