"""What a crawl database holds, in numbers: hosts, pages, statuses, MIME types, robots
outcomes, policy refusals, and the state of the frontier (``geminibot stats``, the search
capsule's ``/stats``), made of the counts the store reads
(:mod:`geminibot.store.statistics`); and the crawl's URLs listed (``stats --urls``)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from geminibot.cliutil import LINE_WIDTH, clipped, counted, terminal_safe
from geminibot.index.freshness import format_freshness, freshness

if TYPE_CHECKING:
    from geminibot.store.database import Database

#: Longest list of per-host refusal counts reported.
TOP_REFUSING_HOSTS = 10
#: The index's age distribution: (label, upper bound in seconds since the page was last
#: fetched), the last bucket open-ended.
AGE_BUCKETS: tuple[tuple[str, float], ...] = (
    ("under 1 day", 86_400.0),
    ("1-7 days", 7 * 86_400.0),
    ("7-30 days", 30 * 86_400.0),
    ("over 30 days", float("inf")),
)
#: The states a URL of the frontier can be in (``stats --urls --status``).
URL_STATES = ("queued", "leased", "done", "refused", "failed", "not_found", "gone", "trapped")


@dataclass(frozen=True)
class ListedUrl:
    """One URL of the crawl: its frontier state, its answer's status (when fetched) and
    the reason of a refusal, failure or trap."""

    url: str
    host: str
    state: str
    status: int | None
    reason: str | None

    def as_json(self) -> dict[str, object]:
        return {
            "url": self.url,
            "host": self.host,
            "state": self.state,
            "status": self.status,
            "reason": self.reason,
        }


def status_filter(status: str | None) -> dict[str, Any]:
    """What ``--status`` keeps: a frontier state (``failed``: ``{"state": ...}``), a
    status code (``51``) or a class of them (``5x``: ``{"statuses": (low, high)}``), as
    :func:`geminibot.store.statistics.url_rows` takes them; raises ValueError for anything
    else."""
    if status is None:
        return {}
    text = status.strip().lower()
    if text in URL_STATES:
        return {"state": text}
    if len(text) in (2, 3) and text.isdigit():
        return {"statuses": (int(text), int(text))}
    if len(text) == 2 and text[0].isdigit() and text[1] == "x":
        low = int(text[0]) * 10
        return {"statuses": (low, low + 9)}
    raise ValueError(
        f"--status {status!r}: expected a state ({', '.join(URL_STATES)}), a status (51, 404) "
        "or a class of them (5x)"
    )


def host_like(pattern: str) -> str:
    """The LIKE pattern (escaped with ``\\``) of a shell pattern (``*`` and ``?``) on
    host keys."""
    text = pattern.strip().lower().replace("\\", "\\\\")
    text = text.replace("%", "\\%").replace("_", "\\_")
    return text.replace("*", "%").replace("?", "_")


def list_urls(
    database: Database,
    *,
    status: str | None = None,
    host: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> list[ListedUrl]:
    """The crawl's URLs in the order they were found, filtered by ``status`` (see
    :func:`status_filter`) and ``host`` (a shell pattern: the key itself, or the host
    name of a web origin)."""
    from geminibot.store.statistics import url_rows

    like = None if host is None else host_like(host)
    chosen = status_filter(status)
    rows = url_rows(database, **chosen, host_like=like, limit=limit, offset=offset)
    return [ListedUrl(str(r[0]), str(r[1]), str(r[2]), r[3], r[4]) for r in rows]


def age_distribution(database: Database, now: float) -> dict[str, int]:
    """Pages by the time since they were last fetched (:data:`AGE_BUCKETS`)."""
    from geminibot.store.statistics import age_counts

    counts = age_counts(database, now, [bound for _, bound in AGE_BUCKETS[:-1]])
    return {label: n for (label, _), n in zip(AGE_BUCKETS, counts, strict=True)}


def stats(database: Database, now: float | None = None, lag: int | None = None) -> dict[str, Any]:
    """A JSON-ready summary of the database (page ages counted at ``now``, by default
    the current time; ``lag``: the search index's, when known)."""
    from geminibot.store.statistics import breakdowns, totals

    at = time.time() if now is None else now
    found = totals(database)
    counts = breakdowns(database, TOP_REFUSING_HOSTS)
    return {
        "hosts": found["hosts"],
        "hosts_skipped": found["hosts_skipped"],
        "pages": found["pages"],
        "pages_with_text": found["pages_with_text"],
        "duplicates": found["duplicates"],
        "links": found["links"],
        "age": age_distribution(database, at),
        "freshness": freshness(database, at, lag),
        "bytes": found["bytes"],
        "requests": found["requests"],
        "status": counts["status"],
        "mime": counts["mime"],
        "robots": counts["robots"],
        "frontier": counts["frontier"],
        "traps": counts["traps"],
        "refusals": found["refusals"],
        "trap_refusals": found["trap_refusals"],
        "feeds": counts["feeds"],
        "refusals_by_host": counts["refusals_by_host"],
    }


def format_stats(data: dict[str, Any]) -> str:
    """The summary as aligned text lines for a terminal."""
    lines = [
        f"hosts      {data['hosts']} ({data['hosts_skipped']} skipped for now)",
        f"pages      {data['pages']} ({data['pages_with_text']} with searchable text, "
        f"{counted(data['duplicates'], 'duplicate')})",
        f"links      {data['links']}",
        f"bytes      {data['bytes']}",
        f"requests   {data['requests']}",
        f"refusals   {counted(data['refusals'], 'URL')} refused by site policy"
        + (
            f", {data['trap_refusals']} more stopped by trap bounds"
            if data["trap_refusals"]
            else ""
        ),
    ]
    for title, key in (
        ("status", "status"),
        ("MIME types", "mime"),
        ("robots outcomes", "robots"),
        ("age (since last fetched)", "age"),
        ("frontier", "frontier"),
        ("trap bounds hit", "traps"),
        ("refusals by host", "refusals_by_host"),
        ("feeds by format", "feeds"),
    ):
        # Hosts and MIME types come from servers: escaped, and cut to half a line.
        rows = [(clipped(terminal_safe(k), LINE_WIDTH // 2), v) for k, v in data[key].items()]
        if rows:
            lines.append(f"{title}:")
            width = max(len(k) for k, _ in rows)
            lines.extend(f"  {k:<{width}}  {v}" for k, v in rows)
    lines.append("freshness:")
    lines += format_freshness(data["freshness"])
    return "\n".join(lines)
