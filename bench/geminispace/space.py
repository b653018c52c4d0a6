"""A synthetic Geminispace: every page of every host computed from (seed, host, path, day).

Nothing is stored: :meth:`Space.respond` answers any request from the parameters alone, so
one process can pretend to be 4,400 capsules with 600,000 URLs, or 12 capsules in a test.

Layout (host ``i`` of ``hosts``, named ``h0000.space.test`` ...):

- **Pages.** Host ``i`` has ``pages_of(i)`` URLs: ``/``, ``/private/secret.gmi`` (what its
  policy file refuses), three URLs with one body (``/dup/a.gmi``, ``/dup/b.gmi``,
  ``/dup/a.gmi?ref=home``), two non-text files (``/files/photo.png``, ``/files/data.bin``)
  and ``/p/0.gmi`` ... Sizes follow a power law (host 0 is the biggest), summing to ``urls``.
- **Links.** ``/p/j`` links to ``/p/2j+1``, ``/p/2j+2`` (a tree: depth grows as log2 of the
  host's size), one other page of its host, and to pages of other hosts chosen by popularity
  (weight ``1/(rank+1)``), so in-links across hosts follow a power law too.
- **Policies** by ``i % 6``: plain robots.txt, robots.txt with virtual-agent groups,
  robots2.txt, robots.txt "version 2.0" extensions, agents.txt (hash-verified), none (51).
  Each refuses ``/private/`` to the ``indexer`` virtual agent.
- **Behaviour** by ``i % 10``: normal, link maze (``/maze/...``: endless random children),
  calendar trap (``/calendar/YYYY/MM``: endless months), slow (every answer waits),
  rate-limited (``44`` when asked again too soon), vanishes from day 1 on, gone (never
  answers). A gone host still gets links, as dead capsules do. Slow and rate-limited
  hosts are only those whose pages take a polite crawler at most :data:`MAX_POLITE_FLOOR`
  one at a time (the bigger ones are normal): a 15,000-URL host that answers once a
  second takes any polite crawler over four hours, which would measure that host, not
  the crawler.
- **Gemlogs** (:mod:`geminispace.gemlog`): one host in ten keeps a journal whose index,
  ``/gemlog/``, is a gemsub feed of dated links to its posts ``/gemlog/N.gmi``; its home
  page links to it. These pages are over and above the ``urls`` the sizes add up to.
- **Days.** On each day ``d >= 1`` a page ``/p/j`` changes with probability
  ``change_rate`` (decided by a hash, so which pages changed is known exactly:
  :meth:`Space.changed`), and a gemlog gains a post with probability ``post_rate`` (its
  index changes: :meth:`Space.changed_on` says which page changed, for both); other URLs
  never change. With ``remove_rate`` (0 by default), a page ``/p/j`` answers ``51`` from
  day 1 on with that probability (:meth:`Space.removed`). Day 0 is the date ``start``.
- **Planted pages** for relevance evaluation (:meth:`Space.queries`; a space too small
  to hold them without crowding, such as a test's dozen hosts, has none): topic pages with the query
  in title and headings, anchor-text targets whose own text never says the query but many
  links to them do, and spam pages repeating a word on a link farm of unpopular hosts.
"""

from __future__ import annotations

import bisect
import datetime as dt
import hashlib
import itertools
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from geminibot.policy.agents_txt import content_hash

from .gemlog import INDEX, POST_RATE, START, Gemlogs

#: Domain all host names end in (one wildcard certificate covers them).
DOMAIN = "space.test"
#: Probability that a ``/p/`` page changes on a given day.
CHANGE_RATE = 0.1
#: Seconds a slow host waits before each answer.
SLOW_SECONDS = 0.5
#: A rate-limited host answers ``44`` when asked again within this many seconds.
RATE_INTERVAL = 1.0
#: Fixed URLs of every host before the ``/p/`` pages.
FIXED_PATHS = (
    "/",
    "/private/secret.gmi",
    "/dup/a.gmi",
    "/dup/b.gmi",
    "/dup/a.gmi?ref=home",
    "/files/photo.png",
    "/files/data.bin",
)
#: Links from the home page into the ``/p/`` tree.
HOME_LINKS = 8
#: Children of a maze page; calendar pages link to the previous and the next month.
MAZE_FAN = 5
ROBOTS_KINDS = ("plain", "virtual-agents", "robots2", "v2", "agents", "none")
BEHAVIOURS = (
    "normal",
    "maze",
    "normal",
    "calendar",
    "normal",
    "slow",
    "rate-limited",
    "vanishes",
    "normal",
    "gone",
)
#: Longest a slow or rate-limited host may take a polite crawler, in seconds (its pages
#: times :data:`SLOW_SECONDS` or :data:`RATE_INTERVAL`); bigger hosts behave normally.
MAX_POLITE_FLOOR = 600.0
#: Exponent of host sizes (pages of host i proportional to 1/(i+1)**SIZE_EXPONENT).
SIZE_EXPONENT = 0.9
#: Largest host, in URLs (Kennedy's per-authority allowance).
MAX_HOST_URLS = 15_000

