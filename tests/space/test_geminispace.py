"""The synthetic Geminispace's generator: deterministic, sized as asked, every trap and
policy file in place, and a day parameter that changes exactly the pages it says."""

from __future__ import annotations

import datetime as dt

import pytest
from geminispace import Space
from geminispace.gemlog import GEMLOG_EVERY, INDEX, START
from geminispace.space import BEHAVIOURS, FIXED_PATHS, MAX_HOST_URLS, ROBOTS_KINDS

from geminibot.feeds.parse import read_feed
from geminibot.policy.agents_txt import parse_agents
from geminibot.policy.robots2 import parse_robots2
from geminibot.policy.robots_parse import parse_robots

#: A fetch time three days after the default start (entries dated after it are skipped).
NOON_OF_DAY_3 = dt.datetime.combine(START + dt.timedelta(days=3), dt.time(12), dt.UTC).timestamp()


def test_same_seed_same_space_other_seed_other_pages() -> None:
    a, b, c = Space(30, 2000), Space(30, 2000), Space(30, 2000, seed=7)
    for i in (0, 5, 29):
        for path in a.paths(i)[:40]:
            assert a.respond(a.host(i), path) == b.respond(b.host(i), path)
    assert a.tree_page(0, 3) != c.tree_page(0, 3)
    assert a.queries() == b.queries()


