"""The crawl database's migration history (Alembic scripts): see :mod:`geminibot.store.upgrade`."""
