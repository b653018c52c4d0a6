"""``geminibot serve-search``: a crawl's index served over Gemini as a search capsule."""

from geminibot.searchcap.app import SearchCapsule

__all__ = ["SearchCapsule"]
