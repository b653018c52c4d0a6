"""http(s) for the crawler: URLs, a trio client on httpx with the Gemini client's limits,
HTML extraction, and the robots2 ask exchange. Every error derives from :class:`WebError`.
"""

from geminibot.http.errors import WebError
from geminibot.http.urls import WebURL, is_web_url, parse_web_url

__all__ = ["WebError", "WebURL", "is_web_url", "parse_web_url"]
