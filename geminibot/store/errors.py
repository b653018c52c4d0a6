"""The one error a crawl database raises to its commands."""


class DatabaseError(Exception):
    """The database cannot be used (not a geminibot one, from a newer geminibot,
    unreadable, unreachable); its message is one line."""
