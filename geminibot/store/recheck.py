"""Look again now: a URL, or every URL of a host, made due at once in the frontier
(``geminibot recheck``; the search capsule's ``/submit`` takes the same routine), on a
:class:`~geminibot.store.database.Database` of either engine.

:func:`recheck` sets the ``next_visit`` of the finished URLs it names (done, refused,
failed, not found, gone) to now: the crawl queues them as it queues every URL due
(``crawl`` at its start; a continuous crawl, ``crawl --forever`` and ``geminibot
serve``, within :data:`DUE_POLL` seconds, running or asleep) and fetches them at each
capsule's pace, its policy asked again as for any URL. A URL named (not a host's) is
also claimed before its host's other queued URLs (:func:`put_first`), whether it was
finished or queued already; one being fetched is left to its fetch; a trapped one is
never fetched (the trap bounds hold). A ``gone`` URL (52, 410) is asked once more, and
stays gone if it answers so again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from geminibot.store.database import Database

#: Seconds between two looks of a continuous crawl (``crawl --forever``, ``geminibot
#: serve``) at the frontier for URLs due, while it runs and while it sleeps: a recheck is
#: taken within this long (then fetched at the capsule's pace).
DUE_POLL = 15.0
#: The states of a URL that will be fetched anyway (queued, or being fetched).
WAITING_STATES = frozenset({"queued", "leased"})


@dataclass(frozen=True)
class Recheck:
    """What :func:`recheck` did: of the URLs named (one URL, or a host's), how many it
    made due now, how many were queued or being fetched already, and how many a trap
    bound keeps out (never fetched)."""

    target: str  # the normalised URL, or the host key
    is_url: bool
    due: int
    waiting: int
    kept_out: int

    @property
    def known(self) -> bool:
        """Whether the crawl database holds the URL (or any URL of the host)."""
        return self.due + self.waiting + self.kept_out > 0

    def as_dict(self) -> dict[str, object]:
        return {
            "target": self.target,
            "kind": "url" if self.is_url else "host",
            "known": self.known,
            "due_now": self.due,
            "already_queued": self.waiting,
            "kept_out": self.kept_out,
        }


def recheck(database: Database, target: str, host: str, *, is_url: bool, now: float) -> Recheck:
    """Make the normalised URL ``target`` (``is_url``), or every URL of the host key
    ``target``, due at ``now``, in one transaction; ``host``: the target's host key. A
    URL named is also put first in its host's queue (:func:`put_first`); a host's URLs
    keep the claim's order (oldest first)."""
    # The frontier's statements (SQLAlchemy): imported by the first recheck, not by the
    # servers that offer one (/submit) when they start.
    from geminibot.store import statements as q

    params = {"url": target, "host": host, "now": now}
    states, gone_back, due_now = (
        (q.URL_STATES_OF, q.URL_GONE_BACK, q.URL_DUE_NOW)
        if is_url
        else (q.HOST_STATES_OF, q.HOST_GONE_BACK, q.HOST_DUE_NOW)
    )
    with database.transaction():
        counts = {str(s): int(n) for s, n in database.run(states, **params).fetchall()}
        database.run(gone_back, **params)
        database.run(due_now, **params)
        if is_url:
            put_first(database, target, now)
    return Recheck(
        target,
        is_url,
        due=sum(n for s, n in counts.items() if s in q.FINISHED_STATES),
        waiting=sum(n for s, n in counts.items() if s in WAITING_STATES),
        kept_out=counts.get("trapped", 0),
    )


def put_first(database: Database, url: str, now: float) -> None:
    """Have the normalised ``url``, if it is to be fetched now (queued, being fetched, or
    finished and due at ``now``), claimed before its host's other queued URLs, once: its
    ``urls.priority``, spent when it is fetched. The host's pace, scope, address guard
    and policy hold for it as for any URL (docs/crawl.md, "Claim order")."""
    from geminibot.store import statements as q  # (as in recheck)

    database.run(q.URL_FIRST, url=url, now=now)
