"""The registry of known bots, ``geminibot/data/bots.toml``, read and checked.

Every entry is validated when the file is read (:func:`parse_registry`), so a broken entry is
a clear error naming the entry, never a wrong answer. The file's header documents its keys.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import resources

from geminibot.classify.activities import Activity, UnknownActivityError, parse_activities
from geminibot.classify.profile import Profile, is_product_token
from geminibot.classify.rules import VIRTUAL_AGENT_NAMES
from geminibot.policy.cli import REGISTRY_RESOURCE

#: The registry file is refused past this size (it is hand-written data).
MAX_REGISTRY_BYTES = 1024 * 1024

BOT_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
PROTOCOLS = ("gemini", "web")
EVIDENCE = ("operator", "third-party")
REQUIRED_KEYS = ("id", "name", "operator", "protocol", "activities", "documented_as", "source")
OPTIONAL_KEYS = ("token", "obeys", "evidence", "notes")


class RegistryError(ValueError):
    """The registry file is malformed; ``problems`` lists every problem found."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = tuple(problems)


@dataclass(frozen=True, slots=True)
class KnownBot:
    """One known bot, as documented by ``source``."""

    id: str
    name: str
    operator: str
    protocol: str
    activities: tuple[Activity, ...]
    documented_as: str
    source: str
    token: str | None = None
    obeys: tuple[str, ...] = ()
    evidence: str = "operator"
    notes: str = ""

    def profile(self) -> Profile:
        return Profile(
            self.activities, name=self.name, token=self.token, description=self.documented_as
        )

    @property
    def documented_virtual_agents(self) -> tuple[str, ...]:
        """The virtual agents among the groups it is documented to obey."""
        lowered = {t.lower() for t in self.obeys}
        return tuple(va for va in VIRTUAL_AGENT_NAMES if va in lowered)

    @property
    def missing_virtual_agents(self) -> tuple[str, ...]:
        """For a Gemini bot: virtual agents its activities call for that it is not
        documented to obey (an empty ``obeys`` documents nothing, so nothing is missing)."""
        if self.protocol != "gemini" or not self.obeys:
            return ()
        documented = self.documented_virtual_agents
        wanted = self.profile().classify().virtual_agent_names
        return tuple(va for va in wanted if va not in documented)

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "name": self.name,
            "operator": self.operator,
            "protocol": self.protocol,
            "token": self.token,
            "obeys": list(self.obeys),
            "activities": [a.value for a in self.activities],
            "documented_as": self.documented_as,
            "source": self.source,
            "evidence": self.evidence,
            "notes": self.notes,
            "missing_virtual_agents": list(self.missing_virtual_agents),
        }


@dataclass(frozen=True, slots=True)
class Registry:
    """The known bots (the registry file), found by id, product token or name."""

    bots: tuple[KnownBot, ...]

    def find(self, name: str) -> KnownBot | None:
        """The bot whose id, token or name is ``name`` (case-insensitive), or None."""
        key = name.strip().lower()
        for bot in self.bots:
            if key in (bot.id, bot.name.lower()) or (bot.token or "").lower() == key:
                return bot
        return None


def _entry(raw: object, index: int, problems: list[str]) -> KnownBot | None:
    where = f"bot #{index + 1}"
    if not isinstance(raw, dict):
        problems.append(f"{where}: not a table")
        return None
    if isinstance(raw.get("id"), str):
        where = f"bot {raw['id']!r}"
    before = len(problems)
    for key in sorted(set(raw) - set(REQUIRED_KEYS) - set(OPTIONAL_KEYS)):
        problems.append(f"{where}: unknown key {key!r}")
    strings = _strings(raw, where, problems)
    _check_strings(strings, where, problems)
    obeys = _obeys(raw.get("obeys", []), where, problems)
    activities = _activities(raw.get("activities"), where, problems)
    if len(problems) > before:
        return None
    return KnownBot(
        id=strings["id"],
        name=strings["name"],
        operator=strings["operator"],
        protocol=strings["protocol"],
        activities=activities,
        documented_as=strings["documented_as"],
        source=strings["source"],
        token=strings.get("token"),
        obeys=obeys,
        evidence=strings.get("evidence", "operator"),
        notes=strings.get("notes", ""),
    )


