"""The limits of one fetch, the same for both protocols: sizes, times and hops."""

from __future__ import annotations

from dataclasses import dataclass

#: Seconds for the TCP connect plus the TLS handshake.
DEFAULT_CONNECT_TIMEOUT = 10.0
#: Seconds from the end of the handshake (or the request going out on a pooled
#: connection) until the whole header has arrived.
DEFAULT_HEADER_TIMEOUT = 15.0
#: Longest silence, in seconds, allowed between two reads of the body.
DEFAULT_IDLE_TIMEOUT = 15.0
#: Seconds for the whole fetch, redirects included.
DEFAULT_TOTAL_TIMEOUT = 60.0
#: Largest body, in bytes, read before giving up with BodyTooLarge.
DEFAULT_MAX_BODY_SIZE = 16 * 1024 * 1024
#: Most redirects followed in one fetch (Gemini's specification's limit; RFC 9309 asks
#: robots.txt fetchers to follow at least as many).
MAX_REDIRECTS = 5


@dataclass(frozen=True, slots=True)
class Limits:
    """Every limit of a fetch; each time limit is a trio cancel scope in the clients."""

    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    total_timeout: float = DEFAULT_TOTAL_TIMEOUT
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    max_redirects: int = MAX_REDIRECTS
    #: Cut a body at ``max_body_size`` (and stop reading) instead of failing with
    #: BodyTooLarge: for policy files, of which only the first part is read.
    cut_body: bool = False
