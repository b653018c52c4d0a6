"""The Gemini protocol: URLs, the response reader and text/gemini (all sans-I/O), and a
trio client (:mod:`geminibot.gemini.client`). Errors: the shared tree of
:mod:`geminibot.net.errors`, with Gemini's own in :mod:`geminibot.gemini.errors`.
"""

from geminibot.gemini.gemtext import Document, parse_gemtext
from geminibot.gemini.response import ResponseHeader, ResponseReader
from geminibot.gemini.status import Family, Status
from geminibot.gemini.urls import DEFAULT_PORT, parse_request, parse_url

__all__ = [
    "DEFAULT_PORT",
    "Document",
    "Family",
    "ResponseHeader",
    "ResponseReader",
    "Status",
    "parse_gemtext",
    "parse_request",
    "parse_url",
]