def _strings(raw: dict[str, object], where: str, problems: list[str]) -> dict[str, str]:
    """The entry's string keys that are present and non-empty."""
    strings: dict[str, str] = {}
    for key in (*REQUIRED_KEYS, "token", "evidence", "notes"):
        if key == "activities":
            continue
        value = raw.get(key)
        if value is None:
            if key in REQUIRED_KEYS:
                problems.append(f"{where}: missing {key!r}")
            continue
        if not isinstance(value, str) or not value.strip():
            problems.append(f"{where}: {key!r} must be a non-empty string")
            continue
        strings[key] = value
    return strings


def _check_strings(strings: dict[str, str], where: str, problems: list[str]) -> None:
    """The string keys whose values have a form: id, protocol, evidence, token."""
    if "id" in strings and not BOT_ID.fullmatch(strings["id"]):
        problems.append(f"{where}: id must be lower-case letters, digits and '-'")
    if "protocol" in strings and strings["protocol"] not in PROTOCOLS:
        problems.append(f"{where}: protocol must be one of {', '.join(PROTOCOLS)}")
    if strings.get("evidence", "operator") not in EVIDENCE:
        problems.append(f"{where}: evidence must be one of {', '.join(EVIDENCE)}")
    token = strings.get("token")
    if token is not None and not is_product_token(token):
        problems.append(f"{where}: token {token!r} is not an RFC 9309 product token [A-Za-z_-]+")


def _obeys(obeys_raw: object, where: str, problems: list[str]) -> tuple[str, ...]:
    if not isinstance(obeys_raw, list):
        problems.append(f"{where}: 'obeys' must be a list of tokens")
        return ()
    obeys: list[str] = []
    for t in obeys_raw:
        if not isinstance(t, str) or not (t == "*" or is_product_token(t)):
            problems.append(f"{where}: obeys {t!r} is neither '*' nor a product token")
        else:
            obeys.append(t)
    return tuple(obeys)


def _activities(acts_raw: object, where: str, problems: list[str]) -> tuple[Activity, ...]:
    if not isinstance(acts_raw, list) or not acts_raw:
        problems.append(f"{where}: 'activities' must be a non-empty list")
        return ()
    try:
        return parse_activities(acts_raw)
    except UnknownActivityError as exc:
        problems.append(f"{where}: {exc}")
        return ()


def parse_registry(data: bytes) -> Registry:
    """Read and validate a registry file; every problem is reported in one RegistryError."""
    if len(data) > MAX_REGISTRY_BYTES:
        raise RegistryError([f"larger than {MAX_REGISTRY_BYTES} bytes"])
    try:
        table = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RegistryError([f"not UTF-8 (byte {exc.start})"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError([f"not valid TOML: {exc}"]) from None
    entries = table.get("bot")
    if set(table) - {"bot"} or not isinstance(entries, list):
        raise RegistryError(["expected only [[bot]] entries"])
    problems: list[str] = []
    bots = [_entry(raw, i, problems) for i, raw in enumerate(entries)]
    seen: dict[str, int] = {}
    for index, bot in enumerate(bots):
        if bot is None:
            continue
        for key in sorted({bot.id, bot.name.lower(), (bot.token or "").lower()} - {""}):
            if key in seen and seen[key] != index:
                other = bots[seen[key]]
                other_id = other.id if other else "?"
                problems.append(f"bot {bot.id!r}: {key!r} is also used by bot {other_id!r}")
            seen.setdefault(key, index)
    if problems:
        raise RegistryError(problems)
    return Registry(tuple(b for b in bots if b is not None))


def load_registry() -> Registry:
    """The registry shipped with geminibot."""
    package, name = REGISTRY_RESOURCE
    return parse_registry(resources.files(package).joinpath(name).read_bytes())
