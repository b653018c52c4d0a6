"""Run jetforce (a real Gemini server from PyPI) on loopback in a subprocess.

Used by the interoperability tests and by ``bench/client_speed.py`` (importable as
``jetforce_peer`` once ``tests/`` is on ``sys.path``).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from certs import cert_pair
from loopback import free_port, wait_listening

#: Seconds to wait for jetforce to accept connections.
STARTUP_TIMEOUT = 20.0


@contextmanager
def running_jetforce(root: Path, hostname: str = "localhost") -> Iterator[int]:
    """Serve ``root`` as ``hostname`` on 127.0.0.1; yields the port. The certificate is
    ``certs.cert_pair(hostname)``."""
    with tempfile.TemporaryDirectory() as tmp:
        cert_path, key_path = cert_pair(hostname).write(Path(tmp))
        log_path = Path(tmp) / "jetforce.log"
        port = free_port()
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "jetforce",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--hostname",
                    hostname,
                    "--tls-certfile",
                    str(cert_path),
                    "--tls-keyfile",
                    str(key_path),
                    "--dir",
                    str(root),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            try:
                wait_listening(port, proc, "jetforce", STARTUP_TIMEOUT)
            except RuntimeError as exc:
                raise RuntimeError(f"{exc}: {log_path.read_text(errors='replace')}") from None
            yield port
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
