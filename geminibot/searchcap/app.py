"""The search capsule: a crawl's index served as a Gemini capsule, without I/O of its own.

:class:`SearchCapsule` is a handler for the shared Gemini server
(:mod:`geminibot.gemini.server`): a request URL in, a :class:`Resolution` (status, meta,
gemtext body) out. The server does TLS, certificates, the request line, limits and the
access log; the only I/O here is reading the crawl database it is given (either store),
always off the event loop: every page that reads it (``/search``, ``/backlinks``,
``/hosts``, ``/stats``, ``/about``) runs its read on a worker thread with a connection
of its own (:class:`geminibot.store.reads.Reads`), at most :data:`SEARCH_READS` at once;
a request that finds them all taken waits at most :data:`SEARCH_WAIT` seconds for one,
then gets ``44``. ``/check`` has reads of its own (:mod:`geminibot.why.reads`). So one
slow query holds one read slot, never the other clients.

Routes:

- ``/``: the home page;
- ``/search``: ``10`` asks for a query; ``/search?QUERY`` answers the first
  :data:`PAGE_SIZE` results (title, URL, host, snippet), ``/search/N?QUERY`` page ``N``
  (at most :data:`MAX_PAGE`); the query may hold operators (``site:``, ``intitle:``,
  ``mime:``, ``size:<10k``...: :mod:`geminibot.index.query`);
- ``/v/search`` (``/v/search/N``): the same, verbose: under each result how its score is
  made (text fields, link text, authority, stuffing penalty), when the page was fetched,
  its type and size;
- ``/lucky?QUERY``: ``30`` to the first result ("I'm feeling lucky"), ``51`` when there
  is none; ``10`` asks for a query;
- ``/backlinks``: ``10`` asks for a URL; ``/backlinks?URL`` lists the pages that link to
  it (at most :data:`MAX_BACKLINKS`);
- ``/hosts`` (``/hosts/N``): the capsules the crawl knows and when each was last fetched,
  :data:`HOSTS_PER_PAGE` a page;
- ``/stats``: what the index holds (``geminibot stats``), counted at most once every
  :data:`STATS_SECONDS`;
- ``/census``: the crawl's census (``geminibot census --gemtext``), taken at most once
  every :data:`CENSUS_SECONDS`;
- ``/check``: ``10`` asks for a URL or a host; ``/check?URL`` says why that page is in the
  index or not, ``/check?HOST`` what the crawl knows of the capsule, its census
  (``geminibot census --host``) with it (:mod:`geminibot.why`);
- ``/about``: how the crawler behaves and how to keep it out, from the crawler's own
  defaults and the database's settings (role, product token);
- ``/feeds``, ``/new`` (``/new?QUERY``), ``/newest``, ``/random``: what is new, from the
  feeds the crawl found (:mod:`geminibot.searchcap.whatsnew`, docs/feeds.md);
- ``/submit``: ``10`` asks for a URL; ``/submit?URL`` queues it to be fetched soon, or
  says why not (:mod:`geminibot.searchcap.submit`).

Bad input is refused: a query that is not UTF-8 or longer than
:data:`~geminibot.index.search.MAX_QUERY_LENGTH` characters, or a backlinks URL that is
not one, gets ``59``; a path not listed (or a page number out of range) gets ``51``. A
query with nothing to search for (only symbols or excluded words) is asked again (``10``)
with the reason, so that the user can correct it.

Work is bounded per query and per client: a query over the query budget
(:mod:`geminibot.index.query`: too many terms or prefixes, a prefix too short, a phrase
too long) or with an operator written wrong (``size:10k``) gets ``59`` with what to
change, before any read; an accepted one costs
:func:`~geminibot.index.query.query_cost` units from its client's budget
(:data:`CLIENT_BUDGET` units, refilled at :data:`CLIENT_BUDGET_PER_SECOND`; the client
is the server's :data:`~geminibot.gemini.server.CURRENT_CLIENT`), and a client whose
budget cannot pay for it gets ``44`` with the seconds until it can, whatever its
request rate.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol
from urllib.parse import quote, unquote_to_bytes

from geminibot import __version__
from geminibot.cliutil import counted, with_article
from geminibot.crawl.politeness import MAX_RATE, MAX_WAIT, START_DELAY
from geminibot.crawl.settings import ROLE_CATEGORIES, CrawlOptions
from geminibot.gemini.gemtext import TOGGLE, preformatted_line
from geminibot.gemini.ratelimit import RateLimiter
from geminibot.gemini.server import CURRENT_CLIENT, Resolution
from geminibot.gemini.status import Status
from geminibot.index import QueryError, SearchResult
from geminibot.index.query import QueryMalformed, QueryTooCostly, parse_query, query_cost
from geminibot.index.search import MAX_QUERY_LENGTH
from geminibot.index.search_cli import search_function
from geminibot.index.stats import format_stats, stats
from geminibot.index.tantivy_index import index_lag
from geminibot.index.text import render_marks
from geminibot.policy.outcomes import MAX_CACHE_SECONDS
from geminibot.policy.site_policy import AGENTS, ROBOTS, ROBOTS2
from geminibot.searchcap import whatsnew
from geminibot.searchcap.submit import PER_CLIENT, SUBMIT_PROMPT, Submissions
from geminibot.store.database import Database
from geminibot.store.freshness import FEED_MIN_REVISIT
from geminibot.store.reads import Periodic, Reads, ReadsBusy
from geminibot.store.traps import FrontierLimits
from geminibot.store.whatsnew import NEW_MATCHES
from geminibot.urls import URL, InvalidURL, host_key, host_url, normalise
from geminibot.why import BadTarget
from geminibot.why.reads import CheckReads
from geminibot.why.render import CHECK_PROMPT, gemtext_page

#: Results on one page of /search.
PAGE_SIZE = 10
#: The last page of results /search/N serves (searching deeper is not paging).
MAX_PAGE = 50
#: Pages that link to a URL listed by /backlinks.
MAX_BACKLINKS = 100
#: Capsules on one page of /hosts.
HOSTS_PER_PAGE = 200
#: Longest title or snippet shown, in characters.
MAX_TEXT = 300
#: How the capsule shows a searched word in a snippet (gemtext has no emphasis): between
#: mathematical white square brackets, which are removed from the page's own text.
CAPSULE_HIGHLIGHT = ("⟦", "⟧")
#: Seconds the /stats page is reused: counting a large database takes a while.
STATS_SECONDS = 60.0
#: Seconds the /census page is reused (a census reads every table).
CENSUS_SECONDS = 600.0
#: Reads of the crawl database at once for the capsule's pages (each on a worker thread
#: with its own connection); ``/check`` has its own (:data:`~geminibot.why.reads.
#: CHECK_READS`).
SEARCH_READS = 4
#: Seconds a page waits for a read slot before it is answered ``44``.
SEARCH_WAIT = 5.0

#: Units of search work (:func:`~geminibot.index.query.query_cost`: about one per word
#: searched) a client may spend at once, and how many it gets back each second: forty
#: two-word searches at once and three a second after that, or a query at every limit of
#: the query budget (85 units) every 8.5 seconds.
CLIENT_BUDGET = 120
CLIENT_BUDGET_PER_SECOND = 10.0

GEMTEXT = "text/gemini; charset=utf-8"
SEARCH_PROMPT = (
    'Search for (words, "a phrase", word*, -word, a OR b, site:, intitle:, mime:, size:<10k,'
    " lang:de; see /about)"
)
BACKLINKS_PROMPT = "URL of the page (who links to it?)"
_PAGED = re.compile(r"/(search|v/search|hosts)/([1-9][0-9]{0,5})")
_SPACES = re.compile(r"[\s\x00-\x1f\x7f]+")


class BadInput(Exception):
    """The request's input cannot be used: ``59`` with this message."""


