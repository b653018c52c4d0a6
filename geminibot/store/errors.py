"""The one error a crawl database raises to its commands."""

from geminibot.cliutil import CommandError


class DatabaseError(CommandError):
    """The database cannot be used (missing, empty, not SQLite, not a geminibot one, from
    a newer geminibot, unreadable, unreachable): its message is one line, and a command
    that lets it through exits 2 with that line."""
