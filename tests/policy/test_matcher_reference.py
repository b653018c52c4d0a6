"""The indexed matcher agrees with a direct transcription of Google's algorithm.

Google's ``Matches`` keeps the set of path positions the pattern prefix can reach; the
longest matching pattern decides and an allow wins a tie. Rule sets here are drawn so
that many wildcard rules share one head, which sends them through the combined-expression
path of the matcher as well as the small-bucket path.
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from geminibot.policy import parse_robots


def google_matches(path: str, pattern: str) -> bool:
    positions = [0]
    for i, ch in enumerate(pattern):
        if ch == "$" and i == len(pattern) - 1:
            return positions[-1] == len(path)
        if ch == "*":
            positions = list(range(positions[0], len(path) + 1))
        else:
            positions = [p + 1 for p in positions if p < len(path) and path[p] == ch]
            if not positions:
                return False
    return True


def reference_allowed(rules: list[tuple[bool, str]], path: str) -> bool:
    best_allow = max((len(p) for a, p in rules if a and google_matches(path, p)), default=-1)
    best_disallow = max((len(p) for a, p in rules if not a and google_matches(path, p)), default=-1)
    if best_allow <= 0 and best_disallow <= 0:
        return True
    return not best_disallow > best_allow


ALPHABET = "ab/$*"
patterns = st.text(alphabet=ALPHABET, min_size=0, max_size=7).map(lambda s: "/" + s)
rule_sets = st.lists(st.tuples(st.booleans(), patterns), min_size=1, max_size=30)
paths = (
    st.text(alphabet="ab/$", max_size=12)
    .map(lambda s: "/" + s)
    .filter(lambda p: not p.startswith("//"))
)


@settings(max_examples=400, deadline=None)
@given(rule_sets, st.lists(paths, min_size=1, max_size=10))
def test_agrees_with_google_algorithm(rules: list[tuple[bool, str]], probe: list[str]) -> None:
    text = "User-agent: *\n" + "".join(f"{'Allow' if a else 'Disallow'}: {p}\n" for a, p in rules)
    robots = parse_robots(text)
    for path in probe:
        if path == "/robots.txt":
            continue
        assert robots.allowed(path, "bot") == reference_allowed(rules, path), (rules, path)


def test_large_same_head_bucket() -> None:
    rules = [(i % 3 == 0, f"/*x{i}*y") for i in range(40)] + [(False, "/*x1*"), (True, "/*x1*y$")]
    text = "User-agent: *\n" + "".join(f"{'Allow' if a else 'Disallow'}: {p}\n" for a, p in rules)
    robots = parse_robots(text)
    for path in ("/x1y", "/ax12by", "/x30_y", "/x39-y-z", "/nothing", "/x1", "/x1yz"):
        assert robots.allowed(path, "bot") == reference_allowed(rules, path), path
