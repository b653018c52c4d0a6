"""The classification rules: every activity, every combination, the ambiguous profiles."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geminibot.classify import Activity, classify, parse_activities
from geminibot.classify.activities import UnknownActivityError, activity_names
from geminibot.classify.rules import (
    CATEGORY_NAMES,
    G_ARCHIVER,
    G_COMBINATION,
    G_INDEXER,
    G_RESEARCHER,
    G_SPIRIT,
    G_STAR,
    G_WEBPROXY,
    P_MODES,
    P_UNKNOWN,
    R_CATEGORY,
    R_DECLARE,
    R_DIRECTIVE,
    VIRTUAL_AGENT_NAMES,
    SpecRef,
)

A = Activity

# Written out by hand from the two specifications (docs/classify.md), not derived from the
# module's tables, so that a change to a table has to be a change to this expectation too.
EXPECTED: dict[Activity, tuple[tuple[str, ...], tuple[str, ...]]] = {
    A.ARCHIVE: (("archiver",), ()),
    A.SEARCH_INDEX: (("indexer",), ("search-indexer",)),
    A.STATISTICS: (("researcher",), ("monitoring",)),
    A.WEB_PROXY: (("webproxy",), ()),
    A.LINK: ((), ()),
    A.BULK_COLLECT: ((), ("data-harvester",)),
    A.TRAIN: ((), ()),
    A.SUMMARISE: ((), ("ai-assistant",)),
    A.AI_RESEARCH: ((), ("ai-researcher",)),
    A.GENERATE: ((), ("content-generator",)),
    A.CODE_ASSIST: ((), ("code-assistant",)),
    A.ADVERTISING: ((), ("ad-network",)),
    A.UPTIME: ((), ("monitoring",)),
    A.SEO_AUDIT: ((), ("monitoring",)),
    A.FEED_READER: ((), ()),
}


def test_expectation_covers_every_activity() -> None:
    assert set(EXPECTED) == set(Activity)


@pytest.mark.parametrize("activity", list(Activity), ids=lambda a: a.value)
def test_each_activity_alone(activity: Activity) -> None:
    result = classify([activity])
    vas, cats = EXPECTED[activity]
    assert result.virtual_agent_names == vas
    assert result.category_names == cats
    assert result.activities == (activity,)
    assert result.directives, "every activity is answered by at least one robots2 directive"
    for assignment in (*result.virtual_agents, *result.categories, *result.directives):
        assert assignment.activities == (activity,)
        for reason in assignment.reasons:
            assert reason.source.quote and reason.source.doc
    if not vas:
        assert "no-virtual-agent" in {w.code for w in result.warnings}
    if not cats:
        assert "no-robots2-category" in {w.code for w in result.warnings}
    assert result.combination is None
    assert result.recommended_mode == "precedence"


def test_every_category_and_virtual_agent_is_reachable() -> None:
    reached_va = {va for vas, _ in EXPECTED.values() for va in vas}
    reached_cat = {c for _, cats in EXPECTED.values() for c in cats}
    assert reached_va == set(VIRTUAL_AGENT_NAMES)
    assert reached_cat == set(CATEGORY_NAMES)


subsets = st.sets(st.sampled_from(list(Activity)))


@given(subsets, st.randoms(use_true_random=False))
def test_deterministic_whatever_the_order(acts: set[Activity], rnd: object) -> None:
    ordered = sorted(acts, key=lambda a: a.value)
    shuffled = list(ordered)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert classify(ordered) == classify(shuffled) == classify(shuffled + shuffled)
    assert classify(ordered).as_dict() == classify(shuffled).as_dict()


@given(subsets)
def test_every_activity_maps_to_a_class_or_a_warning(acts: set[Activity]) -> None:
    result = classify(acts)
    for act in acts:
        has_va = any(act in a.activities for a in result.virtual_agents)
        has_cat = any(act in a.activities for a in result.categories)
        warned = any(act in w.activities for w in result.warnings)
        assert has_va or warned, act
        assert has_cat or warned, act
        assert any(act in d.activities for d in result.directives), act
    if not acts:
        assert [w.code for w in result.warnings] == ["no-activities"]


@given(subsets, subsets)
def test_virtual_agents_are_monotone_in_the_activities(a: set[Activity], b: set[Activity]) -> None:
    small = set(classify(a).virtual_agent_names)
    big = set(classify(a | b).virtual_agent_names)
    assert small <= big
    assert set(classify(a).category_names) <= set(classify(a | b).category_names)


@given(subsets)
def test_virtual_agents_are_the_union_of_the_single_activities(acts: set[Activity]) -> None:
    expected = {va for act in acts for va in EXPECTED[act][0]}
    result = classify(acts)
    assert set(result.virtual_agent_names) == expected
    assert list(result.virtual_agent_names) == [v for v in VIRTUAL_AGENT_NAMES if v in expected]
    assert (result.combination is not None) == (len(expected) > 1)


@given(subsets)
def test_strict_mode_whenever_a_virtual_agent_group_could_overgrant(acts: set[Activity]) -> None:
    result = classify(acts)
    uncovered = [a for a in acts if not EXPECTED[a][0]]
    disqualified = A.STATISTICS in acts and bool(
        acts & {A.ARCHIVE, A.WEB_PROXY, A.LINK, A.SEARCH_INDEX}
    )
    expect_strict = (bool(result.virtual_agents) and bool(uncovered)) or disqualified
    assert (result.recommended_mode == "strict") == expect_strict


@given(subsets)
def test_result_is_json_serialisable(acts: set[Activity]) -> None:
    text = json.dumps(classify(acts).as_dict())
    assert json.loads(text)["activities"] == [a.value for a in Activity if a in acts]


# -- the ambiguous profiles ------------------------------------------------------------------


def codes(*acts: Activity) -> list[str]:
    return [w.code for w in classify(acts).warnings]


def test_statistics_alone_is_a_plain_researcher() -> None:
    result = classify([A.STATISTICS])
    assert result.virtual_agent_names == ("researcher",)
    assert "not-purely-researcher" not in codes(A.STATISTICS)
    assert result.recommended_mode == "precedence"


@pytest.mark.parametrize("other", [A.LINK, A.ARCHIVE, A.WEB_PROXY, A.SEARCH_INDEX])
def test_statistics_with_rehosting_linking_or_search_is_not_researcher(other: Activity) -> None:
    result = classify([A.STATISTICS, other])
    warning = next(w for w in result.warnings if w.code == "not-purely-researcher")
    assert set(warning.activities) == {A.STATISTICS, other}
    assert other.value in warning.message
    assert G_RESEARCHER in warning.sources
    assert result.recommended_mode == "strict"
    # researcher is kept (monotone, more restrictive), never silently dropped
    assert "researcher" in result.virtual_agent_names


def test_statistics_and_linking_keeps_researcher_but_warns() -> None:
    result = classify([A.STATISTICS, A.LINK])
    assert result.virtual_agent_names == ("researcher",)
    warning = next(w for w in result.warnings if w.code == "not-purely-researcher")
    assert "links to content" in warning.message
    assert "no-virtual-agent" in [w.code for w in result.warnings]
    assert result.recommended_mode == "strict"


def test_statistics_with_training_is_still_researcher_but_strict() -> None:
    result = classify([A.STATISTICS, A.TRAIN])
    assert "not-purely-researcher" not in [w.code for w in result.warnings]
    assert result.recommended_mode == "strict"
    assert "train" in result.mode_reason


def test_ai_research_is_not_the_researcher_virtual_agent() -> None:
    result = classify([A.AI_RESEARCH])
    assert result.virtual_agent_names == ()
    assert result.category_names == ("ai-researcher",)
    assert "ai-researcher-is-not-researcher" in [w.code for w in result.warnings]


def test_several_virtual_agents_obey_the_combination() -> None:
    result = classify([A.ARCHIVE, A.SEARCH_INDEX])
    assert result.virtual_agent_names == ("archiver", "indexer")
    assert result.combination is not None
    assert "most restrictive" in result.combination
    assert "every one" in result.combination
    assert result.combination_source == G_COMBINATION
    assert classify([A.ARCHIVE]).combination_source is None
    assert result.recommended_mode == "precedence"


def test_adapting_per_activity_changes_the_combination_rule() -> None:
    result = classify([A.ARCHIVE, A.SEARCH_INDEX], adapts_per_activity=True)
    assert result.combination is not None
    assert result.combination.startswith("adapts per activity")
    assert result.virtual_agent_names == ("archiver", "indexer")


def test_several_categories_warn_about_the_single_identity() -> None:
    result = classify([A.SEARCH_INDEX, A.BULK_COLLECT])
    w = next(w for w in result.warnings if w.code == "several-categories")
    assert "search-indexer" in w.message and "data-harvester" in w.message


def test_web_proxy_warns_about_derivative() -> None:
    result = classify([A.WEB_PROXY])
    assert "derivative" in result.directive_names
    assert "proxy-is-derivative" in [w.code for w in result.warnings]


def test_training_crawler_has_no_virtual_agent_on_gemini() -> None:
    result = classify([A.BULK_COLLECT, A.TRAIN])
    assert result.virtual_agent_names == ()
    w = next(w for w in result.warnings if w.code == "no-virtual-agent")
    assert set(w.activities) == {A.BULK_COLLECT, A.TRAIN}
    assert "`*`" in w.message
    assert result.recommended_mode == "precedence"
    assert "train" in result.directive_names and "store" in result.directive_names


def test_empty_profile_warns() -> None:
    result = classify([])
    assert result.virtual_agent_names == () and result.category_names == ()
    assert [w.code for w in result.warnings] == ["no-activities"]


def test_reasons_name_the_activity_and_the_sentence() -> None:
    result = classify([A.SEARCH_INDEX, A.ARCHIVE])
    archiver, indexer = result.virtual_agents
    assert archiver.reasons[0].activity is A.ARCHIVE and archiver.reasons[0].source == G_ARCHIVER
    assert indexer.reasons[0].source == G_INDEXER
    monitoring = classify([A.UPTIME, A.SEO_AUDIT, A.STATISTICS]).categories
    assert [c.name for c in monitoring] == ["monitoring"]
    assert monitoring[0].activities == (A.STATISTICS, A.UPTIME, A.SEO_AUDIT)


# -- activity names ---------------------------------------------------------------------------


def test_activity_names_are_stable() -> None:
    assert activity_names() == (
        "archive",
        "search-index",
        "statistics",
        "web-proxy",
        "link",
        "bulk-collect",
        "train",
        "summarise",
        "ai-research",
        "generate",
        "code-assist",
        "advertising",
        "uptime",
        "seo-audit",
        "feed-reader",
    )
    for a in Activity:
        assert a.meaning


def test_parse_activities_forgives_case_blanks_and_underscores() -> None:
    assert parse_activities(" Search_Index , statistics,,search-index") == (
        A.SEARCH_INDEX,
        A.STATISTICS,
    )
    with pytest.raises(UnknownActivityError, match=r"unknown activity 'crawl'.*known: archive"):
        parse_activities("crawl")
    with pytest.raises(UnknownActivityError, match="must be a string"):
        parse_activities([3])  # type: ignore[list-item]


# -- every quoted sentence is in its document ---------------------------------------------------


EXCERPTS = Path(__file__).parent / "data" / "spec_excerpts.txt"


def _excerpts() -> dict[str, list[str]]:
    """The shipped sentences of each specification document, by document name."""
    docs: dict[str, list[str]] = {}
    current: list[str] = []
    for line in EXCERPTS.read_text(encoding="utf-8").splitlines():
        if line.startswith("=== "):
            current = docs.setdefault(line[4:], [])
        elif line and not line.startswith("#"):
            current.append(line)
    return docs


def _specs_dir() -> Path | None:
    here = Path(__file__).resolve()
    candidate = here.parents[2].parent / "shared" / "specs"
    return candidate if (candidate / "README.md").is_file() else None


ALL_REFS: list[SpecRef] = [
    G_ARCHIVER,
    G_INDEXER,
    G_RESEARCHER,
    G_WEBPROXY,
    G_COMBINATION,
    G_STAR,
    G_SPIRIT,
    P_MODES,
    P_UNKNOWN,
    R_DECLARE,
    *R_CATEGORY.values(),
    *R_DIRECTIVE.values(),
]


def _fold(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("ref", ALL_REFS, ids=lambda r: r.quote[:30])
def test_quotes_are_verbatim(ref: SpecRef) -> None:
    name = "README.md" if ref.doc.startswith("specs/") else ref.doc
    text = " ".join(_excerpts()[name])
    for part in ref.quote.split(" ... "):
        assert _fold(part) in text, part


def test_shipped_excerpts_are_verbatim_in_the_specifications() -> None:
    specs = _specs_dir()
    if specs is None:
        pytest.skip("the specification documents are not beside this checkout")
    for name, sentences in _excerpts().items():
        text = _fold((specs / name).read_text(encoding="utf-8"))
        for sentence in sentences:
            assert sentence in text, (name, sentence)
