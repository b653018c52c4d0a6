"""The defaults that a command and ``geminibot serve`` share, in one place.

``serve`` starts the commands as child processes and passes each of its settings as a
flag; each command's parser and the service's settings (:mod:`geminibot.service.config`)
take their defaults from here, so that a service left at its defaults does what the
command does when run by hand.
"""

from __future__ import annotations

#: The virtual agents a crawl can act as (``crawl --as``), and the one it acts as.
CRAWL_ROLES = ("indexer", "archiver", "researcher")
CRAWL_ROLE = "indexer"
#: Requests in flight across all hosts (``crawl --concurrency``). Each host still gets
#: one request at a time (and each server address one), so this bounds how many hosts
#: are asked at once. At a real round trip of 100 ms a Gemini request takes about 225 ms
#: (TCP, a TLS 1.3 handshake, the request): 16 in flight cap a crawl at about 71
#: requests/s, 128 at about 270/s, and Geminispace has some 4,400 capsules to spread
#: them over. 128 sockets stay far below the usual 1,024 open files.
CRAWL_CONCURRENCY = 128
#: Seconds at least between two requests to one host or address (``crawl --min-delay``):
#: none beyond what a policy says and the address's adaptive pace.
CRAWL_MIN_DELAY = 0.0

#: The address a server listens on (``serve-search --host``, ``portal --host``): this
#: machine only.
LISTEN_HOST = "127.0.0.1"
#: The host name the search capsule answers for and names in its certificate.
SEARCH_HOSTNAME = "localhost"
#: The search capsule's certificate folder, relative to the working directory.
SEARCH_CERTS = "var/serve-search/certs"

#: The web portal's port (``portal --port``); the search capsule's is Gemini's own
#: (1965, :data:`geminibot.urls.DEFAULT_PORTS`).
PORTAL_PORT = 8965
