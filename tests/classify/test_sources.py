"""``classify --against gemini://...``: a capsule's policy files over the real server."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from capsule_server.testing import running_server
from geminibot.classify.sources import site_from_url
from geminibot.gemini.client import GeminiClient
from geminibot.net.limits import DEFAULT_MAX_BODY_SIZE
from geminibot.policy.site_policy import Bot

BOT = Bot("geminibot", ("indexer",), "search-indexer")
AT = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


async def test_policy_file_over_the_client_limit_is_read_in_part(tmp_path: Path) -> None:
    """As the crawler does, the first 500 KiB of an over-large robots.txt
    are parsed; it is never taken as unreachable (which would disallow everything)."""
    capsule = tmp_path / "capsules" / "big.test"
    capsule.mkdir(parents=True)
    rules = "User-agent: *\nDisallow: /private\n"
    (capsule / "robots.txt").write_text(rules + "#" * (DEFAULT_MAX_BODY_SIZE + 1024))
    (capsule / "index.gmi").write_text("# big\n")
    async with running_server(tmp_path / "capsules", tmp_path / "certs") as server:
        client = GeminiClient(connect_to=lambda host, port: ("127.0.0.1", server.port or 0))
        site = await site_from_url("gemini://big.test/", client)
    assert site.may_fetch("gemini://big.test/public", BOT, AT).allowed
    assert not site.may_fetch("gemini://big.test/private", BOT, AT).allowed