@pytest.mark.parametrize(("hosts", "urls"), [(12, 300), (147, 20_000), (4400, 600_000)])
def test_sizes_add_up_and_follow_a_power_law(hosts: int, urls: int) -> None:
    space = Space(hosts, urls)
    sizes = [space.pages_of(i) for i in range(hosts)]
    assert sum(sizes) == urls
    assert len(space.paths(hosts - 1)) == sizes[-1]
    assert max(sizes) <= MAX_HOST_URLS + len(FIXED_PATHS) + 1
    assert sizes[0] >= sizes[hosts // 2] >= sizes[-1] >= len(FIXED_PATHS) + 1


def test_too_small_a_space_is_refused() -> None:
    with pytest.raises(ValueError, match="too few"):
        Space(10, 20)
    with pytest.raises(ValueError, match="at least one host"):
        Space(0, 100)


def test_every_behaviour_and_policy_kind_in_a_few_hosts() -> None:
    space = Space(12, 300)
    assert {space.behaviour(i) for i in range(12)} == set(BEHAVIOURS)
    assert {space.robots_kind(i) for i in range(12)} == set(ROBOTS_KINDS)


def test_unknown_hosts_and_paths() -> None:
    space = Space(12, 300)
    assert space.index_of("h0012.space.test") is None
    assert space.index_of("h12.space.test") is None
    assert space.index_of("h0003.example.org") is None
    assert space.respond("h9999.space.test", "/").status == 53
    assert space.respond(space.host(0), "/p/99999.gmi").status == 51
    assert space.respond(space.host(0), "/p/007.gmi").status == 51  # one spelling per page
    assert space.respond(space.host(0), "/maze/").status == 51  # host 0 is no maze


def test_policy_files_refuse_private_to_the_indexer() -> None:
    space = Space(12, 300)
    for i in range(12):
        kind = space.robots_kind(i)
        robots = space.respond(space.host(i), "/robots.txt")
        if kind == "none":
            assert robots.status == 51
            continue
        assert robots.status == 20
        parsed = parse_robots(robots.body)
        private, public = "/private/secret.gmi", "/p/0.gmi"
        refused_by_robots = kind in ("plain", "virtual-agents", "v2")
        assert parsed.allowed(private, "geminibot", ("indexer",)) is not refused_by_robots
        assert parsed.allowed(public, "geminibot", ("indexer",))
        if kind == "agents":
            agents = parse_agents(space.respond(space.host(i), "/agents.txt").body)
            assert agents.valid
            assert not agents.decide(private).allowed
            assert agents.decide(public).allowed
        if kind == "robots2":
            robots2 = parse_robots2(space.respond(space.host(i), "/robots2.txt").body)
            assert not robots2.robots().allowed(private, "geminibot", ("indexer",))


def test_traps_are_endless() -> None:
    space = Space(12, 300)
    maze = next(i for i in range(12) if space.behaviour(i) == "maze")
    path = "/maze/"
    for _ in range(50):
        answer = space.respond(space.host(maze), path)
        assert answer.status == 20
        path = answer.body.decode().split("=> ")[1].split()[0]
    assert path.count("/") == 52
    calendar = next(i for i in range(12) if space.behaviour(i) == "calendar")
    page = space.respond(space.host(calendar), "/calendar/2026/12").body.decode()
    assert "=> /calendar/2027/1 next month" in page
    assert space.respond(space.host(calendar), "/calendar/9999/12").status == 20
    assert space.respond(space.host(calendar), "/calendar/2026/13").status == 51


def test_same_body_several_urls_and_non_text() -> None:
    space = Space(12, 300)
    host = space.host(2)
    bodies = {space.respond(host, p).body for p in FIXED_PATHS if p.startswith("/dup/")}
    assert len(bodies) == 1
    assert space.respond(host, "/files/photo.png").meta == "image/png"
    assert space.respond(host, "/files/data.bin").meta == "application/octet-stream"


def test_slow_vanishing_and_gone_hosts() -> None:
    space = Space(12, 300, slow_seconds=0.25)
    kinds = {space.behaviour(i): i for i in range(12)}
    assert space.respond(space.host(kinds["slow"]), "/").delay == 0.25
    assert space.respond(space.host(kinds["normal"]), "/").delay == 0.0
    assert space.answers(kinds["vanishes"], 0) and not space.answers(kinds["vanishes"], 1)
    assert not space.answers(kinds["gone"], 0)
    assert f"gemini://{space.host(kinds['gone'])}/" not in space.seeds()


def test_a_day_changes_the_fraction_it_says() -> None:
    """About 2,700 tree pages: at a rate of 0.1 the bounds below are some 3.6 standard
    deviations wide either way (the space is seeded: the same fraction every run)."""
    space = Space(40, 3000, change_rate=0.1)
    pages = [(i, j) for i in range(40) for j in range(space.tree_size(i))]
    changed = 0
    for i, j in pages:
        before, after = space.tree_page(i, j, 0), space.tree_page(i, j, 1)
        assert (before != after) == space.changed(i, j, 1)
        changed += before != after
    assert 0.08 < changed / len(pages) < 0.12
    assert space.tree_page(3, 4, 0) == space.tree_page(3, 4, 0)
    assert space.home(3) == space.home(3)


def test_planted_queries_have_their_answers() -> None:
    space = Space(147, 20_000)
    queries = space.queries()
    assert {q.kind for q in queries} == {"topic", "anchor", "spam"}
    for q in queries:
        for url in q.relevant:
            host, path = url.removeprefix("gemini://").split("/", 1)
            page = space.respond(host, "/" + path).body.decode()
            if q.kind == "anchor":  # the answer never says the word: links to it do
                assert q.text not in page
            else:
                assert page.startswith(f"# {q.text.capitalize()}")


def test_a_small_space_plants_nothing_rather_than_crowd_itself() -> None:
    assert Space(12, 300).queries() == []
    assert Space(12, 300).plants == {}


def test_gemlogs_are_gemsub_feeds_of_their_posts() -> None:
    """One host in ten keeps a gemlog, linked from its home page; its index is a gemsub
    feed (read by the crawl's own reader) listing every post, newest first, each post a
    page that says a word no other page of the space says."""
    space = Space(40, 3000)
    blogs = [i for i in range(space.hosts) if space.gemlogs.has(i)]
    assert len(blogs) == space.hosts // GEMLOG_EVERY
    assert {space.behaviour(i) for i in blogs} == {"normal"}
    words = {space.gemlogs.word(i, n) for i in blogs for n in range(space.gemlogs.posts(i, 3))}
    assert len(words) == sum(space.gemlogs.posts(i, 3) for i in blogs)
    assert not words & set(space.vocabulary)
    for i in range(space.hosts):
        host = space.host(i)
        index = space.respond(host, INDEX)
        if i not in blogs:
            assert index.status == 51 and INDEX not in space.home(i)
            continue
        assert f"=> {INDEX} " in space.home(i)
        url = f"gemini://{host}{INDEX}"
        feed = read_feed(url, index.meta, index.body, NOON_OF_DAY_3)
        assert feed is not None and feed.format == "gemsub"
        assert feed.title == index.body.decode().splitlines()[0].removeprefix("# ")
        posts = space.gemlogs.posts(i, 0)
        assert [e.url for e in feed.entries] == [f"{url}{n}.gmi" for n in reversed(range(posts))]
        dates = [dt.datetime.fromtimestamp(e.published, dt.UTC).date() for e in feed.entries]
        assert dates == sorted(dates, reverse=True) and dates[0] < START
        for n, entry in zip(reversed(range(posts)), feed.entries, strict=True):
            post = space.respond(host, f"{INDEX}{n}.gmi").body.decode()
            assert post.startswith(f"# {entry.title}\n") and space.gemlogs.word(i, n) in post
            assert sum(w in post for w in words) == 1
        assert space.respond(host, f"{INDEX}{posts}.gmi").status == 51  # not yet written
        assert space.respond(host, f"{INDEX}01.gmi").status == 51  # one spelling per post


def test_a_day_adds_posts_to_some_gemlogs_and_changes_only_their_index() -> None:
    space = Space(40, 3000)
    blogs = [i for i in range(space.hosts) if space.gemlogs.has(i)]
    posted = 0
    for i in blogs:
        host = space.host(i)
        for day in range(1, 8):
            before, after = (space.respond(host, INDEX, d).body for d in (day - 1, day))
            new = space.gemlogs.posted(i, day)
            posted += new
            assert (before != after) == new == space.changed_on(i, INDEX, day)
            assert space.gemlogs.posts(i, day) == space.gemlogs.posts(i, day - 1) + new
            if new:
                n = space.gemlogs.posts(i, day) - 1
                path = f"{INDEX}{n}.gmi"
                assert space.respond(host, path, day - 1).status == 51
                assert space.respond(host, path, day).status == 20
                assert space.gemlogs.date(i, n) == START + dt.timedelta(days=day)
                assert f"=> {n}.gmi {space.gemlogs.date(i, n).isoformat()} " in after.decode()
            first = space.respond(host, f"{INDEX}0.gmi", day).body
            assert first == space.respond(host, f"{INDEX}0.gmi", 0).body  # posts stay
        assert space.revision_of(i, INDEX, 7) == space.gemlogs.posts(i, 7) - space.gemlogs.posts(
            i, 0
        )
        assert not space.changed_on(i, "/", 1) and space.revision_of(i, "/", 7) == 0
    assert 0 < posted < len(blogs) * 7


def test_a_later_start_dates_the_posts_later() -> None:
    """The space's ``start`` is the date of day 0 (a benchmark sets it so that day 1's
    posts are today's); nothing but the dates moves."""
    later = START + dt.timedelta(days=30)
    a, b = Space(12, 300), Space(12, 300, start=later)
    i = next(i for i in range(12) if a.gemlogs.has(i))
    for n in (0, a.gemlogs.backlog(i)):  # a post of day 0's backlog, the first after it
        assert b.gemlogs.date(i, n) - a.gemlogs.date(i, n) == dt.timedelta(days=30)
    assert a.tree_page(i, 0) == b.tree_page(i, 0) and a.home(i) == b.home(i)
