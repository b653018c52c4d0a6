"""A bot profile: what a bot does with fetched content, read from TOML or from flags.

Profile file (every key but ``activities`` optional)::

    name = "mybot"                 # shown in the output
    token = "mybot"                # its own robots.txt product token, [A-Za-z_-]+
    activities = ["search-index", "statistics"]
    adapts_per_activity = false    # true: applies each virtual agent's rules per activity
    description = "free text"
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass

from geminibot.classify.activities import Activity, UnknownActivityError, parse_activities
from geminibot.classify.rules import Classification, classify

#: RFC 9309 section 2.2.1: a product token is made of letters, "_" and "-".
PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]+")
#: A profile or registry file larger than this is refused (a profile is a few lines).
MAX_PROFILE_BYTES = 64 * 1024

PROFILE_KEYS = ("name", "token", "activities", "adapts_per_activity", "description")


class ProfileError(ValueError):
    """A profile that cannot be used; the message says what is wrong and where."""


def is_product_token(token: str) -> bool:
    """True if ``token`` is a valid robots.txt product token (RFC 9309: [A-Za-z_-]+)."""
    return PRODUCT_TOKEN.fullmatch(token) is not None


@dataclass(frozen=True, slots=True)
class Profile:
    """A bot described by what it does; ``token`` is its own product token, if any."""

    activities: tuple[Activity, ...]
    name: str = ""
    token: str | None = None
    adapts_per_activity: bool = False
    description: str = ""

    def classify(self) -> Classification:
        return classify(self.activities, adapts_per_activity=self.adapts_per_activity)

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "token": self.token,
            "activities": [a.value for a in self.activities],
            "adapts_per_activity": self.adapts_per_activity,
            "description": self.description,
        }


def check_token(token: object, where: str) -> str:
    """``token`` if it is a valid product token, else a ProfileError naming ``where``."""
    if not isinstance(token, str) or not is_product_token(token):
        raise ProfileError(
            f"{where}: token {token!r} is not a robots.txt product token "
            f"(RFC 9309 allows only letters, '_' and '-')"
        )
    return token


def profile_from_flags(
    does: str, *, name: str = "", token: str | None = None, adapts_per_activity: bool = False
) -> Profile:
    """A profile from ``--does a,b`` (and optionally ``--agent TOKEN``)."""
    try:
        activities = parse_activities(does)
    except UnknownActivityError as exc:
        raise ProfileError(f"--does: {exc}") from None
    if not activities:
        raise ProfileError("--does: name at least one activity")
    if token is not None:
        check_token(token, "--agent")
    return Profile(activities, name=name, token=token, adapts_per_activity=adapts_per_activity)


def profile_from_mapping(data: dict[str, object], where: str) -> Profile:
    """A profile from a parsed TOML table; ``where`` names it in error messages."""
    unknown = sorted(set(data) - set(PROFILE_KEYS))
    if unknown:
        raise ProfileError(
            f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(PROFILE_KEYS)}"
        )
    raw = data.get("activities")
    if not isinstance(raw, list) or not raw:
        raise ProfileError(
            f"{where}: 'activities' must be a non-empty list of names, e.g. "
            f'activities = ["search-index"]'
        )
    try:
        activities = parse_activities(raw)
    except UnknownActivityError as exc:
        raise ProfileError(f"{where}: {exc}") from None
    name = _string(data, "name", where)
    description = _string(data, "description", where)
    token = data.get("token")
    checked = None if token is None else check_token(token, where)
    adapts = data.get("adapts_per_activity", False)
    if not isinstance(adapts, bool):
        raise ProfileError(f"{where}: 'adapts_per_activity' must be true or false")
    return Profile(
        activities,
        name=name,
        token=checked,
        adapts_per_activity=adapts,
        description=description,
    )


def profile_from_toml(data: bytes, where: str) -> Profile:
    """Parse a profile file. Bad input raises ProfileError, never anything else."""
    if len(data) > MAX_PROFILE_BYTES:
        raise ProfileError(f"{where}: larger than {MAX_PROFILE_BYTES} bytes, not a profile")
    try:
        table = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{where}: not UTF-8 (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{where}: not valid TOML: {exc}") from None
    return profile_from_mapping(table, where)


def _string(data: dict[str, object], key: str, where: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise ProfileError(f"{where}: {key!r} must be a string")
    return value
