"""Which virtual agents and robots2.txt categories a bot is, and what it must obey.

Pure logic: a bot is described by its activities (:class:`Activity`), :func:`classify`
maps them to Gemini virtual agents and robots2.txt categories with the sentence of the
specification behind each, and warns where a profile is ambiguous.
"""

from geminibot.classify.activities import Activity, parse_activities
from geminibot.classify.profile import Profile, ProfileError, profile_from_toml
from geminibot.classify.registry import KnownBot, Registry, RegistryError, load_registry
from geminibot.classify.rules import Classification, classify

__all__ = [
    "Activity",
    "Classification",
    "KnownBot",
    "Profile",
    "ProfileError",
    "Registry",
    "RegistryError",
    "classify",
    "load_registry",
    "parse_activities",
    "profile_from_toml",
]
