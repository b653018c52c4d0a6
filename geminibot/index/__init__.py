"""Searching the crawl database: SQLite FTS5, the tantivy index, PostgreSQL's text search,
link authority and statistics."""

from geminibot.index.search import QueryError, SearchResult, search
from geminibot.index.stats import stats

__all__ = ["QueryError", "SearchResult", "search", "stats"]
