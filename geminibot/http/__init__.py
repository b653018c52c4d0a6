"""http(s) for the crawler: URLs, a trio client on httpx with the Gemini client's limits,
HTML extraction, and a web host's policy files. Errors: :mod:`geminibot.net.errors`.
"""

from geminibot.http.urls import is_web_url, parse_web_url

__all__ = ["is_web_url", "parse_web_url"]
