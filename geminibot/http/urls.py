"""http(s) URLs: the web side of :mod:`geminibot.urls` (no I/O).

A web URL is a :class:`geminibot.urls.URL` of scheme ``http`` or ``https``, normalised by
the same rules as a Gemini URL, with the scheme's default port (80 or 443) left out.
"""

from __future__ import annotations

from geminibot.urls import URL, WEB_SCHEMES, parse_url

#: Where a site owner reads who the bot is; put in the User-Agent (override with --contact).
DEFAULT_INFO_URL = "https://geminibot.invalid/about"


def is_web_url(text: str) -> bool:
    return text.partition(":")[0].lower() in WEB_SCHEMES


def parse_web_url(text: str) -> URL:
    """Parse and normalise an absolute ``http://`` or ``https://`` URL.

    Raises a subclass of :class:`~geminibot.urls.InvalidURL` naming the fault."""
    return parse_url(text, WEB_SCHEMES)
