"""The crawl's defaults that ``geminibot crawl --help`` shows: here, apart from the
crawler, so that the command line can show them without importing it (and trio)."""

from __future__ import annotations

#: Requests in flight across all hosts, by default. Each host still gets one request at a
#: time (and each server address one), so this bounds how many hosts are asked at once.
#: At a real round trip of 100 ms a Gemini request takes about 225 ms (TCP, a TLS 1.3
#: handshake, the request): 16 in flight cap a crawl at about 71 requests/s, 128 at about
#: 270/s, and Geminispace has some 4,400 capsules to spread them over. 128 sockets stay far
#: below the usual 1,024 open files.
DEFAULT_CONCURRENCY = 128
#: Roles the crawler can declare (virtual user agents it acts as).
ROLES = ("indexer", "archiver", "researcher")
#: The crawler's own product token.
DEFAULT_AGENT = "geminibot"
