"""The edge of ``classify --against``: from a SOURCE argument to a SitePolicy.

A SOURCE is one site:

* a policy file: ``robots2.txt`` and ``agents.txt`` are known by their names, any other
  file is read as robots.txt (a successful fetch of it, on a Gemini host by default);
* a capsule folder (as served by ``capsule-server``, ``serve.toml`` included): the three
  policy files are asked for exactly as the server would answer, redirects are followed,
  and each answer is read through RFC 9309's fetch outcomes (a 41 disallows everything,
  a 51 allows everything), so the policy is the one a bot would obtain over the network.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from capsule_server.files import Capsule, CapsuleConfigError
from geminibot.cliutil import CommandError, read_source
from geminibot.policy.outcomes import MAX_ROBOTS_REDIRECTS, fetch_outcome
from geminibot.policy.site_policy import AGENTS, ROBOTS, ROBOTS2, Fetched, Protocol, SitePolicy


def _file_kind(path: str) -> str:
    name = Path(path).name.lower()
    if name.endswith(ROBOTS2):
        return ROBOTS2
    if name.endswith(AGENTS):
        return AGENTS
    return ROBOTS


def site_from_file(source: str, protocol: Protocol) -> SitePolicy:
    """One policy file, as if fetched successfully from a host of ``protocol``."""
    _, data = read_source(source)
    kind = _file_kind(source) if source != "-" else ROBOTS
    return SitePolicy.from_texts(
        protocol,
        robots=data if kind == ROBOTS else None,
        robots2=data if kind == ROBOTS2 else None,
        agents=data if kind == AGENTS else None,
    )


def fetch_from_capsule(capsule: Capsule, path: str) -> Fetched:
    """What a bot gets asking ``capsule`` for ``path``: the outcome and, on success, the body.

    Redirects within the capsule are followed (at most MAX_ROBOTS_REDIRECTS); a redirect
    to another host counts as unavailable, since this capsule's files say nothing there.
    """
    hops = 0
    while True:
        answer = capsule.resolve(path)
        outcome = fetch_outcome("gemini", answer.status, meta=answer.meta, redirects_followed=hops)
        if outcome.kind != "redirect":
            return Fetched(outcome, answer.read_body() if outcome.kind == "success" else None)
        target = urlsplit(outcome.location or answer.meta)
        if target.netloc and target.hostname != capsule.host:
            return Fetched(fetch_outcome("gemini", 51, meta="redirect to another host"))
        path = target.path or "/"
        hops += 1
        if hops > MAX_ROBOTS_REDIRECTS:  # fetch_outcome ends the loop first; a bound anyway
            return Fetched(fetch_outcome("gemini", 51, meta="too many redirects"))


def site_from_capsule(folder: Path) -> SitePolicy:
    """The policy a bot obtains from a capsule folder (its name is the host name)."""
    try:
        capsule = Capsule(folder.name, folder)
    except CapsuleConfigError as exc:
        raise CommandError(f"{folder}: {exc}") from None
    except OSError as exc:
        raise CommandError(f"{folder}: cannot read: {exc.strerror}") from None
    host = capsule.host

    def chain_fetch(url: str) -> bytes | None:
        parts = urlsplit(url)
        if parts.scheme not in ("", "gemini") or (parts.hostname or host) != host:
            return None
        fetched = fetch_from_capsule(capsule, parts.path or "/")
        body = fetched.body
        return body if isinstance(body, bytes) else None

    return SitePolicy.build(
        "gemini",
        fetch_from_capsule(capsule, "/" + ROBOTS),
        fetch_from_capsule(capsule, "/" + ROBOTS2),
        fetch_from_capsule(capsule, "/" + AGENTS),
        robots2_url=f"gemini://{host}/{ROBOTS2}",
        chain_fetch=chain_fetch,
    )


def site_from_source(source: str, protocol: Protocol) -> SitePolicy:
    """A SOURCE argument (file, ``-`` or capsule folder) as a SitePolicy."""
    folder = Path(source)
    if source != "-" and folder.is_dir():
        return site_from_capsule(folder)
    return site_from_file(source, protocol)
