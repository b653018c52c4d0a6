"""The search capsule's ``/submit`` (Antenna-style push): a reader asks for a page or a
feed to be fetched soon.

``/submit`` asks for a URL (``10``); ``/submit?URL`` (a ``gemini://`` URL: ``59`` for
anything else) answers a page saying what will happen, in ``why``'s words
(:mod:`geminibot.why`):

- refused when the crawl keeps the URL out: its last run's scope (not a seed's host nor
  an allowed one, or ``--exclude``: :func:`~geminibot.why.explain.out_of_scope`), the
  capsule's policy as the crawl last read it, a trap bound;
- refused when the client has submitted :data:`PER_CLIENT` URLs in the last
  :data:`WINDOW` seconds, all clients :data:`PER_CAPSULE` URLs of the same capsule, or
  all clients :data:`IN_ALL` URLs (the queue of submissions is bounded);
- otherwise made due now if the crawl knows it (the store's ``recheck``), or queued
  (:func:`geminibot.store.submissions.submit`): the crawl fetches it soon, before the
  capsule's other queued URLs, through its address guard, the capsule's policy (read
  again if it is old) and at the capsule's pace.

A submitted URL jumps its capsule's queue, so the bounds are what keeps submissions from
starving a capsule's own crawl: at most :data:`PER_CAPSULE` of a capsule's requests an
hour go first, whoever asks (docs/feeds.md, "``/submit``").

The client is the server's :data:`~geminibot.gemini.server.CURRENT_CLIENT`. The counts
are kept in memory, for at most :data:`MAX_CLIENTS` clients (and as many capsules).
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable
from urllib.parse import quote

import trio

from geminibot.gemini.server import CURRENT_CLIENT
from geminibot.store.errors import DatabaseError
from geminibot.store.submissions import submit
from geminibot.urls import InvalidURL, host_key, normalise
from geminibot.why import BadTarget
from geminibot.why.explain import HEADLINES, Answer, out_of_scope
from geminibot.why.reads import CheckReads
from geminibot.why.records import Reader
from geminibot.why.render import one_line

#: URLs one client may submit in :data:`WINDOW` seconds.
PER_CLIENT = 3
#: URLs of one capsule (host) all clients together may submit in :data:`WINDOW` seconds:
#: how often its queue is jumped (a submitted URL is claimed before its other URLs).
PER_CAPSULE = 10
#: URLs all clients together may submit in :data:`WINDOW` seconds (the queue's bound).
IN_ALL = 100
#: The span the limits count over: an hour, in seconds.
WINDOW = 3600.0
#: Clients (and capsules) whose submissions are counted at once (the oldest is forgotten
#: past it).
MAX_CLIENTS = 10_000
#: What ``why`` says of a known URL that a submission is refused for.
REFUSED_CODES = frozenset({"policy", "policy_file", "trap", "excluded", "host_not_allowed"})
SUBMIT_PROMPT = "URL of a page or a feed to fetch soon"


class Submissions:
    """``/submit`` of one crawl database ``db``: its reads (``checks``: ``why``'s),
    ``clock`` (monotonic: the limits) and ``wall_clock`` (the store's times)."""

    def __init__(
        self,
        db: str,
        checks: CheckReads,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.checks = checks
        self.clock = clock
        self.wall_clock = wall_clock
        self._clients: OrderedDict[str, deque[float]] = OrderedDict()
        self._capsules: OrderedDict[str, deque[float]] = OrderedDict()
        self._all: deque[float] = deque()
        self._writes = trio.CapacityLimiter(1)

    async def answer(self, text: str) -> list[str]:
        """The page's lines for the submission of ``text``; raises
        :class:`~geminibot.why.BadTarget` for no URL, and
        :class:`~geminibot.store.reads.ReadsBusy`."""
        try:
            url = normalise(text.strip())
            host = host_key(url)
        except (InvalidURL, ValueError) as exc:
            raise BadTarget(f"Not a URL the crawler follows: {one_line(str(exc), 200)}") from None
        if not url.startswith("gemini://"):
            raise BadTarget("Only gemini:// URLs are taken: the capsule's crawl follows Gemini")
        client = CURRENT_CLIENT.get()
        limited = self._limited(client, host)
        if limited is not None:
            return _page(url, "Refused", limited)
        refused = await self._refusal(url, host)
        if refused is not None:
            return _page(url, "Refused", refused)
        async with self._writes:
            try:
                what = await trio.to_thread.run_sync(submit, self.db, url, self.wall_clock)
            except DatabaseError as exc:
                return _page(url, "Not queued", f"the crawl database failed: {exc}")
        if what.startswith("trapped"):
            return _page(url, "Refused", f"{HEADLINES['trap']}: {what}")
        self._count(client, host)
        return _page(url, what.capitalize(), _QUEUED)

    def _limited(self, client: str, host: str) -> str | None:
        """Why ``client`` may not submit a URL of ``host`` now (None: it may)."""
        now = self.clock()
        for times in (self._clients.get(client), self._capsules.get(host), self._all):
            while times and times[0] <= now - WINDOW:
                times.popleft()
        for times, most, whose in (
            (self._clients.get(client), PER_CLIENT, "from one client"),
            (self._capsules.get(host), PER_CAPSULE, "for one capsule"),
        ):
            if times is not None and len(times) >= most:
                wait = int((times[0] + WINDOW - now) // 60) + 1
                return f"at most {most} submissions an hour {whose}; try again in {wait} minutes"
        if len(self._all) >= IN_ALL:
            return f"the queue of submissions is full ({IN_ALL} an hour); try again later"
        return None

    def _count(self, client: str, host: str) -> None:
        now = self.clock()
        self._all.append(now)
        for counts, key in ((self._clients, client), (self._capsules, host)):
            times = counts.pop(key, deque())
            times.append(now)
            counts[key] = times  # the latest last
            while len(counts) > MAX_CLIENTS:
                counts.popitem(last=False)

    async def _refusal(self, url: str, host: str) -> str | None:
        """Why the crawl would not take ``url``, in ``why``'s words (None: it would)."""
        answer = await self.checks.answer(url, self.wall_clock())
        if isinstance(answer, Answer) and answer.code in REFUSED_CODES:
            return f"{answer.headline}: {answer.reason}"
        run = await self.checks.reads.run(lambda database: Reader(database).settings().run)
        if run is None:
            return "the crawl has not run yet: it has no scope to take the URL into"
        outside = out_of_scope(run, url, host)
        return None if outside is None else f"{HEADLINES[outside[0]]}: {outside[1]}"


_QUEUED = (
    "the crawler will fetch it soon, before the capsule's other queued pages and at its "
    "pace, if the capsule's policy allows it and its address is a public one; a feed's "
    "new entries are queued with it"
)


def _page(url: str, verdict: str, why: str) -> list[str]:
    return [
        f"# Submitted: {one_line(url, 200)}",
        "",
        f"{verdict}: {one_line(why, 500)}.",
        "",
        f"=> /check?{quote(url, safe='')} What the crawl knows of it",
        "=> /submit Submit another URL",
        "=> / Home",
    ]
