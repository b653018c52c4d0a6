"""geminibot: well-behaved bots for Gemini and the web.

Packages:
    geminibot.policy   pure policy engine (robots.txt and its dialects), no I/O
    geminibot.gemini   Gemini protocol (sans-I/O core) and the trio client
    geminibot.http     http(s) fetching with the same limits
    geminibot.crawl    the polite crawler
    geminibot.store    the crawl database (SQLite or PostgreSQL)
    geminibot.index    search over it
"""

__version__ = "0.1.0"
