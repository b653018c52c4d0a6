"""The capsule owner's view: what the crawl knows of a URL or a host, and why each page is
in the search index or not.

One routine (:func:`check`) behind every face: ``geminibot why`` (text and ``--json``),
the search capsule's ``/check`` (gemtext) and the portal's ``/check`` (HTML); the faces
only render its answer (:mod:`geminibot.why.render`), so they never disagree.
:mod:`geminibot.why.records` reads the crawl database (either store),
:mod:`geminibot.why.explain` and :mod:`geminibot.why.host` decide (pure).
"""

from __future__ import annotations

from geminibot.store.database import Database
from geminibot.store.traps import MAX_URL_LENGTH
from geminibot.urls import InvalidURL, host_key, normalise
from geminibot.why.explain import Answer, explain_url
from geminibot.why.host import HostAnswer, explain_host
from geminibot.why.records import HostRecords, Reader, UrlRecords

__all__ = [
    "MAX_TARGET_LENGTH",
    "Answer",
    "BadTarget",
    "HostAnswer",
    "check",
    "explain",
    "read_records",
]

#: Longest URL or host asked about, in UTF-8 bytes: the longest URL the crawl queues.
MAX_TARGET_LENGTH = MAX_URL_LENGTH


class BadTarget(ValueError):
    """What was asked about is neither a URL the crawl could follow nor a host."""


def parse_target(text: str) -> tuple[str, str, bool]:
    """(normalised URL or host key, host key, whether it is a URL); raises
    :class:`BadTarget`."""
    text = text.strip()
    if not text:
        raise BadTarget("give a URL (gemini://host/path) or a host name")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_TARGET_LENGTH:
        raise BadTarget(f"longer than {MAX_TARGET_LENGTH} bytes")
    as_url = "://" in text or "/" in text
    candidate = text if "://" in text else f"gemini://{text if as_url else text + '/'}"
    try:
        url = normalise(candidate)
        host = host_key(url)
    except (InvalidURL, ValueError) as exc:
        raise BadTarget(f"not a URL this crawler follows: {exc}") from None
    return (url if as_url else host), host, as_url


def read_records(database: Database, text: str) -> UrlRecords | HostRecords:
    """What the crawl database ``database`` holds about the URL or host ``text`` (what
    the owner typed): the I/O of :func:`check`."""
    target, host, is_url = parse_target(text)
    reader = Reader(database)
    if is_url:
        return reader.url(target, host, text.strip())
    return reader.host(host)


def explain(records: UrlRecords | HostRecords, now: float) -> Answer | HostAnswer:
    """The answer for a URL, or the summary of a host, from its records at ``now``: the
    work of :func:`check` (pure)."""
    if isinstance(records, UrlRecords):
        return explain_url(records, now)
    return explain_host(records, now)


def check(database: Database, text: str, now: float) -> Answer | HostAnswer:
    """The answer for a URL, or the summary of a host (``text``: what the owner typed),
    from the crawl database ``database``, at ``now``."""
    return explain(read_records(database, text), now)
