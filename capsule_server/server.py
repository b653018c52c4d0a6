"""capsule-server's server: the folder of capsules (:class:`Capsule`, one per host name)
served by the shared Gemini server of :mod:`geminibot.gemini.server`, which does the TLS,
certificates, request handling, limits and access log (its docstring has the flow of a
connection). What is particular to capsules is only :meth:`Capsule.resolve`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from capsule_server.files import Capsule
from geminibot.gemini.accesslog import AccessRecord
from geminibot.gemini.server import GeminiServer, Handler, Resolution, ServerLimits
from geminibot.urls import URL


def capsule_handler(capsule: Capsule) -> Handler:
    """A capsule as the shared server's handler: the URL's path to the file or status."""

    def handle(url: URL) -> Resolution:
        return capsule.resolve(url.path)

    return handle


class CapsuleServer(GeminiServer):
    """Serves ``capsules`` (host name to Capsule). Run with :meth:`serve` in a nursery."""

    def __init__(
        self,
        capsules: dict[str, Capsule],
        cert_dir: Path,
        limits: ServerLimits | None = None,
        log: Callable[[AccessRecord], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capsules = capsules
        sites = {host: capsule_handler(capsule) for host, capsule in capsules.items()}
        super().__init__(sites, cert_dir, limits, log, clock)