class SearchFunction(Protocol):
    """A store's search: ``limit`` results from the ``offset``-th on, best first
    (:func:`geminibot.index.search`, :func:`geminibot.index.pg_search.search`)."""

    def __call__(
        self, conn: Any, query: str, limit: int, *, offset: int = ..., explain: bool = ...
    ) -> list[SearchResult]: ...


def run_search(
    find: SearchFunction, conn: Any, query: str, page: int, *, explain: bool = False
) -> tuple[list[SearchResult], bool]:
    """Page ``page`` of the results for ``query`` and whether there are more: the one place
    the capsule calls the index's search. Only that page is asked for (and one result past
    it, to know whether a next page exists): the results before it are neither read back
    from the store nor given snippets. ``explain``: with their score's parts."""
    offset = (page - 1) * PAGE_SIZE
    if explain:
        results = find(conn, query, PAGE_SIZE + 1, offset=offset, explain=True)
    else:  # (a search function may know no explain)
        results = find(conn, query, PAGE_SIZE + 1, offset=offset)
    return results[:PAGE_SIZE], len(results) > PAGE_SIZE


def one_line(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` as one line of plain gemtext: control characters and line breaks as
    spaces, cut at ``limit`` characters."""
    line = _SPACES.sub(" ", text).strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def page(lines: list[str]) -> Resolution:
    return Resolution(Status.SUCCESS, GEMTEXT, body=("\n".join(lines) + "\n").encode("utf-8"))


def decoded_query(url: URL) -> str | None:
    """The request's query, percent-decoded (None when there is none, or it is blank);
    raises :class:`BadInput` when it is not UTF-8."""
    if url.query is None:
        return None
    try:
        text = unquote_to_bytes(url.query).decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput("The query is not valid UTF-8") from None
    return text if text.strip() else None


def when(seconds: float | None) -> str:
    if seconds is None:
        return "never fetched"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


class SearchCapsule:
    """The handler: call it with a request URL (see the module docstring for the routes).

    ``reads`` gives the crawl database (either engine), searched by ``find`` (by default
    its engine's search: :func:`geminibot.index.search_cli.search_function`) on its
    connection. ``checks`` answers ``/check`` (without it, 51)."""

    def __init__(
        self,
        reads: Reads,
        find: SearchFunction | None = None,
        *,
        title: str = "geminibot search",
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        reader: str = "en",
        checks: CheckReads | None = None,
        pick: Callable[[int, int], int] = random.randint,
        submissions: Submissions | None = None,
        budget: RateLimiter | None = None,
    ) -> None:
        self.reads = reads
        #: Each client's units of search work (see the module docstring).
        self.budget = budget or RateLimiter(CLIENT_BUDGET, CLIENT_BUDGET_PER_SECOND)
        self.wall_clock = wall_clock
        self.find = find
        self.title = title
        self.clock = clock
        self.reader = reader  # the searchers' language: others are shown beside titles
        self.checks = checks  # /check's reads, off the event loop (None: no /check)
        self.pick = pick  # a random integer in a range, both ends included (/random)
        self.submissions = submissions  # /submit (None: 51)
        self._stats = Periodic(STATS_SECONDS, self.clock, _succeeded)  # /stats
        self._census = Periodic(CENSUS_SECONDS, self.clock, _succeeded)  # /census
        self._routes: dict[str, Callable[[URL], Resolution | Awaitable[Resolution]]] = {
            "/": self.home,
            "/search": lambda url: self.search(url, 1),
            "/v/search": lambda url: self.search(url, 1, verbose=True),
            "/lucky": lambda url: self.search(url, 1, lucky=True),
            "/backlinks": self.backlinks,
            "/hosts": lambda url: self.hosts(1),
            "/stats": self.stats,
            "/census": self.census,
            "/about": self.about,
            "/check": self.check,
            "/feeds": lambda url: self._read(lambda db: page(whatsnew.feeds_page(db))),
            "/new": self.new,
            "/newest": lambda url: self._read(
                lambda db: page(whatsnew.newest_page(db, self.wall_clock()))
            ),
            "/random": lambda url: self._read(self._random),
            "/submit": self.submit,
        }

    @classmethod
    def of(cls, db: str, **options: Any) -> SearchCapsule:
        """The capsule of the crawl database ``db`` (an SQLite file or a
        ``postgresql://`` URL, searched with its store's search), its reads bounded by
        :data:`SEARCH_READS` and :data:`SEARCH_WAIT`."""
        return cls(Reads.of(db, limit=SEARCH_READS, wait=SEARCH_WAIT), **options)

    def close(self) -> None:
        """Close the connections the reads hold."""
        self.reads.close()
        if self.checks is not None:
            self.checks.reads.close()

    def __call__(self, url: URL) -> Resolution | Awaitable[Resolution]:
        """The answer to ``url``; a page that reads the database is awaited (its read
        runs off the event loop)."""
        try:
            route = self._routes.get(url.path or "/")
            if route is not None:
                return route(url)
            paged = _PAGED.fullmatch(url.path)
            if paged is not None:
                number = int(paged.group(2))
                if paged.group(1).endswith("search") and number <= MAX_PAGE:
                    return self.search(url, number, verbose=paged.group(1) == "v/search")
                if paged.group(1) == "hosts":
                    return self.hosts(number)
            return Resolution(Status.NOT_FOUND, "Not found")
        except BadInput as exc:
            return Resolution(Status.BAD_REQUEST, str(exc))

    def home(self, _url: URL) -> Resolution:
        return page(
            [
                f"# {self.title}",
                "",
                "Full-text search over the pages a polite crawler has indexed.",
                "",
                "=> /search Search",
                "=> /v/search Search, showing why each result ranks where it does",
                "=> /lucky I'm feeling lucky: straight to the first result",
                "=> /backlinks Who links to a page",
                "=> /hosts Known capsules",
                "=> /stats What the index holds",
                "=> /census Geminispace in figures: the crawl's census",
                "=> /new What is new: the entries of the feeds of the past week",
                "=> /feeds Known feeds",
                "=> /newest New capsules",
                "=> /random A random page",
                "=> /submit Ask for a page or a feed to be fetched soon",
                "=> /check Why is a page in the index, or not? What is known of a capsule?",
                "=> /about About the crawler: how it behaves, how to keep it out",
            ]
        )

    async def _read(self, read: Callable[[Database], Resolution]) -> Resolution:
        """``read(database)``'s page, read off the event loop; ``44`` when no read slot
        was free within :data:`SEARCH_WAIT`."""
        try:
            return await self.reads.run(read)
        except ReadsBusy as exc:
            return Resolution(Status.SLOW_DOWN, str(exc.retry_after))

    def search(
        self, url: URL, number: int, *, verbose: bool = False, lucky: bool = False
    ) -> Resolution | Awaitable[Resolution]:
        query = decoded_query(url)
        if query is None:
            return Resolution(Status.INPUT, SEARCH_PROMPT)
        slow = self._spend(query)
        if slow is not None:
            return slow
        if lucky:
            return self._read(partial(self._lucky, query))
        return self._read(partial(self._results, query, number, verbose))

    def _spend(self, query: str) -> Resolution | None:
        """Take ``query``'s cost from its client's budget: a ``44`` when the client has
        spent it (None: go on); raises :class:`BadInput` for a query too long or too
        costly."""
        if len(query) > MAX_QUERY_LENGTH:
            raise BadInput(f"Query too long: {len(query)} characters, at most {MAX_QUERY_LENGTH}")
        try:
            cost = query_cost(parse_query(query))
        except QueryTooCostly as exc:
            raise BadInput(f"Query too costly: {one_line(str(exc), 200)}") from None
        except QueryMalformed as exc:
            raise BadInput(f"Malformed query: {one_line(str(exc), 200)}") from None
        except QueryError:  # asked again by _results, with the reason
            cost = 1
        wait = self.budget.take(CURRENT_CLIENT.get(), self.clock(), cost)
        if wait is not None:
            return Resolution(Status.SLOW_DOWN, str(max(1, math.ceil(wait))))
        return None

    def _lucky(self, query: str, database: Database) -> Resolution:
        """``30`` to the first result for ``query``, ``51`` when there is none."""
        find = self.find or search_function(database)
        try:
            results, _ = run_search(find, database.connection, query, 1)
        except QueryError as exc:
            return Resolution(Status.INPUT, f"{one_line(str(exc), 200)}. {SEARCH_PROMPT}")
        if not results:
            return Resolution(Status.NOT_FOUND, f"No results for {one_line(query, 100)}")
        return Resolution(Status.REDIRECT_TEMPORARY, results[0].url)

    def _results(self, query: str, number: int, verbose: bool, database: Database) -> Resolution:
        find = self.find or search_function(database)
        try:
            results, more = run_search(find, database.connection, query, number, explain=verbose)
        except QueryError as exc:
            return Resolution(Status.INPUT, f"{one_line(str(exc), 200)}. {SEARCH_PROMPT}")
        encoded = quote(query, safe="")
        first = (number - 1) * PAGE_SIZE + 1
        lines = [f"# Search: {one_line(query, 100)}", ""]
        if results:
            lines += [f"Results {first}-{first + len(results) - 1}:", ""]
        elif number == 1:
            lines += ["No results.", ""]
        else:
            lines += [f"No results from {first} on.", ""]
        for result in results:
            lines += [
                f"=> {result.url} {one_line(result.title) or result.url}"
                + result.language_note(self.reader),
                f"{_host(result.url)} · "
                + ("" if (result.mime or "text/").startswith("text/") else f"{result.kind()} · ")
                + _snippet(result.snippet),
            ]
            if verbose:
                lines.append(" · ".join([*result.explanation(), result.kind()]))
            lines.append("")
        route = "/v/search" if verbose else "/search"
        if more and number < MAX_PAGE:
            lines.append(f"=> {route}/{number + 1}?{encoded} Next page")
        if number > 1:
            lines.append(f"=> {route}/{number - 1}?{encoded} Previous page")
        other = "/search" if verbose else "/v/search"
        lines.append(f"=> {other}?{encoded} " + ("Plain" if verbose else "Why each ranks there"))
        lines += [f"=> {route} New search", "=> / Home"]
        return page(lines)

    def backlinks(self, url: URL) -> Resolution | Awaitable[Resolution]:
        text = decoded_query(url)
        if text is None:
            return Resolution(Status.INPUT, BACKLINKS_PROMPT)
        try:
            target = normalise(text.strip())
        except InvalidURL as exc:
            raise BadInput(f"Not a URL this crawler follows: {one_line(str(exc), 200)}") from None
        return self._read(partial(self._backlinks, target, text.strip()))

    def _backlinks(self, target: str, given: str, database: Database) -> Resolution:
        from geminibot.store import statements as q  # SQLAlchemy: not needed to search

        rows = database.run(
            q.BACKLINKS, target=target, given=given, limit=MAX_BACKLINKS + 1
        ).fetchall()
        lines = [f"# Links to {target}", ""]
        if not rows:
            lines += ["No indexed page links here.", ""]
        for source, title, label in rows[:MAX_BACKLINKS]:
            lines.append(f"=> {source} {one_line(title) or source}")
            if label:
                lines.append(f"linked as: {one_line(label)}")
        if len(rows) > MAX_BACKLINKS:
            lines += ["", f"(the first {MAX_BACKLINKS} pages, by URL)"]
        lines += ["", f"=> {target} The page itself", "=> /backlinks Another URL", "=> / Home"]
        return page(lines)

    async def check(self, url: URL) -> Resolution:
        text = decoded_query(url)
        if text is None:
            return Resolution(Status.INPUT, CHECK_PROMPT)
        if self.checks is None:
            return Resolution(Status.NOT_FOUND, "This capsule has no crawl database to check")
        try:
            answer = await self.checks.answer(text, self.wall_clock())
        except BadTarget as exc:
            return Resolution(Status.BAD_REQUEST, one_line(str(exc), 200))
        except ReadsBusy as exc:
            return Resolution(Status.SLOW_DOWN, str(exc.retry_after))
        return page(gemtext_page(answer))

    def new(self, url: URL) -> Resolution | Awaitable[Resolution]:
        """/new, and /new?QUERY: only the entries whose page the search finds (a search:
        its cost taken from the client's budget)."""
        query = decoded_query(url)
        slow = None if query is None else self._spend(query)
        if slow is not None:
            return slow
        return self._read(partial(self._new, query))

    def _new(self, query: str | None, database: Database) -> Resolution:
        matches = None
        if query is not None:
            find = self.find or search_function(database)
            try:
                found = find(database.connection, query, NEW_MATCHES)
            except QueryError as exc:
                return Resolution(Status.INPUT, f"{one_line(str(exc), 200)}. {SEARCH_PROMPT}")
            matches = {result.url for result in found}
        return page(whatsnew.new_page(database, self.wall_clock(), query, matches))

    async def submit(self, url: URL) -> Resolution:
        """/submit: a URL to fetch soon (:mod:`geminibot.searchcap.submit`)."""
        text = decoded_query(url)
        if text is None:
            return Resolution(Status.INPUT, SUBMIT_PROMPT)
        if self.submissions is None:
            return Resolution(Status.NOT_FOUND, "This capsule takes no submissions")
        try:
            return page(await self.submissions.answer(text))
        except BadTarget as exc:
            return Resolution(Status.BAD_REQUEST, one_line(str(exc), 200))
        except ReadsBusy as exc:
            return Resolution(Status.SLOW_DOWN, str(exc.retry_after))

    def _random(self, database: Database) -> Resolution:
        url = whatsnew.random_page(database, self.pick)
        if url is None:
            return Resolution(Status.NOT_FOUND, "No page indexed yet")
        return Resolution(Status.REDIRECT_TEMPORARY, url)

    def hosts(self, number: int) -> Awaitable[Resolution]:
        return self._read(partial(self._hosts, number))

    def _hosts(self, number: int, database: Database) -> Resolution:
        from geminibot.store import statements as q  # SQLAlchemy: not needed to search

        offset = (number - 1) * HOSTS_PER_PAGE
        rows = database.run(q.HOSTS_PAGE, limit=HOSTS_PER_PAGE + 1, offset=offset).fetchall()
        if number > 1 and not rows:
            return Resolution(Status.NOT_FOUND, "Not found (no hosts on that page)")
        lines = ["# Known capsules", ""]
        if not rows:
            lines += ["The crawl has not met any capsule yet.", ""]
        for host, last, skipped, pages in rows[:HOSTS_PER_PAGE]:
            note = f"; skipped for now: {one_line(skipped, 100)}" if skipped else ""
            lines.append(
                f"=> {host_url(host)} {host}: last seen {when(last)}, {counted(pages, 'page')}{note}"
            )
        lines.append("")
        if len(rows) > HOSTS_PER_PAGE:
            lines.append(f"=> /hosts/{number + 1} Next page")
        if number > 1:
            lines.append(f"=> /hosts/{number - 1} Previous page")
        lines.append("=> / Home")
        return page(lines)

    async def stats(self, _url: URL) -> Resolution:
        """The figures counted at most once a :data:`STATS_SECONDS`, and once for all the
        requests that come while they are counted."""
        return await self._stats.get(lambda: self._read(partial(_count, at=self.wall_clock())))

    async def census(self, _url: URL) -> Resolution:
        """The census taken at most once a :data:`CENSUS_SECONDS`, and once for all the
        requests that come while it is taken."""
        return await self._census.get(
            lambda: self._read(partial(_take_census, at=self.wall_clock()))
        )

    def about(self, _url: URL) -> Awaitable[Resolution]:
        return self._read(_about)


def _count(database: Database, at: float) -> Resolution:
    """/stats, its figures counted at the wall-clock time ``at`` (hosts and MIME types
    from the network kept inside the block)."""
    figures = stats(database, at, index_lag(database))
    return page(
        [
            "# What the index holds",
            "",
            TOGGLE,
            *map(preformatted_line, format_stats(figures).splitlines()),
            TOGGLE,
            "",
            "=> / Home",
        ]
    )


def _succeeded(answer: Resolution) -> bool:
    """Whether a page of figures is kept (a failed read, ``44``, is not)."""
    return answer.status == Status.SUCCESS


def _take_census(database: Database, at: float) -> Resolution:
    """/census: the crawl's census (``geminibot census --gemtext``) taken at ``at``."""
    # The census's figures and SQLAlchemy reads: imported by the first /census (start fast).
    from geminibot.census.figures import take_census
    from geminibot.census.history import agent_of, kept_censuses
    from geminibot.census.render import as_gemtext

    previous = kept_censuses(database, 1)
    census = take_census(
        database, at, agent=agent_of(database), previous=previous[-1] if previous else None
    )
    return page([*as_gemtext(census).splitlines(), "", "=> / Home"])


def _about(database: Database) -> Resolution:
    """/about, from the crawler's defaults and the database's settings."""
    defaults = CrawlOptions()
    role = database.setting("role") or defaults.role
    agent = database.setting("agent") or defaults.agent
    category = ROLE_CATEGORIES.get(role)
    trap = FrontierLimits()
    lines = [
        "# About this search capsule and its crawler",
        "",
        *SEARCH_HELP,
        "",
        f"The pages here were crawled by geminibot {__version__}, as the product token "
        f'"{agent}" acting as the Gemini virtual agent "{role}". Before any other '
        f"request to a capsule it reads the capsule's policy: {ROBOTS}, {ROBOTS2} "
        f"(and the files its chain names) and {AGENTS}, and it obeys them.",
        "",
        "## Keeping it out",
        "",
        f'Every crawler acting as {with_article(role)}, this one included (the "{role}" virtual '
        "agent of the robots.txt companion specification):",
        TOGGLE,
        f"User-agent: {role}",
        "Disallow: /",
        TOGGLE,
        "This crawler only:",
        TOGGLE,
        f"User-agent: {agent}",
        "Disallow: /",
        TOGGLE,
    ]
    if category is not None:
        lines += [f'In {ROBOTS2} it declares the category "{category}".']
    lines += [
        "",
        "## How it behaves",
        "",
        "* One request at a time per server address, however many capsules it hosts. "
        f"It starts at one request every {START_DELAY:g} seconds and goes faster while "
        f"the server answers quickly, up to {MAX_RATE:g} a second in all; a 44 SLOW "
        "DOWN halves that pace at once, for every capsule on the address.",
        "* The delay a capsule's policy sets (Crawl-delay, Request-rate, the rate of "
        "robots2.txt) always holds on top.",
        "* 44 SLOW DOWN: it waits the seconds given, and longer after each 44 in a row; "
        f"a wait longer than {MAX_WAIT:g} seconds leaves the capsule for a later run.",
        f"* Policy files are reused for {MAX_CACHE_SECONDS / 3600:g} hours at most "
        "(RFC 9309), then fetched again.",
        f"* Trap bounds: at most {trap.max_urls_per_host} URLs per capsule, links at "
        f"most {trap.max_depth} steps from where it started, "
        f"{trap.max_queries_per_path} query strings per path, URLs up to "
        f"{trap.max_url_length} bytes.",
        "",
        "## What is new",
        "",
        "While crawling it reads the pages that are feeds: gemsub pages (links whose "
        "label starts with a date, YYYY-MM-DD), Atom, RSS and twtxt. An entry's page not "
        "yet known is fetched soon after, and a feed that changes is read again more "
        f"often, down to every {FEED_MIN_REVISIT / 3600:g} hour, always at its capsule's "
        "pace.",
        "",
        "=> /feeds Known feeds, by format",
        "=> /new What is new: the entries of the past week, itself a gemsub page to "
        "subscribe to (/new?words: only the entries whose page matches the search)",
        "=> /newest Capsules first seen in the last 30 days",
        "=> /random A random page",
        f"=> /submit Ask for a page or a feed to be fetched soon (at most {PER_CLIENT} an "
        "hour; it goes before the capsule's other queued pages, through the crawl's "
        "scope, the capsule's policy and pace like any link)",
        "",
        "=> /check Why is my page in the index, or not? What is known of my capsule: its "
        "policy files as fetched, and its health as the crawl saw it (errors by kind, gone "
        "pages, redirects, robots.txt, certificate, searchable pages and why the others "
        "are out)",
        "=> / Home",
    ]
    return page(lines)


#: How to search, on /about (docs/search.md, "Query operators").
SEARCH_HELP = (
    "## Searching",
    "",
    'Every word is required; "a phrase", prefix*, -excluded, a OR b. Operators narrow '
    "a search, and alone list the pages in their scope:",
    "* site:example.org, site:*.example.org (its subdomains), -site:example.org",
    '* intitle:word, intitle:"a phrase"; inurl:word',
    "* mime:image, mime:text/gemini, filetype:pdf (the type of an extension); -mime:",
    "* size:<10k, size:>1m (bytes; k = 1024)",
    "* lang:de (an ISO 639-1 code)",
    "A malformed operator is answered with the right form.",
)


def _snippet(snippet: str) -> str:
    """A result's snippet as one gemtext line, searched words in :data:`CAPSULE_HIGHLIGHT`."""
    return render_marks(one_line(snippet), *CAPSULE_HIGHLIGHT)


def _host(url: str) -> str:
    try:
        return host_key(url)
    except InvalidURL:
        return ""
