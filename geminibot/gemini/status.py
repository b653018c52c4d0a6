"""Gemini status codes, their families, and the seconds a ``44 SLOW DOWN`` asks for.

A client handles a status by its first digit (its family); a two-digit code inside a
known family that the specification does not name (``25``, ``47``) is still handled by
its family. A first digit outside 1-6 is an :class:`~geminibot.gemini.errors.UnknownStatus`.
"""

from __future__ import annotations

from enum import IntEnum

from geminibot.gemini.errors import UnknownStatus


class Family(IntEnum):
    """The first digit of a Gemini status: what kind of answer it is."""

    INPUT = 1
    SUCCESS = 2
    REDIRECT = 3
    TEMPORARY_FAILURE = 4
    PERMANENT_FAILURE = 5
    CLIENT_CERTIFICATE = 6


class Status(IntEnum):
    """Every status code the Gemini specification (v0.24.1) names."""

    INPUT = 10
    SENSITIVE_INPUT = 11
    SUCCESS = 20
    REDIRECT_TEMPORARY = 30
    REDIRECT_PERMANENT = 31
    TEMPORARY_FAILURE = 40
    SERVER_UNAVAILABLE = 41
    CGI_ERROR = 42
    PROXY_ERROR = 43
    SLOW_DOWN = 44
    PERMANENT_FAILURE = 50
    NOT_FOUND = 51
    GONE = 52
    PROXY_REQUEST_REFUSED = 53
    BAD_REQUEST = 59
    CLIENT_CERTIFICATE_REQUIRED = 60
    CERTIFICATE_NOT_AUTHORISED = 61
    CERTIFICATE_NOT_VALID = 62

    @property
    def family(self) -> Family:
        return Family(self // 10)


def family_of(code: int) -> Family:
    """The family of a two-digit status code; raises UnknownStatus outside 10-69."""
    if not 10 <= code <= 69:
        raise UnknownStatus(f"status {code:02d} belongs to no status family")
    return Family(code // 10)


def known_status(code: int) -> Status | None:
    """The named :class:`Status` for ``code``, or None for an unnamed code."""
    try:
        return Status(code)
    except ValueError:
        return None


def slow_down_seconds(meta: str) -> int | None:
    """The seconds a ``44`` meta asks for (older specifications), or None if not a number.

    The current specification (v0.24.1) asks for exponential back-off instead; the
    crawler's politeness schedule obeys both and treats an integer as a minimum.
    """
    text = meta.strip()
    if text.isascii() and text.isdigit():
        return int(text)
    return None
