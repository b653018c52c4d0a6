"""A Gemini client's own CPU per TLS connection, full handshake vs resumed session, split
into creating the connection (``SSLContext.wrap_socket``) and the handshake.

Why: py-spy on the space crawl puts a third of the crawler's TLS time in ``wrap_socket``,
not in the handshake. Offering a session makes CPython (3.11, ``PySSL_set_session``) copy
it through ``i2d_SSL_SESSION``/``d2i_SSL_SESSION`` (``_ssl_session_dup``, a workaround for
an old OpenSSL TLS 1.3 bug), which parses the server's certificate again: with OpenSSL 3.0
that costs about as much as the resumed handshake it enables.

The server is a blocking Python TLS server in a thread (the space's wildcard certificate,
two session tickets per handshake, as bench/geminispace serves); only the client thread's
CPU (``time.thread_time``) is counted. Loopback only.

    nice -n 10 .venv/bin/python bench/tls_resume_cost.py [--connections 300]
"""

from __future__ import annotations

import argparse
import os
import socket
import ssl
import sys
import threading
import time

from geminispace.server import wildcard_context

from geminibot.gemini.client import make_ssl_context

HOST = "h0001.space.test"
REQUEST = f"gemini://{HOST}/\r\n".encode()


def serve(listener: socket.socket, context: ssl.SSLContext) -> None:
    while True:
        raw, _ = listener.accept()
        try:
            with context.wrap_socket(raw, server_side=True) as tls:
                tls.recv(1024)
                tls.sendall(b"20 text/gemini\r\n# hello\n")
        except (ssl.SSLError, OSError):
            raw.close()


def connect(
    port: int, session: ssl.SSLSession | None
) -> tuple[float, float, bool, ssl.SSLSession | None]:
    """(wrap seconds, handshake-and-exchange seconds, resumed, session) of one connection."""
    context = CLIENT
    raw = socket.create_connection(("127.0.0.1", port))
    t0 = time.thread_time()
    tls = context.wrap_socket(
        raw, server_hostname=HOST, session=session, do_handshake_on_connect=False
    )
    t1 = time.thread_time()
    tls.do_handshake()
    tls.getpeercert(binary_form=True)
    tls.sendall(REQUEST)
    tls.recv(1024)
    t2 = time.thread_time()
    resumed, kept = tls.session_reused, tls.session
    tls.close()
    return t1 - t0, t2 - t1, resumed, kept


CLIENT = make_ssl_context()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=300)
    n = max(1, parser.parse_args().connections)
    server = wildcard_context()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    threading.Thread(target=serve, args=(listener, server), daemon=True).start()
    print(f"{ssl.OPENSSL_VERSION}, Python {sys.version.split()[0]}, load {os.getloadavg()}")
    *_, session = connect(port, None)
    for label, offer in (("full", None), ("resumed", session)):
        wrap = rest = 0.0
        resumed = 0
        for _ in range(n):
            w, r, again, _ = connect(port, offer)
            wrap, rest, resumed = wrap + w, rest + r, resumed + again
        print(
            f"{label}: {n} connections, {resumed} resumed; client CPU per connection:"
            f" wrap_socket {wrap / n * 1e6:.0f} us, handshake and exchange {rest / n * 1e6:.0f} us,"
            f" total {(wrap + rest) / n * 1e6:.0f} us"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
