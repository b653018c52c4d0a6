"""The gemlogs of the synthetic Geminispace: one host in :data:`GEMLOG_EVERY` keeps a
journal, its index a gemsub feed ("Subscribing to Gemini pages", docs/feeds.md).

- **Which hosts.** Host ``i`` with ``i % GEMLOG_EVERY == GEMLOG_AT`` (a host of "normal"
  behaviour; every policy kind among them). Its home page links to :data:`INDEX`.
- **Pages.** ``/gemlog/`` (the index) and ``/gemlog/N.gmi`` (post ``N``, from 0), outside
  the space's ``urls`` (its power-law sizes are those of a space without gemlogs, so no
  other page differs). The index lists the posts newest first, one dated link each
  (``=> N.gmi YYYY-MM-DD Title``), then a link home (not an entry).
- **Days.** On day 0 a gemlog has :meth:`Gemlogs.backlog` posts, dated a few days apart
  before the space's ``start`` (the date of day 0). On each day ``d >= 1`` it gains a
  post with probability ``post_rate`` (decided by a hash: :meth:`Gemlogs.posted`), dated
  ``start + d``; the index changes that day, and nothing else of the gemlog does. A post
  not yet written answers ``51``.
- **Words.** Each post says a word no other page says (:meth:`Gemlogs.word`), so a
  benchmark can search for it.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable

#: One host in this many has a gemlog ...
GEMLOG_EVERY = 10
#: ... those whose number leaves this remainder (hosts of "normal" behaviour).
GEMLOG_AT = 4
#: The index's path; posts are ``/gemlog/N.gmi``.
INDEX = "/gemlog/"
#: Fewest posts a gemlog has on day 0, and how many more it may have.
BACKLOG_MIN, BACKLOG_SPREAD = 3, 10
#: Days between two posts of the backlog, at most (at least one).
BACKLOG_GAP = 4
#: Probability that a gemlog gains a post on a given day.
POST_RATE = 0.25
#: The date of day 0 (the calendar trap's "this month").
START = dt.date(2026, 11, 2)

_ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def _letters(k: int, width: int) -> str:
    """``k`` in base 26, ``width`` letters."""
    out = ""
    for _ in range(width):
        k, digit = divmod(k, 26)
        out = _ALPHABET[digit] + out
    return out


class Gemlogs:
    """Every gemlog of one space (see the module docstring); ``words(rng, k)`` is the
    space's ``k`` words drawn by ``rng``."""

    def __init__(
        self,
        seed: int,
        start: dt.date,
        post_rate: float,
        words: Callable[[random.Random, int], str],
    ) -> None:
        self.seed, self.start, self.post_rate, self._words = seed, start, post_rate, words

    def has(self, i: int) -> bool:
        """Whether host ``i`` keeps a gemlog."""
        return i % GEMLOG_EVERY == GEMLOG_AT

    def backlog(self, i: int) -> int:
        """Posts of host ``i``'s gemlog on day 0."""
        return BACKLOG_MIN + random.Random(f"{self.seed}:gemlog:{i}").randrange(BACKLOG_SPREAD)

    def posted(self, i: int, day: int) -> bool:
        """Whether host ``i``'s gemlog gains a post on ``day`` (never on day 0)."""
        if day < 1:
            return False
        return random.Random(f"{self.seed}:gemlog:{i}:{day}").random() < self.post_rate

    def posts(self, i: int, day: int) -> int:
        """Posts of host ``i``'s gemlog on ``day``."""
        return self.backlog(i) + sum(self.posted(i, d) for d in range(1, day + 1))

    def date(self, i: int, n: int) -> dt.date:
        """The date of post ``n`` of host ``i`` (one the gemlog has on some day)."""
        backlog = self.backlog(i)
        if n < backlog:
            back = BACKLOG_GAP * (backlog - n) - random.Random(f"{self.seed}:{i}:{n}").randrange(
                BACKLOG_GAP
            )
            return self.start - dt.timedelta(days=back)
        day, written = 0, backlog
        while written <= n:
            day += 1
            written += self.posted(i, day)
        return self.start + dt.timedelta(days=day)

    def title(self, i: int, n: int) -> str:
        return self._words(random.Random(f"{self.seed}:{i}:post{n}"), 3).capitalize()

    def word(self, i: int, n: int) -> str:
        """The word only post ``n`` of host ``i`` says (a ``q`` starts it: the space's
        vocabulary has none)."""
        return f"q{_letters(i, 3)}{_letters(n, 3)}"

    def paths(self, i: int, day: int) -> list[str]:
        """The gemlog's URL paths on ``day`` (none for a host without one)."""
        if not self.has(i):
            return []
        return [INDEX, *(f"{INDEX}{n}.gmi" for n in range(self.posts(i, day)))]

    def page(self, i: int, path: str, day: int) -> str | None:
        """The gemtext at ``path`` of host ``i``'s gemlog on ``day``; None: no such page."""
        if not self.has(i) or not path.startswith(INDEX):
            return None
        if path == INDEX:
            return self.index(i, day)
        number = path[len(INDEX) :].removesuffix(".gmi")
        if not path.endswith(".gmi") or not number.isdigit() or number != str(int(number)):
            return None
        n = int(number)
        return self.post(i, n) if n < self.posts(i, day) else None

    def index(self, i: int, day: int) -> str:
        """The gemsub index of host ``i``'s gemlog on ``day``, newest post first."""
        name = self._words(random.Random(f"{self.seed}:{i}:gemlog"), 2).capitalize()
        lines = [f"# {name}", "", "A journal, newest post first.", ""]
        lines += [
            f"=> {n}.gmi {self.date(i, n).isoformat()} {self.title(i, n)}"
            for n in reversed(range(self.posts(i, day)))
        ]
        lines += ["", "=> / Home"]
        return "\n".join(lines) + "\n"

    def post(self, i: int, n: int) -> str:
        rng = random.Random(f"{self.seed}:{i}:post{n}:text")
        paras = [self._words(rng, rng.randint(30, 70)) for _ in range(2)]
        lines = [f"# {self.title(i, n)}", "", self.date(i, n).isoformat(), ""]
        lines += [paras[0], "", f"{paras[1]} {self.word(i, n)}.", ""]
        lines += [f"=> {INDEX} Back to the gemlog", "=> / Home"]
        return "\n".join(lines) + "\n"
