"""The crawl database and its full-text index: storage, search and statistics (SQLite, FTS5)."""

from geminibot.index.db import DatabaseError, connect, transaction
from geminibot.index.pages import Link, Page, store_page
from geminibot.index.search import QueryError, SearchResult, search
from geminibot.index.stats import stats

__all__ = [
    "DatabaseError",
    "Link",
    "Page",
    "QueryError",
    "SearchResult",
    "connect",
    "search",
    "stats",
    "store_page",
    "transaction",
]
