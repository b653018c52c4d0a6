"""security.txt (RFC 9116): how to report a security issue to a site's owners (pure).

A site publishes it at ``/.well-known/security.txt``: lines ``Field: value`` (field names
case-insensitive), ``#`` comments, optionally inside an OpenPGP cleartext signature. RFC
9116 requires at least one ``Contact`` (a URI: ``mailto:``, ``https:``, ``tel:``) and
exactly one ``Expires`` (an RFC 3339 date-time), after which the file is stale.

It is no policy for bots: :func:`parse_security_txt` only says what a file holds and
whether it is well-formed (those two required fields present and readable); an expired
file is still well-formed (:meth:`SecurityTxt.expired` says whether it is stale).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

#: Where a site publishes it (RFC 9116 section 3), as a path below the site's root.
SECURITY_TXT = ".well-known/security.txt"

_FIELD = re.compile(r"([A-Za-z0-9-]+)[ \t]*:[ \t]*(.*)")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")
_SIGNED = "-----BEGIN PGP SIGNED MESSAGE-----"
_SIGNATURE = "-----BEGIN PGP SIGNATURE-----"


@dataclass(frozen=True)
class SecurityTxt:
    """What a security.txt holds: its contacts, its expiry, and what keeps it from being
    well-formed (``problems``, empty when it is)."""

    contacts: tuple[str, ...]
    expires: datetime | None
    problems: tuple[str, ...]

    @property
    def well_formed(self) -> bool:
        return not self.problems

    def expired(self, at: datetime) -> bool:
        """Whether its ``Expires`` is before ``at`` (a file without one: not known, False)."""
        return self.expires is not None and self.expires < at


def _signed_content(lines: list[str]) -> list[str]:
    """The lines an OpenPGP cleartext signature frames (RFC 4880 7), dash-escapes undone;
    the lines themselves when the file is not signed."""
    if not lines or lines[0].strip() != _SIGNED:
        return lines
    body = lines[1:]
    start = next((i + 1 for i, line in enumerate(body) if not line.strip()), len(body))
    content = []
    for line in body[start:]:
        if line.strip() == _SIGNATURE:
            break
        content.append(line[2:] if line.startswith("- ") else line)
    return content


def _date_time(value: str) -> datetime | None:
    """An RFC 3339 date-time (a time and an offset required), else None."""
    if "T" not in value.upper():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def parse_security_txt(body: bytes) -> SecurityTxt:
    """Read a security.txt (see the module text); never raises."""
    text = body.decode("utf-8", "replace").lstrip("\ufeff")
    contacts: list[str] = []
    expires: list[str] = []
    for line in _signed_content(text.splitlines()):
        found = _FIELD.fullmatch(line.strip())
        if line.lstrip().startswith("#") or found is None:
            continue
        name, value = found.group(1).lower(), found.group(2).strip()
        if name == "contact":
            contacts.append(value)
        elif name == "expires":
            expires.append(value)
    problems = []
    if not any(_URI.fullmatch(c) for c in contacts):
        problems.append("no Contact URI")
    when = _date_time(expires[0]) if len(expires) == 1 else None
    if not expires:
        problems.append("no Expires")
    elif len(expires) > 1:
        problems.append("Expires given more than once")
    elif when is None:
        problems.append("Expires is not an RFC 3339 date-time")
    return SecurityTxt(tuple(contacts), when, tuple(problems))
