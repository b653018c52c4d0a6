"""The crawl database: its schema and version history, connections to SQLite files and
PostgreSQL databases, the statements both engines run, and the crawl store (frontier,
records, traps, freshness rules) the crawler and the search engine share."""
