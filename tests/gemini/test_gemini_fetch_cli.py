"""``geminibot fetch`` as a user runs it, against a real TLS server on 127.0.0.1.

The server is a few lines of ``socketserver`` in a thread; the command runs its own trio
loop through the script's ``main`` in this process (``commands.run_main_bytes``), or, when
a test needs a terminal, in a child process whose standard output is a pseudo-terminal.
"""

from __future__ import annotations

import os
import pty
import socketserver
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from certs import cert_pair
from commands import run_main_bytes

HOST = "h.test"
#: Seconds a command may take: far more than a loopback fetch needs.
COMMAND_LIMIT = 60
#: Seconds between the server thread's looks for a shutdown (socketserver's default, 0.5,
#: was half of each test's time).
POLL = 0.01
Handler = Callable[[bytes, bytes | None], bytes]
"""(request line, client certificate DER or None) -> the whole response."""


@contextmanager
def gemini_server(handler: Handler, *, ask_certificate: bool = False) -> Iterator[int]:
    """A TLS server on a free loopback port answering with ``handler``; yields the port."""
    context = cert_pair(HOST).server_context()
    if ask_certificate:  # accept the one self-signed client certificate the tests use
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cadata=cert_pair("client.test").cert_pem.decode())

    class Connection(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            try:
                with context.wrap_socket(self.request, server_side=True) as tls:
                    tls.settimeout(COMMAND_LIMIT)
                    line = b""
                    while b"\r\n" not in line and len(line) < 2048:
                        chunk = tls.recv(2048)
                        if not chunk:
                            break
                        line += chunk
                    tls.sendall(handler(line, tls.getpeercert(binary_form=True)))
                    tls.unwrap()
            except (OSError, ssl.SSLError):
                pass  # the client went away: nothing to answer

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    with Server(("127.0.0.1", 0), Connection) as server:
        thread = threading.Thread(target=server.serve_forever, args=(POLL,), daemon=True)
        thread.start()
        try:
            yield server.server_address[1]
        finally:
            server.shutdown()
            thread.join(COMMAND_LIMIT)


def answer(response: bytes) -> Handler:
    return lambda _line, _cert: response


def fetch(port: int, *args: str, path: str = "/") -> subprocess.CompletedProcess[bytes]:
    command = ["fetch", f"gemini://{HOST}:{port}{path}"]
    route = ["--resolve", f"{HOST}:{port}:127.0.0.1"]
    return run_main_bytes([*command, *route, *args], limit=COMMAND_LIMIT)


def fetch_on_terminal(port: int, *args: str) -> tuple[int, bytes, bytes]:
    """Run fetch with a pseudo-terminal as its standard output: (exit, terminal, stderr)."""
    command = [sys.executable, "-m", "geminibot", "fetch", f"gemini://{HOST}:{port}/"]
    route = ["--resolve", f"{HOST}:{port}:127.0.0.1"]
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [*command, *route, *args],
            stdout=follower,
            stderr=subprocess.PIPE,
            timeout=COMMAND_LIMIT,
            check=False,
        )
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal has no writer left
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(leader)
    return proc.returncode, seen, proc.stderr


def first_line(data: bytes) -> str:
    return data.decode().splitlines()[0] if data else ""


# -- --known-hosts -----------------------------------------------------------------------


def test_known_hosts_never_overwrites_another_file(tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# My notes\n\nRemember the milk.\n")
    with gemini_server(answer(b"20 text/gemini\r\n# hi\r\n")) as port:
        proc = fetch(port, "--known-hosts", str(notes))
    assert proc.returncode == 2
    assert first_line(proc.stderr).startswith(f"geminibot: --known-hosts {notes}: not a known-")
    assert len(proc.stderr.splitlines()) == 1
    assert notes.read_text() == "# My notes\n\nRemember the milk.\n"
    assert proc.stdout == b""


def test_known_hosts_never_creates_folders(tmp_path: Path) -> None:
    target = tmp_path / "nonexistent" / "dir" / "kh"
    with gemini_server(answer(b"20 text/gemini\r\n# hi\r\n")) as port:
        proc = fetch(port, "--known-hosts", str(target))
    assert proc.returncode == 2
    assert "no such folder" in first_line(proc.stderr)
    assert len(proc.stderr.splitlines()) == 1
    assert not (tmp_path / "nonexistent").exists()


def test_known_hosts_file_is_created_and_reused(tmp_path: Path) -> None:
    store = tmp_path / "kh"
    with gemini_server(answer(b"20 text/gemini\r\n# hi\r\n")) as port:
        assert fetch(port, "--known-hosts", str(store)).returncode == 0
        assert fetch(port, "--known-hosts", str(store), "--strict-tofu").returncode == 0
    assert cert_pair(HOST).fingerprint in store.read_text()


# -- -o FILE ------------------------------------------------------------------------------


def test_output_file_gets_the_bytes_as_received(tmp_path: Path) -> None:
    body = "h\u00e9llo\r\n".encode("latin-1") + b"\x00\xff"
    out = tmp_path / "page.txt"
    with gemini_server(answer(b"20 text/plain; charset=latin-1\r\n" + body)) as port:
        proc = fetch(port, "-o", str(out))
    assert proc.returncode == 0
    assert out.read_bytes() == body
    assert proc.stdout == b""
    assert first_line(proc.stderr) == "20 text/plain; charset=latin-1"


def test_output_file_is_not_written_for_a_failure(tmp_path: Path) -> None:
    out = tmp_path / "page.txt"
    with gemini_server(answer(b"51 Not found\r\n")) as port:
        proc = fetch(port, "-o", str(out))
    assert proc.returncode == 1
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["missing/page.txt", "."])
def test_output_into_a_missing_folder_or_onto_a_folder_is_refused(
    tmp_path: Path, where: str
) -> None:
    with gemini_server(answer(b"20 text/plain\r\nx")) as port:
        proc = fetch(port, "-o", str(tmp_path / where))
    assert proc.returncode == 2
    assert first_line(proc.stderr).startswith("geminibot: -o ")
    assert len(proc.stderr.splitlines()) == 1
    assert not (tmp_path / "missing").exists()