_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d4944415478da6364f8cf00000301010027e2a3d60000000049454e44ae426082"
)


@dataclass(frozen=True)
class Answer:
    """What the server sends: a header line's status and meta, a body, a wait before it."""

    status: int
    meta: str
    body: bytes = b""
    delay: float = 0.0

    @property
    def header(self) -> bytes:
        return f"{self.status} {self.meta}\r\n".encode()


@dataclass(frozen=True)
class Query:
    """An evaluation query and the URLs that answer it best."""

    text: str
    kind: str  # topic | anchor | spam
    relevant: tuple[str, ...]


def _unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from ``parts``."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


# Evaluation words: not in the generated vocabulary (which is made of CV syllables only:
# each of these has a consonant cluster or ends in a consonant).
TOPICS = ("orrery", "lichen", "sextant", "marmalade", "typewriter", "glacier")
ANCHORS = ("almanac", "carillon", "zeppelin")
SPAMS = ("kettlebell", "horoscope", "casino")
#: Relevant pages per topic query, distractor pages that mention the word once.
TOPIC_PAGES, TOPIC_DISTRACTORS = 8, 24
#: Target pages per anchor query, pages linking to each with the word, distractors.
ANCHOR_TARGETS, ANCHOR_LINKERS, ANCHOR_DISTRACTORS = 3, 12, 12
#: Good pages per spam query; spam pages (one per farm host).
SPAM_GOOD, SPAM_PAGES = 6, 12
#: Planted pages are among the first PLANT_DEPTH pages of a host's tree.
PLANT_DEPTH = 64
#: Pages planted in all, and on popular hosts (the best-linked fifth).
PLANTED = (
    len(TOPICS) * (TOPIC_PAGES + TOPIC_DISTRACTORS)
    + len(ANCHORS) * (ANCHOR_TARGETS * (1 + ANCHOR_LINKERS) + ANCHOR_DISTRACTORS)
    + len(SPAMS) * SPAM_GOOD
)
PLANTED_POPULAR = len(TOPICS) * TOPIC_PAGES // 2 + len(SPAMS) * SPAM_GOOD


