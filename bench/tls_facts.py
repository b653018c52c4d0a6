"""What keeping each host's TLS and certificate facts costs the crawler, per page: the
recorder's work for a connection whose certificate is the host's last (every page but a
host's first of a run), against the work for a new certificate (parsing it, hashing its
key, checking it against the trust store: once per host per run), and the trust store's
loading (once per crawl). The crawler's whole CPU per page is bench/space_crawl.py's
``cpu_ms_per_page`` (run it alternately on main and on a branch: docs/benchmarks.md).

The store is a real SQLite crawl store in a temporary folder; CPU is this process's
(``time.process_time``). No network.

    nice -n 10 .venv/bin/python bench/tls_facts.py [--pages 200000] [--certificates 300]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from geminibot.crawl.tlsfacts import TLSRecorder
from geminibot.gemini.certfacts import TrustStore, certificate_facts, sha256_fingerprint
from geminibot.gemini.certs import make_certificate
from geminibot.gemini.client import TLSSeen
from geminibot.store.crawlstore import SqliteStore
from geminibot.store.db import connect
from geminibot.store.traps import FrontierLimits


def seen_of(host: str) -> TLSSeen:
    from cryptography import x509

    pem, _ = make_certificate(host, dt.datetime.now(dt.UTC))
    der = x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
    return TLSSeen("TLSv1.3", "TLS_AES_256_GCM_SHA384", der, sha256_fingerprint(der))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=200_000)
    parser.add_argument("--certificates", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        conn = connect(Path(tmp) / "crawl.db")
        store = SqliteStore(conn, time.time, FrontierLimits(), batch=True)
        started = time.process_time()
        trust = TrustStore.load()
        load_ms = (time.process_time() - started) * 1000
        recorder = TLSRecorder(store, lambda: trust)
        hosts = [f"h{n:04d}.test" for n in range(args.certificates)]
        seen = {host: seen_of(host) for host in hosts}
        started = time.process_time()
        for n, host in enumerate(hosts):
            recorder.seen(host, seen[host], 1000.0 + n)  # a new certificate: facts, a write
        first_ms = (time.process_time() - started) * 1000 / len(hosts)
        started = time.process_time()
        for n in range(args.pages):
            host = hosts[n % len(hosts)]
            recorder.seen(host, seen[host], 2000.0 + n / 1000)  # the same: a comparison
        again_us = (time.process_time() - started) * 1e6 / args.pages
        started = time.process_time()
        for host in hosts:
            certificate_facts(seen[host].der, host, trust)
        facts_ms = (time.process_time() - started) * 1000 / len(hosts)
        store.flush()
        conn.close()
    result = {
        "trust_store_certificates": len(trust),
        "trust_store_load_ms": round(load_ms, 2),
        "new_certificate_ms": round(first_ms, 3),
        "certificate_facts_ms": round(facts_ms, 3),
        "same_certificate_us": round(again_us, 3),
        "pages": args.pages,
        "certificates": args.certificates,
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:<28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
