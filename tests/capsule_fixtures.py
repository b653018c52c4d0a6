"""Fixtures for tests that need the bundled capsules served in-process (importable from
``tests/`` like ``certs``): tests/capsule_server/ and tests/interop/ re-export them in their
conftest.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from capsule_server.files import bundled_capsules
from capsule_server.server import CapsuleServer
from capsule_server.testing import running_server
from geminibot.gemini.accesslog import AccessRecord
from geminibot.gemini.server import Limits

# Generous limits so that a test suite's bursts are not slowed down; tests of the limits
# themselves start their own server.
TEST_LIMITS = Limits(rate_burst=100_000, rate_per_second=100_000.0, header_timeout=5.0)


@pytest.fixture(scope="session")
def capsules_dir() -> Path:
    found = bundled_capsules()
    assert found is not None
    return found


@pytest.fixture(scope="session")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("certs")


@pytest.fixture
def access_log() -> list[AccessRecord]:
    return []


@pytest.fixture
async def server(
    capsules_dir: Path, cert_dir: Path, access_log: list[AccessRecord]
) -> AsyncIterator[CapsuleServer]:
    async with running_server(capsules_dir, cert_dir, TEST_LIMITS, access_log.append) as srv:
        yield srv