# -- --input ------------------------------------------------------------------------------


def asks_for_input(line: bytes, _cert: bytes | None) -> bytes:
    url = line.decode().strip()
    if "?" not in url:
        return b"10 Your name?\r\n"
    return b"20 text/plain\r\nhello " + url.partition("?")[2].encode()


def test_input_answers_a_prompt() -> None:
    with gemini_server(asks_for_input) as port:
        proc = fetch(port, "--input", "Ann Lee/\u00e9?&")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"hello Ann%20Lee%2F%C3%A9%3F%26"


def test_a_prompt_without_input_says_how_to_answer() -> None:
    with gemini_server(asks_for_input) as port:
        proc = fetch(port)
    assert proc.returncode == 1
    assert first_line(proc.stderr) == "10 Your name?"
    assert "--input TEXT" in proc.stderr.decode()


def test_input_too_long_for_a_request_is_a_usage_error() -> None:
    with gemini_server(asks_for_input) as port:
        proc = fetch(port, "--input", "x" * 1100)
    assert proc.returncode == 2
    assert "1024" in first_line(proc.stderr)
    assert b"Traceback" not in proc.stderr


# -- --cert / --key -----------------------------------------------------------------------


def wants_certificate(_line: bytes, cert: bytes | None) -> bytes:
    if cert is None:
        return b"60 Certificate required\r\n"
    return b"20 text/plain\r\nwelcome " + cert_pair("client.test").fingerprint.encode()


def test_client_certificate_answers_a_60(tmp_path: Path) -> None:
    cert, key = cert_pair("client.test").write(tmp_path)
    with gemini_server(wants_certificate, ask_certificate=True) as port:
        without = fetch(port)
        with_cert = fetch(port, "--cert", str(cert), "--key", str(key))
    assert without.returncode == 1
    assert "--cert" in without.stderr.decode()
    assert with_cert.returncode == 0, with_cert.stderr
    assert with_cert.stdout == b"welcome " + cert_pair("client.test").fingerprint.encode()


@pytest.mark.parametrize("problem", ["missing", "not-pem", "key-only"])
def test_an_unusable_client_certificate_is_one_line(tmp_path: Path, problem: str) -> None:
    _, key = cert_pair("client.test").write(tmp_path)
    if problem == "missing":
        args = ["--cert", str(tmp_path / "nope.crt"), "--key", str(key)]
    elif problem == "not-pem":
        (tmp_path / "x.crt").write_text("hello")
        args = ["--cert", str(tmp_path / "x.crt"), "--key", str(key)]
    else:
        args = ["--key", str(key)]
    with gemini_server(wants_certificate, ask_certificate=True) as port:
        proc = fetch(port, *args)
    assert proc.returncode == 2
    assert first_line(proc.stderr).startswith("geminibot: --")
    assert len(proc.stderr.splitlines()) == 1


# -- binary bodies and terminals -----------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x1b[2J"


def test_binary_body_is_not_written_to_a_terminal() -> None:
    with gemini_server(answer(b"20 image/png\r\n" + PNG)) as port:
        code, terminal, err = fetch_on_terminal(port)
    assert code == 1
    assert terminal == b""
    assert err.decode().splitlines()[1].startswith("geminibot: not writing a binary body")


@pytest.mark.parametrize("force", [["-o", "-"], ["--raw"]])
def test_binary_body_to_a_terminal_when_asked(force: list[str]) -> None:
    with gemini_server(answer(b"20 image/png\r\n" + PNG)) as port:
        code, terminal, _ = fetch_on_terminal(port, *force)
    assert code == 0
    assert b"IHDR" in terminal


def test_binary_body_to_a_pipe_is_written() -> None:
    with gemini_server(answer(b"20 image/png\r\n" + PNG)) as port:
        proc = fetch(port)
    assert proc.returncode == 0
    assert proc.stdout == PNG


def test_text_on_a_terminal_cannot_steer_it() -> None:
    with gemini_server(answer(b"20 text/gemini\r\n\x1b]0;owned\x07# Hi\r\nline\r\n")) as port:
        code, terminal, _ = fetch_on_terminal(port)
    assert code == 0
    assert b"\x1b" not in terminal and b"\x07" not in terminal
    assert b"\\x1b]0;owned\\x07# Hi" in terminal


# -- server-chosen charsets ----------------------------------------------------------------


@pytest.mark.parametrize(
    "charset", ["rot13", "base64", "hex", "zlib", "bz2", "idna", "undefined", "punycode"]
)
def test_a_charset_that_is_no_text_encoding_reads_as_utf8(charset: str) -> None:
    body = "caf\u00e9 uryyb\n".encode()
    with gemini_server(answer(f"20 text/plain; charset={charset}\r\n".encode() + body)) as port:
        proc = fetch(port)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == body
    assert b"Traceback" not in proc.stderr