class Space:
    """The whole synthetic Geminispace for one seed (see the module docstring)."""

    def __init__(
        self,
        hosts: int,
        urls: int,
        seed: int = 1965,
        *,
        change_rate: float = CHANGE_RATE,
        remove_rate: float = 0.0,
        slow_seconds: float = SLOW_SECONDS,
        plant: bool = True,
        start: dt.date = START,
        post_rate: float = POST_RATE,
    ) -> None:
        if hosts < 1:
            raise ValueError("a space needs at least one host")
        if urls < hosts * (len(FIXED_PATHS) + 1):
            raise ValueError(f"{urls} URLs is too few for {hosts} hosts")
        self.hosts = hosts
        self.urls = urls
        self.seed = seed
        self.change_rate = change_rate
        self.remove_rate = remove_rate
        self.slow_seconds = slow_seconds
        self.plant = plant
        self._sizes = self._host_sizes()
        self._cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(hosts)))
        words = sorted(
            {
                "".join(random.Random(seed * 7919 + n).choices(_SYLLABLES, k=1 + n % 3))
                for n in range(6000)
            }
        )
        self.vocabulary = words
        self._word_cum = list(itertools.accumulate(1.0 / (r + 1) for r in range(len(words))))
        self.gemlogs = Gemlogs(seed, start, post_rate, self._words)

    # -- hosts -------------------------------------------------------------------------

    def host(self, i: int) -> str:
        return f"h{i:04d}.{DOMAIN}"

    def index_of(self, host: str) -> int | None:
        """Host number of ``host``, or None if it is not a host of this space."""
        name, _, domain = host.partition(".")
        if domain != DOMAIN or len(name) < 5 or name[0] != "h" or not name[1:].isdigit():
            return None
        i = int(name[1:])
        return i if i < self.hosts and name == f"h{i:04d}" else None

    def robots_kind(self, i: int) -> str:
        return ROBOTS_KINDS[i % len(ROBOTS_KINDS)]

    def behaviour(self, i: int) -> str:
        if self.plant and i in self._spam_hosts:
            return "normal"
        kind = BEHAVIOURS[i % len(BEHAVIOURS)]
        if kind in ("slow", "rate-limited") and self.polite_floor(i, kind) > MAX_POLITE_FLOOR:
            return "normal"
        return kind

    def polite_floor(self, i: int, kind: str) -> float:
        """Seconds a polite crawler needs for host ``i`` if it behaved as ``kind``."""
        each = {"slow": self.slow_seconds, "rate-limited": RATE_INTERVAL}.get(kind, 0.0)
        return self._sizes[i] * each

    def answers(self, i: int, day: int) -> bool:
        """Whether host ``i`` is up on ``day`` (vanished and gone hosts are not)."""
        kind = self.behaviour(i)
        return not (kind == "gone" or (kind == "vanishes" and day >= 1))

    def seeds(self) -> list[str]:
        """Home pages of the hosts that answer on day 0."""
        return [f"gemini://{self.host(i)}/" for i in range(self.hosts) if self.answers(i, 0)]

    def _host_sizes(self) -> list[int]:
        minimum = len(FIXED_PATHS) + 1
        weights = [1.0 / (i + 1) ** SIZE_EXPONENT for i in range(self.hosts)]
        spare = self.urls - minimum * self.hosts
        total = sum(weights)
        sizes = [minimum + min(MAX_HOST_URLS, int(spare * w / total)) for w in weights]
        # Hand out what rounding and the cap left over, biggest hosts first.
        left, i = self.urls - sum(sizes), 0
        while left > 0:
            room = MAX_HOST_URLS + minimum - sizes[i % self.hosts]
            step = min(left, room)
            sizes[i % self.hosts] += step
            left -= step
            i += 1
            if i > 2 * self.hosts:
                sizes[0] += left  # every host is full: the first takes the rest
                break
        return sizes

    def pages_of(self, i: int) -> int:
        """URLs of host ``i`` (not counting its traps' endless pages)."""
        return self._sizes[i]

    def tree_size(self, i: int) -> int:
        return self._sizes[i] - len(FIXED_PATHS)

    def paths(self, i: int) -> list[str]:
        """Every finite URL path of host ``i`` but its gemlog's (``gemlogs.paths``)."""
        return [*FIXED_PATHS, *(f"/p/{j}.gmi" for j in range(self.tree_size(i)))]

    # -- days --------------------------------------------------------------------------

    def changed(self, i: int, j: int, day: int) -> bool:
        """Whether page ``/p/j`` of host ``i`` changed on ``day`` (day 0 is the first)."""
        return day >= 1 and _unit(self.seed, "change", i, j, day) < self.change_rate

    def removed(self, i: int, j: int, day: int) -> bool:
        """Whether page ``/p/j`` of host ``i`` is gone (answers 51) on ``day``."""
        return day >= 1 and _unit(self.seed, "remove", i, j, 0) < self.remove_rate

    def revision(self, i: int, j: int, day: int) -> int:
        return sum(self.changed(i, j, d) for d in range(1, day + 1))

    def changed_on(self, i: int, path: str, day: int) -> bool:
        """Whether the page at ``path`` of host ``i`` changed on ``day`` (a ``/p/`` page,
        a gemlog's index; never another)."""
        j = _tree_number(path, self.tree_size(i))
        if j is not None:
            return self.changed(i, j, day)
        return path == INDEX and self.gemlogs.has(i) and self.gemlogs.posted(i, day)

    def revision_of(self, i: int, path: str, day: int) -> int:
        """How many times the page at ``path`` of host ``i`` changed by ``day``."""
        return sum(self.changed_on(i, path, d) for d in range(1, day + 1))

    # -- planted evaluation pages ------------------------------------------------------

    @cached_property
    def _spam_hosts(self) -> list[int]:
        """The link farm: a block of unpopular hosts near the end of the list."""
        if not self.plant or self.hosts < 2 * SPAM_PAGES:
            return []
        return list(range(self.hosts - SPAM_PAGES - 3, self.hosts - 3))

    @cached_property
    def plants(self) -> dict[tuple[int, int], tuple[str, str]]:
        """(host, page) -> (kind, word) for every planted ``/p/`` page."""
        out: dict[tuple[int, int], tuple[str, str]] = {}
        if not self.plant:
            return out
        rng = random.Random(self.seed * 31 + 7)
        live = [i for i in range(self.hosts) if self.answers(i, 0) and i not in self._spam_hosts]
        popular = live[: max(1, len(live) // 5)]
        room = sum(min(self.tree_size(i), PLANT_DEPTH) for i in live)
        popular_room = sum(min(self.tree_size(i), PLANT_DEPTH) for i in popular)
        if not self._spam_hosts or room < 2 * PLANTED or popular_room < 2 * PLANTED_POPULAR:
            return out  # too small a space to plant in without crowding it
        pick = _Picker(rng, live, popular, self.tree_size)
        for word in TOPICS:
            for n in range(TOPIC_PAGES):
                out[pick(n % 2 == 0)] = ("topic", word)
            for _ in range(TOPIC_DISTRACTORS):
                out[pick(False)] = ("distractor", word)
        for word in ANCHORS:
            _plant_anchor(out, pick, word)
        for word in SPAMS:
            for _ in range(SPAM_GOOD):
                out[pick(True)] = ("spam-good", word)
            for i in self._spam_hosts:
                out[(i, SPAMS.index(word))] = ("spam", word)
        return out

    def queries(self) -> list[Query]:
        """The evaluation set: each query with the URLs that answer it best."""
        by_word: dict[tuple[str, str], list[str]] = {}
        for (i, j), (kind, word) in sorted(self.plants.items()):
            url = f"gemini://{self.host(i)}/p/{j}.gmi"
            by_word.setdefault((kind.split(":")[0], word), []).append(url)
        out = [Query(w, "topic", tuple(by_word.get(("topic", w), []))) for w in TOPICS]
        out += [Query(w, "anchor", tuple(by_word.get(("anchor-target", w), []))) for w in ANCHORS]
        out += [Query(w, "spam", tuple(by_word.get(("spam-good", w), []))) for w in SPAMS]
        return [q for q in out if q.relevant]

    # -- pages -------------------------------------------------------------------------

    def _words(self, rng: random.Random, k: int) -> str:
        return " ".join(rng.choices(self.vocabulary, cum_weights=self._word_cum, k=k))

    def _cross_link(self, rng: random.Random) -> str:
        t = bisect.bisect_left(self._cum, rng.random() * self._cum[-1])
        size = self.tree_size(t)
        j = int(size * rng.random() ** 3)
        return f"gemini://{self.host(t)}/" if j == 0 else f"gemini://{self.host(t)}/p/{j}.gmi"

    def tree_page(self, i: int, j: int, day: int = 0) -> str:
        """The gemtext of ``/p/j`` on host ``i`` as it is on ``day``."""
        rev = self.revision(i, j, day)
        rng = random.Random(f"{self.seed}:{i}:{j}")
        title = self._words(rng, 3).capitalize()
        heads = [self._words(rng, 2) for _ in range(1 + j % 3)]
        paras = [self._words(rng, rng.randint(25, 60)) for _ in heads]
        size = self.tree_size(i)
        links = [f"/p/{c}.gmi" for c in (2 * j + 1, 2 * j + 2, rng.randrange(size)) if c < size]
        labels = [self._words(rng, 2) for _ in links]
        fan = min(12, int(1 / (1.02 - rng.random())))  # mostly 1, sometimes many
        links += [self._cross_link(rng) for _ in range(fan)]
        labels += [self._words(rng, 2) for _ in range(fan)]
        if rev:  # a changed page: new words in its first paragraph
            edit = random.Random(f"{self.seed}:{i}:{j}:rev{rev}")
            paras[0] = self._words(edit, 30)
        plant = self.plants.get((i, j))
        if plant is not None:
            title, heads, paras, links, labels = self._plant(
                plant, i, title, heads, paras, links, labels
            )
        lines = [f"# {title}", ""]
        for head, para in zip(heads, paras, strict=True):
            lines += [f"## {head}", "", para, ""]
        lines += [f"=> {url} {label}" for url, label in zip(links, labels, strict=True)]
        lines += ["", f"revision {rev}"]
        return "\n".join(lines) + "\n"

    def _plant(
        self,
        plant: tuple[str, str],
        i: int,
        title: str,
        heads: list[str],
        paras: list[str],
        links: list[str],
        labels: list[str],
    ) -> tuple[str, list[str], list[str], list[str], list[str]]:
        kind, word = plant
        if kind in ("topic", "spam-good"):
            title = f"{word.capitalize()}: {title}"
            heads = [f"About {word}", *heads[1:]]
            paras = [f"{paras[0]} {word} {paras[-1]}", *paras[1:]]
        elif kind == "distractor":
            paras = [f"{paras[0]} {word}", *paras[1:]]
        elif kind.startswith("anchor-link:"):
            _, ti, tj = kind.split(":")
            links = [*links, f"gemini://{self.host(int(ti))}/p/{tj}.gmi"]
            labels = [*labels, f"{word} {self._words(random.Random(i), 1)}"]
        elif kind == "spam":
            title = " ".join([word] * 6)
            heads = [" ".join([word] * 4)]
            paras = [" ".join([word] * 120)]
            farm = self._spam_hosts
            links = [f"gemini://{self.host(h)}/p/{SPAMS.index(word)}.gmi" for h in farm if h != i]
            labels = [word] * len(links)
        return title, heads, paras, links, labels

    def home(self, i: int) -> str:
        size = self.tree_size(i)
        lines = [f"# {self.host(i)}", "", "A capsule of the synthetic Geminispace.", ""]
        lines += [f"=> /p/{j}.gmi page {j}" for j in range(min(size, HOME_LINKS))]
        lines += ["=> /private/secret.gmi private", "=> /dup/a.gmi copy a", "=> /dup/b.gmi copy b"]
        lines += ["=> /dup/a.gmi?ref=home copy a again", "=> /files/photo.png a photo"]
        lines += ["=> /files/data.bin some data"]
        if self.gemlogs.has(i):
            lines.append(f"=> {INDEX} my gemlog")
        kind = self.behaviour(i)
        if kind == "maze":
            lines.append("=> /maze/ the maze")
        elif kind == "calendar":
            lines.append("=> /calendar/2026/11 this month")
        return "\n".join(lines) + "\n"

    def policy_file(self, i: int, name: str) -> str | None:
        """The text of ``/robots.txt``, ``/robots2.txt`` or ``/agents.txt``, or None (51)."""
        kind = self.robots_kind(i)
        if name == "robots.txt":
            if kind == "plain":
                return "User-agent: *\nDisallow: /private/\n"
            if kind == "virtual-agents":
                return (
                    "User-agent: indexer\nDisallow: /private/\n\n"
                    "User-agent: archiver\nDisallow: /files/\n\nUser-agent: *\nDisallow:\n"
                )
            if kind == "v2":
                return (
                    "User-agent: *\nRobot-version: 2.0\nRequest-rate: 600/1m\n"
                    "Disallow: /private/*\nAllow: /*\n"
                )
            if kind in ("robots2", "agents"):
                return "User-agent: *\nDisallow:\n"
        if name == "robots2.txt" and kind == "robots2":
            return (
                "# robots2.txt v0.2.1\ncrawl: yes\ntrain: no\nUser-agent: *\nDisallow: /private/\n"
            )
        if name == "agents.txt" and kind == "agents":
            rules = ["/private DISALLOW", "/ ALLOW"]
            return "# agents.txt\n*" + content_hash(rules) + "\n" + "\n".join(rules) + "\n"
        return None

    def respond(self, host: str, path: str, day: int = 0) -> Answer:
        """The answer to a request for ``gemini://host{path}`` (path with its query)."""
        i = self.index_of(host)
        if i is None:
            return Answer(53, "this server does not serve that host")
        delay = self.slow_seconds if self.behaviour(i) == "slow" else 0.0
        answer = self._respond(i, path, day)
        return Answer(answer.status, answer.meta, answer.body, delay)

    def _respond(self, i: int, path: str, day: int) -> Answer:
        gmi = "text/gemini; charset=utf-8"
        fixed = self._fixed_answer(i, path)
        if fixed is not None:
            return fixed
        j = _tree_number(path, self.tree_size(i))
        if j is not None:
            if self.removed(i, j, day):
                return Answer(51, "not found")
            return Answer(20, gmi, self.tree_page(i, j, day).encode())
        post = self.gemlogs.page(i, path, day)
        if post is not None:
            return Answer(20, gmi, post.encode())
        kind = self.behaviour(i)
        if kind == "maze" and path.startswith("/maze/"):
            rng = random.Random(f"{self.seed}:{i}:{path}")
            base = path.rstrip("/")
            kids = [f"{base}/{rng.choice(_SYLLABLES)}{n}/" for n in range(MAZE_FAN)]
            body = "# The maze\n\n" + "".join(f"=> {k} go on\n" for k in kids)
            return Answer(20, gmi, body.encode())
        if kind == "calendar" and path.startswith("/calendar/"):
            month = _calendar_month(path)
            if month is not None:
                return month
        return Answer(51, "not found")

    def _fixed_answer(self, i: int, path: str) -> Answer | None:
        """The answer for one of FIXED_PATHS (the home page included), else None."""
        gmi = "text/gemini; charset=utf-8"
        if path in ("", "/"):
            return Answer(20, gmi, self.home(i).encode())
        if path.startswith("/") and path[1:] in ("robots.txt", "robots2.txt", "agents.txt"):
            text = self.policy_file(i, path[1:])
            if text is None:
                return Answer(51, "not found")
            return Answer(20, "text/plain; charset=utf-8", text.encode())
        if path == "/private/secret.gmi":
            return Answer(20, gmi, b"# Private\n\nNot for indexers.\n")
        if path in ("/dup/a.gmi", "/dup/b.gmi", "/dup/a.gmi?ref=home"):
            words = self._words(random.Random(f"{self.seed}:{i}:dup"), 80)
            return Answer(20, gmi, f"# The same page\n\n{words}\n".encode())
        if path == "/files/photo.png":
            return Answer(20, "image/png", PNG)
        if path == "/files/data.bin":
            return Answer(20, "application/octet-stream", zlib.compress(str(i).encode() * 64))
        return None


def _tree_number(path: str, size: int) -> int | None:
    """``j`` of a ``/p/j.gmi`` path of a host with ``size`` tree pages (spelt as the space
    links it), else None."""
    number = path[3:-4]
    if path.startswith("/p/") and path.endswith(".gmi") and number.isdigit():
        j = int(number)
        if j < size and number == str(j):
            return j
    return None


def _calendar_month(path: str) -> Answer | None:
    """A ``/calendar/Y/M`` page of the endless calendar trap (None: not such a path)."""
    parts = path.split("/")[2:]
    if len(parts) == 2 and all(p.isdigit() for p in parts) and 1 <= int(parts[1]) <= 12:
        y, m = int(parts[0]), int(parts[1])
        prev = (y - 1, 12) if m == 1 else (y, m - 1)
        nxt = (y + 1, 1) if m == 12 else (y, m + 1)
        body = f"# {y}-{m:02d}\n\nNothing happened.\n"
        body += f"=> /calendar/{prev[0]}/{prev[1]} previous month\n"
        body += f"=> /calendar/{nxt[0]}/{nxt[1]} next month\n"
        return Answer(20, "text/gemini; charset=utf-8", body.encode())
    return None


class _Picker:
    """Distinct (host, page) places to plant in, drawn from ``rng`` among the first
    PLANT_DEPTH pages of the live (or the popular) hosts."""

    def __init__(
        self,
        rng: random.Random,
        live: list[int],
        popular: list[int],
        tree_size: Callable[[int], int],
    ) -> None:
        self.rng, self.live, self.popular, self.tree_size = rng, live, popular, tree_size
        self.taken: set[tuple[int, int]] = set()

    def __call__(self, among_popular: bool) -> tuple[int, int]:
        while True:
            i = self.rng.choice(self.popular if among_popular else self.live)
            j = self.rng.randrange(min(self.tree_size(i), PLANT_DEPTH))
            if (i, j) not in self.taken:
                self.taken.add((i, j))
                return i, j


def _plant_anchor(out: dict[tuple[int, int], tuple[str, str]], pick: _Picker, word: str) -> None:
    """ANCHOR_TARGETS pages found by ``word`` only in their links' labels, and distractors."""
    for n in range(ANCHOR_TARGETS):
        target = pick(False)
        out[target] = (f"anchor-target:{n}", word)
        for _ in range(ANCHOR_LINKERS):
            out[pick(False)] = (f"anchor-link:{target[0]}:{target[1]}", word)
    for _ in range(ANCHOR_DISTRACTORS):
        out[pick(False)] = ("distractor", word)
