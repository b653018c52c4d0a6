"""The census's figures of hosts crawled over both protocols: a capsule whose host name
the crawl also reached over the web (an ``https://`` or ``http://`` origin of the same
name), how often both sides publish a robots.txt, and how the two policies differ.

The policies are those the crawl's files make (``robots``: robots.txt, robots2.txt and its
chain, agents.txt as last fetched, on each side), compared by ``compare``'s own pure
comparison (:func:`geminibot.policy.compare.compare`: every Gemini virtual agent and ``*``
as bot classes) at the census's time: no request is made. A comparison decides up to
:data:`~geminibot.policy.candidates.MAX_CANDIDATE_PATHS` paths; hosts are compared in
name order, at most :data:`MAX_COMPARED` of them and :data:`MAX_COMPARED_PATHS` paths
in all per census, which the figures say.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime

from geminibot.census.model import Figure
from geminibot.policy.candidates import MAX_CANDIDATE_PATHS, candidate_paths
from geminibot.policy.compare import KINDS, Comparison, bot_classes, compare
from geminibot.policy.outcomes import FetchOutcome
from geminibot.policy.security_txt import SECURITY_TXT
from geminibot.policy.site_policy import AGENTS, ROBOTS, ROBOTS2, Fetched, SitePolicy
from geminibot.store import policy_reads
from geminibot.store.database import Database
from geminibot.urls import host_name, host_protocol, host_url

#: The most hosts whose two policies one census compares (each comparison decides up to
#: a few thousand paths for five bot classes: this bounds a census's CPU).
MAX_COMPARED = 200
#: The most candidate paths (:func:`~geminibot.policy.candidates.candidate_paths`) one
#: census decides, all hosts together: a comparison's CPU grows with its paths (some
#: 0.25 ms each), so a few hosts with huge files cannot make a census slow.
MAX_COMPARED_PATHS = 50_000
_WINDOW = "each side's last fetch of its policy files"
#: Scheme preference when a host name has several web origins.
_SCHEMES = ("https://", "http://")


def _name(key: str) -> str:
    """A host key's host name without its port (``ca.test:1966`` -> ``ca.test``)."""
    name = host_name(key)
    if name.startswith("["):
        return name.split("]", 1)[0] + "]"
    return name.rsplit(":", 1)[0] if ":" in name else name


def web_origins(conn: Database) -> dict[str, str]:
    """Each host name the crawl reached over the web -> its origin: ``https://`` before
    ``http://``, the default port (the shortest key) before others."""
    origins: dict[str, str] = {}
    keys = sorted(
        policy_reads.web_origins(conn), key=lambda k: (-len(k), k)
    )  # the preferred last: it is kept
    for scheme in reversed(_SCHEMES):
        for key in keys:
            if key.startswith(scheme):
                origins[_name(key)] = key
    return origins


def _files(conn: Database, host: str) -> dict[str, Fetched]:
    """The host's files as last fetched, by their cache name."""
    return {
        file.name: Fetched(
            FetchOutcome(file.outcome.kind, file.outcome.reason, None, 0.0), file.body
        )
        for file in policy_reads.host_files(conn, host)
    }


def stored_policy(host: str, files: dict[str, Fetched]) -> SitePolicy:
    """The host's policy from its files as the crawl cached them (a robots2.txt chain
    link under its path on the host, or its URL on another host)."""
    chain: dict[str, bytes | str | None] = {}
    for name, fetched in files.items():
        if name in (ROBOTS, ROBOTS2, AGENTS, SECURITY_TXT):
            continue
        url = name if "://" in name else host_url(host, "/" + name)
        chain[url] = fetched.body if fetched.outcome.kind == "success" else None
    return SitePolicy.build(
        host_protocol(host),
        files.get(ROBOTS),
        files.get(ROBOTS2),
        files.get(AGENTS),
        robots2_url=host_url(host, "/" + ROBOTS2),
        chain_fetch=chain,
    )


def difference_kinds(comparison: Comparison) -> set[str]:
    """The kinds of difference (:data:`~geminibot.policy.compare.KINDS`) a comparison
    found."""
    return {diff.kind for diff in comparison.differences}


def compare_stored(web: SitePolicy, gemini: SitePolicy, at: datetime) -> Comparison:
    """``compare``'s comparison of two policies for every virtual agent and ``*``."""
    return compare(web, gemini, bot_classes((web, gemini)), at)


def web_figures(conn: Database, capsules: list[str], now: float) -> Iterator[Figure]:
    """The figures of the ``capsules`` (host keys) also crawled over the web; the files
    of one pair at a time in memory. Hosts are compared in name order while both
    :data:`MAX_COMPARED` and :data:`MAX_COMPARED_PATHS` allow."""
    origins = web_origins(conn)
    pairs = sorted((c, origins[_name(c)]) for c in capsules if _name(c) in origins)
    with_robots = policy_reads.hosts_with(conn, ROBOTS)
    both = [(c, o) for c, o in pairs if c in with_robots and o in with_robots]
    at = datetime.fromtimestamp(now, UTC)
    verdicts: Counter[str] = Counter({"identical in effect": 0, "differing": 0})
    kinds: Counter[str] = Counter({kind: 0 for kind in KINDS})
    compared = capped = 0
    budget = MAX_COMPARED_PATHS
    for capsule, origin in both[:MAX_COMPARED]:
        web = stored_policy(origin, _files(conn, origin))
        gemini = stored_policy(capsule, _files(conn, capsule))
        paths = len(candidate_paths(web, gemini)[0])
        if paths > budget:
            break
        budget -= paths
        comparison = compare_stored(web, gemini, at)
        found = difference_kinds(comparison)
        compared += 1
        capped += comparison.capped
        verdicts["differing" if found else "identical in effect"] += 1
        kinds.update(found)
    yield Figure(
        "web.hosts",
        "capsules whose host name the crawl also reached over the web",
        len(pairs),
        _WINDOW,
    )
    yield Figure(
        "web.both_robots",
        "of those, with a robots.txt fetched successfully on both sides",
        len(both),
        _WINDOW,
    )
    yield Figure(
        "web.compared",
        f"of those, compared (the first by name: at most {MAX_COMPARED:,} hosts and"
        f" {MAX_COMPARED_PATHS:,} candidate paths per census)",
        compared,
        _WINDOW,
    )
    yield Figure(
        "web.compared_in_part",
        f"compared hosts whose files have so many rules that only {MAX_CANDIDATE_PATHS:,}"
        " paths were decided (as in 'compare': differences at longer paths not seen)",
        capped,
        _WINDOW,
    )
    yield Figure(
        "web.policies",
        "compared hosts whose web and Gemini policies are identical in effect or differ"
        " (for every virtual agent and *, as 'compare' decides)",
        dict(verdicts),
        _WINDOW,
    )
    yield Figure(
        "web.differences",
        "compared hosts whose two policies differ, by kind (paths allowed on one side"
        " only, the wait between requests, robots2.txt usage answers; a host once a kind)",
        dict(kinds),
        _WINDOW,
    )
