"""What the crawl command-line tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from capsule_crawl import CAPSULES
from served_capsules import capsule_server_thread


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The capsule server on the bundled capsules (on a thread of this process); yields
    the port."""
    tmp = tmp_path_factory.mktemp("server")
    with capsule_server_thread(CAPSULES, tmp / "certs") as port:
        yield port
