"""security.txt (RFC 9116) read: well-formed when it has a Contact URI and exactly one
RFC 3339 Expires; an expired file is still well-formed."""

from __future__ import annotations

from datetime import UTC, datetime

from geminibot.policy.security_txt import parse_security_txt

AT = datetime(2026, 6, 1, tzinfo=UTC)


def test_well_formed_and_expired() -> None:
    got = parse_security_txt(
        b"# ours\nContact: mailto:security@a.test\ncontact: https://a.test/report\n"
        b"Expires: 2027-01-01T00:00:00.000Z\nPreferred-Languages: en, fr\n"
    )
    assert got.well_formed
    assert got.contacts == ("mailto:security@a.test", "https://a.test/report")
    assert not got.expired(AT)
    old = parse_security_txt(b"Contact: mailto:x@a.test\nExpires: 2020-01-01T00:00:00+02:00\n")
    assert old.well_formed and old.expired(AT)


def test_what_keeps_a_file_from_being_well_formed() -> None:
    assert parse_security_txt(b"Contact: mailto:x@a.test\n").problems == ("no Expires",)
    assert parse_security_txt(b"Expires: 2027-01-01T00:00:00Z\n").problems == ("no Contact URI",)
    assert parse_security_txt(b"Contact: someone\nExpires: 2027-01-01T00:00:00Z\n").problems == (
        "no Contact URI",
    )
    twice = b"Contact: tel:+1-201-555-0123\nExpires: 2027-01-01T00:00:00Z\nExpires: 2028-01-01T00:00:00Z\n"
    assert parse_security_txt(twice).problems == ("Expires given more than once",)
    for bad in (b"2027-01-01", b"2027-01-01T00:00:00", b"next year"):
        got = parse_security_txt(b"Contact: mailto:x@a.test\nExpires: " + bad + b"\n")
        assert got.problems == ("Expires is not an RFC 3339 date-time",)
    assert parse_security_txt(b"\xff\x00" * 1000).problems == ("no Contact URI", "no Expires")


def test_a_signed_file_is_read_inside_its_signature() -> None:
    signed = (
        b"-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\n"
        b"Contact: mailto:x@a.test\n- Expires: 2027-01-01T00:00:00Z\n"
        b"-----BEGIN PGP SIGNATURE-----\nContact: mailto:not-this@a.test\n"
        b"-----END PGP SIGNATURE-----\n"
    )
    got = parse_security_txt(signed)
    assert got.well_formed and got.contacts == ("mailto:x@a.test",)
