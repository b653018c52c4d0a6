"""The loopback helpers' own checks: ``listens`` sees a process's own listening socket,
and only that process's, and only while it listens."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from loopback import free_port, listens, wait_listening


def test_listens_sees_only_the_process_that_listens() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
        assert not listens(os.getpid(), port)  # bound, not yet listening
        server.listen()
        assert listens(os.getpid(), port)
        assert not listens(os.getpid(), free_port())
        child = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
        )
        try:
            assert not listens(child.pid, port)  # another process holds the port
        finally:
            child.communicate(b"")


def test_wait_listening_refuses_a_port_another_process_holds() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            with pytest.raises(RuntimeError, match="did not listen"):
                wait_listening(port, child, "sleeper", 0.2)
        finally:
            child.kill()
            child.wait()
