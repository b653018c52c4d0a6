"""The crawl's defaults that ``geminibot crawl --help`` shows: here, apart from the
crawler, so that the command line can show them without importing it (and trio)."""

from __future__ import annotations

#: Requests in flight across all hosts, by default.
DEFAULT_CONCURRENCY = 16
#: Roles the crawler can declare (virtual user agents it acts as).
ROLES = ("indexer", "archiver", "researcher")
#: The crawler's own product token.
DEFAULT_AGENT = "geminibot"
