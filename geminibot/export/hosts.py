"""The files about hosts: each host with its counts and last TLS facts
(``hosts.parquet``), its TLS and certificate history (``tls.parquet``), the certificates
pinned (``pins.parquet``) and its policy files as fetched (``policy_files.parquet``)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from geminibot.export.model import (
    STRING,
    TIME,
    Column,
    Dataset,
    converted,
    flag,
    micros,
    parts_of,
)
from geminibot.store import export_reads as reads
from geminibot.urls import host_url


def _host_row(row: Any) -> tuple[Any, ...]:
    key, first, last, duration, slow, urls, pages, failures, failing, skipped = row[:10]
    version, cipher, sha256, trust, key_type, not_after, matches = row[10:]
    parts = parts_of(host_url(key), key)
    return (
        key,
        parts.host_name,
        parts.protocol,
        parts.port,
        micros(first),
        micros(last),
        duration,
        slow,
        urls,
        pages,
        failures,
        micros(failing),
        skipped,
        version,
        cipher,
        sha256,
        trust,
        key_type,
        micros(not_after),
        flag(matches),
    )


HOSTS = Dataset(
    "hosts.parquet",
    "Every host the crawl met, with its politeness state and counts.",
    "a host (a capsule: a Gemini host and port, or a web origin)",
    (
        Column(
            "url_host_key", STRING, "the crawl's host key: host[:port], or scheme://host[:port]"
        ),
        Column("url_host_name", STRING, "the host name or address"),
        Column("url_protocol", STRING, "gemini, http or https"),
        Column("url_port", pa.int32(), "the port, null when the scheme's default"),
        Column("first_seen_time", TIME, "when the crawl first met the host"),
        Column("last_fetch_time", TIME, "when its last request ended (null: none yet)"),
        Column("last_fetch_seconds", pa.float64(), "how long that request took"),
        Column("slow_downs", pa.int32(), "slow-down answers in a row (Gemini 44, HTTP 429 or 503)"),
        Column(
            "urls_known",
            pa.int32(),
            "live URLs of the host (queued, done, refused or failed; not trapped nor gone)",
        ),
        Column("pages", pa.int64(), "rows of index.parquet on the host"),
        Column("failures", pa.int32(), "requests failed in a row (0: its last one answered)"),
        Column("failing_since_time", TIME, "when those failures began (null: none)"),
        Column("skipped_reason", STRING, "why the last run skipped the host (null: it did not)"),
        Column("tls_version", STRING, "the TLS version last seen (null: none seen; tls.parquet)"),
        Column("tls_cipher", STRING, "the cipher suite last seen"),
        Column("certificate_sha256", STRING, "the certificate last seen: SHA-256, colon-separated"),
        Column("certificate_trust", STRING, "self-signed, known CA or unknown CA"),
        Column("certificate_key_type", STRING, "its key's type: RSA, EC (with its curve), ..."),
        Column("certificate_not_after_time", TIME, "when it expires"),
        Column("certificate_name_matches", pa.bool_(), "whether its names cover the host"),
    ),
    converted(reads.HOST_ROWS, _host_row),
)


def _pin_row(row: Any) -> tuple[Any, ...]:
    host, port, sha, first = row
    return (host, port, sha, micros(first))


PINS = Dataset(
    "pins.parquet",
    "The certificate the crawl pinned for each Gemini host and port (trust on first "
    "use): its SHA-256 fingerprint as Gemini clients show it.",
    "a host and port, and the certificate pinned for it",
    (
        Column("url_host_name", STRING, "the host name or address"),
        Column("url_port", pa.int32(), "the port"),
        Column("certificate_sha256", STRING, "SHA-256 of the DER certificate, colon-separated hex"),
        Column("first_seen_time", TIME, "when the crawl pinned it"),
    ),
    converted(reads.PIN_ROWS, _pin_row),
)


def _tls_row(row: Any) -> tuple[Any, ...]:
    key, version, cipher, first, last, sha, spki, subject, issuer, sans = row[:10]
    trust, key_type, bits, not_before, not_after, matches, parsed = row[10:]
    return (
        key,
        version,
        cipher,
        micros(first),
        micros(last),
        sha,
        spki,
        subject,
        issuer,
        sans.split("\n") if sans else [],
        trust,
        key_type,
        bits,
        micros(not_before),
        micros(not_after),
        bool(matches),
        bool(parsed),
    )


TLS = Dataset(
    "tls.parquet",
    "Each host's TLS version, cipher suite and server certificate as the crawl saw them at "
    "the connections it made, as history: a row per distinct set, from when it was first "
    "seen to when it was last seen (a host whose certificate changed has a row for each).",
    "a host's TLS version, cipher and certificate, over the time they were seen",
    (
        Column("url_host_key", STRING, "the crawl's host key"),
        Column("tls_version", STRING, "TLSv1.2, TLSv1.3, ..."),
        Column("tls_cipher", STRING, "the cipher suite"),
        Column("first_seen_time", TIME, "when the crawl first saw this set"),
        Column("last_seen_time", TIME, "when it last saw it (written at most hourly)"),
        Column("certificate_sha256", STRING, "SHA-256 of the DER certificate, colon-separated hex"),
        Column(
            "certificate_spki_sha256", STRING, "SHA-256 of its public key (SubjectPublicKeyInfo)"
        ),
        Column("certificate_subject", STRING, "its subject (at most 1,000 characters)"),
        Column("certificate_issuer", STRING, "its issuer"),
        Column(
            "certificate_sans",
            pa.list_(pa.field("element", pa.string())),
            "its subjectAltNames (at most 100)",
        ),
        Column(
            "certificate_trust",
            STRING,
            "self-signed, known CA (a CA the crawl trusted signed it) or unknown CA",
        ),
        Column("certificate_key_type", STRING, "its key's type"),
        Column("certificate_key_bits", pa.int32(), "its key's size in bits"),
        Column("certificate_not_before_time", TIME, "when it becomes valid"),
        Column("certificate_not_after_time", TIME, "when it expires"),
        Column("certificate_name_matches", pa.bool_(), "whether its names cover the host"),
        Column("certificate_parsed", pa.bool_(), "whether it could be read (else only hashed)"),
    ),
    converted(reads.TLS_ROWS, _tls_row),
)


def _policy_row(row: Any) -> tuple[Any, ...]:
    key, name, at, expires, outcome, reason, status, body = row
    body = None if body is None else bytes(body)
    length = None if body is None else len(body)
    url = host_url(key, "/" + name)
    return (key, name, url, micros(at), micros(expires), outcome, reason, status, length, body)


POLICY_FILES = Dataset(
    "policy_files.parquet",
    "Each host's policy files (robots.txt, robots2.txt, agents.txt) as the crawl last "
    "fetched them, with the outcome the policy took from the answer (RFC 9309).",
    "a policy file of a host, as last fetched",
    (
        Column("url_host_key", STRING, "the crawl's host key"),
        Column(
            "file",
            STRING,
            "robots.txt, robots2.txt, agents.txt, a robots2.txt chain link, or"
            " .well-known/security.txt (read by a researcher's crawl)",
        ),
        Column("url", STRING, "the URL the crawl asked for"),
        Column("fetch_time", TIME, "when it was fetched"),
        Column("expires_time", TIME, "when the crawl's copy expires"),
        Column(
            "outcome",
            STRING,
            "success, redirect, unavailable (no file: allow all) or unreachable (disallow all)",
        ),
        Column("reason", STRING, "why the answer led to that outcome"),
        Column("fetch_status", pa.int16(), "the answer's status (null: no answer)"),
        Column("content_length", pa.int64(), "the body's bytes (null: no body)"),
        Column("content", pa.binary(), "the body as fetched (null: no body)"),
    ),
    converted(reads.POLICY_ROWS, _policy_row),
)
