"""Interoperability: our client and ignition fetch the same URLs from a real jetforce server
and must see the same status, meta and body bytes; ``geminibot fetch`` works against it too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import cryptography.hazmat.primitives.serialization  # noqa: F401 - ignition needs it first
import ignition
import pytest
import trio
from certs import cert_pair
from jetforce_peer import running_jetforce

from geminibot.cli import main
from geminibot.gemini.client import GeminiClient

HOST = "localhost"
FILES = {
    "index.gmi": b"# Welcome\n=> sub/ Sub\n=> plain.txt Plain\n",
    "plain.txt": b"plain text\r\nline two\n",
    "data.bin": bytes(range(256)) * 300,
    "été.gmi": "## Accents é ü\n".encode(),
    "sub/page.gmi": b"=> ../index.gmi up\n",
}
PATHS = [
    "/",
    "/index.gmi",
    "/plain.txt",
    "/data.bin",
    "/%C3%A9t%C3%A9.gmi",
    "/sub",
    "/sub/",
    "/sub/page.gmi",
    "/sub/page.gmi?query=1",
    "/missing.gmi",
]


@pytest.fixture(scope="module")
def jetforce_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    root = tmp_path_factory.mktemp("capsule")
    for name, data in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    with running_jetforce(root, HOST) as port:
        yield port


@pytest.mark.usefixtures("ignition_hosts")
@pytest.mark.parametrize("path", PATHS)
async def test_same_answer_as_ignition(jetforce_port: int, path: str) -> None:
    url = f"gemini://{HOST}:{jetforce_port}{path}"
    with trio.fail_after(20):
        ours = await GeminiClient().fetch(url, follow_redirects=False)
        theirs = await trio.to_thread.run_sync(lambda: ignition.request(url, timeout=10))
    assert (str(ours.status), ours.meta, ours.body) == (
        theirs.status,
        theirs.meta,
        theirs.raw_body or b"",
    )
    assert ours.certificate == cert_pair(HOST).fingerprint
    assert not ours.possibly_truncated  # jetforce sends close_notify


async def test_expected_answers(jetforce_port: int) -> None:
    base = f"gemini://{HOST}:{jetforce_port}"
    client = GeminiClient()
    with trio.fail_after(20):
        page = await client.fetch(f"{base}/sub")
        missing = await client.fetch(f"{base}/missing.gmi")
        other_host = await client.fetch(f"gemini://127.0.0.1:{jetforce_port}/")
        binary = await client.fetch(f"{base}/data.bin")
    assert page.status == 20 and page.redirects and str(page.url) == f"{base}/sub/"
    assert missing.status == 51
    assert other_host.status == 53
    assert binary.body == FILES["data.bin"]


def test_cli_fetch_json(jetforce_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"gemini://{HOST}:{jetforce_port}/sub"
    assert (
        main(
            [
                "fetch",
                url,
                "--json",
                "--connect-to",
                f"{HOST}:{jetforce_port}:127.0.0.1:{jetforce_port}",
            ]
        )
        == 0
    )
    record = json.loads(capsys.readouterr().out)
    assert record["status"] == 20
    assert record["mime"] == "text/gemini"
    assert record["redirects_followed"] == 1
    assert record["certificate"] == cert_pair(HOST).fingerprint
    assert record["possibly_truncated"] is False
    assert record["body_length"] > 0


def test_cli_fetch_body_and_status(
    jetforce_port: int, capsysbinary: pytest.CaptureFixture[bytes], tmp_path: Path
) -> None:
    known_hosts = tmp_path / "kh"
    url = f"gemini://{HOST}:{jetforce_port}/data.bin"
    assert main(["fetch", url, "--known-hosts", str(known_hosts)]) == 0
    out = capsysbinary.readouterr()
    assert out.out == FILES["data.bin"]
    assert out.err.decode().strip() == "20 application/octet-stream"
    assert cert_pair(HOST).fingerprint in known_hosts.read_text()
    assert main(["fetch", f"gemini://{HOST}:{jetforce_port}/nope", "--max-size", "10"]) == 1
    assert capsysbinary.readouterr().err.decode().startswith("51 ")
    assert main(["fetch", url, "--max-size", "10", "--json"]) == 1
    assert json.loads(capsysbinary.readouterr().out)["error"] == "BodyTooLarge"
