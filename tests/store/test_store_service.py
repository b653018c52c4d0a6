"""``geminibot serve`` on a PostgreSQL store: no index updater (its tsvector index is
written with each page), the crawl that keeps going, the search capsule answering a real
Gemini client, the store's figures in the metrics, SIGTERM with exit 0."""

from __future__ import annotations

import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import cryptography.hazmat.primitives.serialization  # noqa: F401  (ignition uses it unimported)
import ignition
import pytest
from service_process import (
    DEADLINE,
    SEARCH_EVERY,
    Service,
    config,
    resolve_to_loopback,
    served_capsules,
)

#: The search capsule's host name (resolved to 127.0.0.1 by the test).
NAME = "pg.search.test"


@pytest.fixture
def capsules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[str], int]]:
    """The served capsules (seeds, port), :data:`NAME` resolving to loopback."""
    resolve_to_loopback(monkeypatch, NAME)
    with served_capsules(tmp_path) as served:
        yield served


@pytest.mark.usefixtures("ignition_hosts")
def test_the_service_on_postgres(
    pg_db: str, tmp_path: Path, capsules: tuple[list[str], int]
) -> None:
    seeds, port = capsules
    path, search_port, metrics_port = config(tmp_path, seeds, port, db=pg_db, name=NAME)
    service = Service(["--config", str(path)])
    try:

        def found() -> str | None:
            try:
                answer = ignition.request(f"gemini://{NAME}:{search_port}/search?word3", timeout=10)
            except Exception:  # not listening yet
                return None
            body = answer.raw_body.decode("utf-8") if answer.status == "20" else ""
            return body if "host00.test/p3.gmi" in body else None

        service.wait_for(found, "the crawled page found through the capsule", SEARCH_EVERY)
        metrics = (
            urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)
            .read()
            .decode()
        )
        assert 'geminibot_component_up{component="crawl"} 1.0' in metrics
        assert 'component="index"' not in metrics  # no updater: nothing to follow
        assert "geminibot_pages " in metrics and "geminibot_live_pages " in metrics
        assert "geminibot_changed_last_day 0.0" in metrics  # a first crawl changes nothing
        assert "geminibot_index_lag " not in metrics  # PostgreSQL's index never lags
    finally:
        service.proc.send_signal(signal.SIGTERM)
        code = service.proc.wait(timeout=DEADLINE)
    assert code == 0
    assert not service.logged("index", "started")
    assert service.logged("crawl", "stopped") and service.logged("search", "stopped")
