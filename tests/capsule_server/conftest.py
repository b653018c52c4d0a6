"""The bundled capsules served in-process on 127.0.0.1 and a free port (tests/capsule_fixtures.py)."""

from capsule_fixtures import (
    access_log,
    bundled_policies_read_once,
    capsules_dir,
    cert_dir,
    server,
)

__all__ = ["access_log", "bundled_policies_read_once", "capsules_dir", "cert_dir", "server"]
