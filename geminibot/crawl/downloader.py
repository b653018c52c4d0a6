"""The crawl's downloader: one request to a host in its turn.

A request goes when the host's politeness schedule says it is due
(:meth:`~geminibot.crawl.scheduler.Scheduler.ready_at`); the worker that makes it has
the host, and with it its address's download slot, from the scheduler (one request at a
time to an address: see :mod:`~geminibot.crawl.scheduler`). Right before it, the store
confirms that the host, and the URL claimed for the request, are still this process's
(another crawl process sharing the store may have taken the host over meanwhile). What
did not go says why, as a value: the host is skipped for now (None), its turn has not
come (:class:`Later`), or it is another process's now (``"lost"``).

The fetcher is injected (``fetch(url) -> FetchResult``: see :mod:`geminibot.crawl.adapters`);
each protocol's adapter says how to send (the web adds the bot's headers, and
``X-Agent-Identity`` when a robots2.txt says ``announce: yes``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from geminibot.crawl.adapters import Adapter, Fetch, FetchResult, Headers, adapter_for
from geminibot.crawl.clock import Clock
from geminibot.crawl.policy_files import Later, Sent
from geminibot.crawl.progress import Progress
from geminibot.crawl.scheduler import Scheduler
from geminibot.crawl.tlsfacts import TLSRecorder
from geminibot.policy.discovery import POLICY_FETCH_BYTES
from geminibot.policy.site_policy import Bot, SitePolicy
from geminibot.store.crawlstore import CrawlStore, FetchRecord

#: A request not sent because another crawl process took its host over.
Lost = Literal["lost"]


class Downloader:
    """Sends each request in its host's turn, and counts it."""

    def __init__(
        self,
        fetch: Fetch,
        scheduler: Scheduler,
        store: CrawlStore,
        clock: Clock,
        bot: Bot,
        lease: str,
        progress: Progress,
        tls: TLSRecorder | None = None,
    ) -> None:
        self.fetch = fetch
        self.scheduler = scheduler
        self.store = store
        self.clock = clock
        self.bot = bot
        self.lease = lease  # this process's name among those sharing the store
        self.progress = progress
        #: Keeps each host's TLS and certificate facts as the connections show them.
        self.tls = tls if tls is not None else TLSRecorder(store)

    async def request(
        self,
        host: str,
        url: str,
        policy: SitePolicy | None = None,
        *,
        method: str = "GET",
        headers: Headers = (),
        claimed: str | None = None,
        wait: bool = False,
        max_body: int | None = None,
    ) -> Sent | Later | Lost | None:
        """Fetch ``url`` in ``host``'s turn. None: the host is skipped for now;
        :class:`Later`: its turn has not come (``wait``: waited for instead); ``"lost"``:
        another crawl process took the host over (``claimed``: the URL this process
        claimed for the request, which must still be its claim).

        ``policy`` sets the pace (with none, the default delay applies: the policy files
        themselves are fetched before it is known) and whether to announce the bot.
        ``max_body``: the bytes of the body read at most (a policy file's), the rest cut
        off without counting as an error (None: the fetcher's own limit, past which a
        page counts as failed)."""
        if policy is not None:
            last_duration = self.scheduler.last_duration(host)
            now = datetime.fromtimestamp(self.clock.now(), UTC)
            answer = policy.delay(self.bot, now, last_duration, url)
            if answer.file:
                self.scheduler.set_pace(host, answer.seconds, between_starts=answer.between_starts)
            else:
                self.scheduler.set_pace(host, None)
        while True:
            due = self.scheduler.ready_at(host)
            if due is not None and due <= self.clock.now():
                return await self._send(host, url, policy, method, headers, claimed, max_body)
            if due is None:
                return None
            if not wait:
                return Later(due)
            await self.clock.sleep_until(due)

    async def policy_request(
        self, host: str, url: str, policy: SitePolicy | None, resumable: bool
    ) -> Sent | Later | None:
        """A policy file's request (:data:`geminibot.crawl.policy_files.Request`); one
        that starts a file's fetch (``resumable``: its read can stop there, the files
        before it are cached) gives the host back when its turn has not come, the others
        (a redirect, a 44 sat out) wait for it."""
        sent = await self.request(
            host, url, policy, wait=not resumable, max_body=POLICY_FETCH_BYTES
        )
        return None if sent == "lost" else sent

    async def _send(
        self,
        host: str,
        url: str,
        policy: SitePolicy | None,
        method: str,
        headers: Headers,
        claimed: str | None,
        max_body: int | None,
    ) -> Sent | Lost:
        """:meth:`request` once it is the host's turn."""
        # Is the host (and the claim) still ours? If so the claim's attempt is counted
        # here, before its first request (committed first when the store is careful).
        if not self.store.hold_host(host, self.lease, claimed):
            return "lost"
        adapter: Adapter = adapter_for(host)
        self.scheduler.start(host)
        self.progress.in_flight += 1
        started = self.clock.now()
        response: FetchResult | None = None
        try:
            response = await adapter.send(
                self.fetch,
                url,
                method=method,
                headers=headers,
                announce=self._announce(policy),
                max_body=max_body,
            )
        except Exception as exc:  # a fetcher should not raise; count it as a failure
            response = FetchResult(None, error=f"{type(exc).__name__}: {exc}")
        finally:
            self.progress.in_flight -= 1
            duration = max(0.0, self.clock.now() - started)
            status, meta = (None, "") if response is None else (response.status, response.meta)
            state = self.scheduler.finish(
                host, duration, status, meta, slow_down=adapter.slows_down(status)
            )
        self.progress.requests += 1
        if response.tls is not None:
            self.tls.seen(host, response.tls, started)
        if response.status is None or (response.cut and max_body is None):
            self.progress.errors += 1
            self.progress.last_error = f"{url}: {response.error}"
        record = FetchRecord(
            url, host, response.status, response.meta, response.error, started, duration, state
        )
        return Sent(response, record)

    def _announce(self, policy: SitePolicy | None) -> Headers:
        """``X-Agent-Identity`` when the host's robots2.txt says ``announce: yes``."""
        if policy is None or policy.robots2 is None:
            return ()
        setting = policy.robots2.setting("announce", self.bot.category)
        if setting is None or setting.value != "yes":
            return ()
        return (("X-Agent-Identity", self.bot.identity),)
