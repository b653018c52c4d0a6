"""The Gemini protocol: URLs, the response reader and text/gemini (all sans-I/O), and a
trio client (:mod:`geminibot.gemini.client`). Every error derives from :class:`GeminiError`.
"""

from geminibot.gemini.errors import GeminiError, InvalidURL, RemoteProtocolError
from geminibot.gemini.gemtext import Document, parse_gemtext
from geminibot.gemini.response import ResponseHeader, ResponseReader
from geminibot.gemini.status import Family, Status
from geminibot.gemini.urls import DEFAULT_PORT, GeminiURL, parse_request, parse_url

__all__ = [
    "DEFAULT_PORT",
    "Document",
    "Family",
    "GeminiError",
    "GeminiURL",
    "InvalidURL",
    "RemoteProtocolError",
    "ResponseHeader",
    "ResponseReader",
    "Status",
    "parse_gemtext",
    "parse_request",
    "parse_url",
]
