"""No one web client, capsule or stream of host names takes the portal: upstream slots
shared per client and per server address, bounded per-host state, IPv6 clients counted
by their /64. In one trio run with a hostile capsule on loopback (mock clock)."""

from __future__ import annotations

import threading

import trio
import trio.testing
from portal_fixtures import browser
from public_fixtures import hostile_capsule

from geminibot.crawl.politeness import Politeness
from geminibot.gemini.client import Response
from geminibot.net.connect import ConnectRule, parse_connect_to
from geminibot.portal.app import PortalApp
from geminibot.portal.limits import RENDER_THREADS, PortalLimits
from geminibot.portal.pages import HTTPResponse, Pages
from geminibot.portal.proxy import INLINE_RENDER_BYTES
from geminibot.portal.render import Strip
from geminibot.portal.upstream import Slots, Upstream, UpstreamGuard

OPEN = PortalLimits(rate_per_second=1e6, rate_burst=1_000_000, min_host_delay=0.0)


def app_with(rules: list[ConnectRule], limits: PortalLimits = OPEN) -> PortalApp:
    return PortalApp(Upstream(limits, guard=UpstreamGuard(rules, test_range=True)))


async def test_trickling_robots_txt_leave_slots_for_others(
    in_process_clock: trio.testing.MockClock,
) -> None:
    """Eight capsules (one server) whose robots.txt trickles, asked at once by one
    client, hold two slots, not all eight; another client's page comes at once."""
    async with hostile_capsule("127.0.0.2") as slow, hostile_capsule() as normal:
        rules = [parse_connect_to(f"trickle{i}.test:1965:127.0.0.2:{slow.port}") for i in range(8)]
        rules.append(parse_connect_to(f"evil.test:1965:127.0.0.1:{normal.port}"))
        app = app_with(rules)
        statuses: list[int] = []

        async def attack(i: int) -> None:
            statuses.append((await attacker.get(f"/gemini/trickle{i}.test/")).status_code)

        async with (
            browser(app, "127.0.0.9") as attacker,
            browser(app) as user,
            trio.open_nursery() as nursery,
        ):
            for i in range(8):
                nursery.start_soon(attack, i)
            await trio.sleep(1.0)  # every attack holds or waits for a slot
            ok = await user.get("/gemini/evil.test/small")
            trickling = len(slow.requests)
    assert ok.status_code == 200
    assert trickling == 2  # the client's share, not every slot
    assert set(statuses) <= {403, 503}  # unreachable robots.txt (refused), or no slot
    assert len(statuses) == 8


async def test_slots_per_client_edge() -> None:
    slots = Slots(total=8, per_client=2, per_address=8)
    now = trio.current_time()
    async with (
        slots.hold("a", "10.0.0.1", now) as first,
        slots.hold("a", "10.0.0.2", now) as second,
        slots.hold("a", "10.0.0.3", now) as third,
        slots.hold("b", "10.0.0.3", now) as other,
    ):
        assert (first, second, other) == (None, None, None)
        assert third == "this portal already asks 2 pages for you at once"
    assert len(slots) == 0  # nothing kept once released


async def test_slots_per_address_and_total_edge() -> None:
    slots = Slots(total=3, per_client=8, per_address=2)
    now = trio.current_time()
    async with (
        slots.hold("a", "10.0.0.1", now) as first,
        slots.hold("b", "10.0.0.1", now) as second,
        slots.hold("c", "10.0.0.1", now) as third,
        slots.hold("c", "10.0.0.2", now) as fourth,
        slots.hold("d", "10.0.0.3", now) as fifth,
    ):
        assert (first, second, fourth) == (None, None, None)
        assert third == "this portal already asks that server for 2 pages at once"
        assert fifth == "all the portal's upstream slots are busy"


async def test_a_waiting_request_gets_the_slot_freed(
    in_process_clock: trio.testing.MockClock,
) -> None:
    slots = Slots(total=1, per_client=1, per_address=1)
    got: list[str | None] = []

    async def wait_for_it() -> None:
        async with slots.hold("a", "10.0.0.1", trio.current_time() + 10) as why:
            got.append(why)

    async with (
        trio.open_nursery() as nursery,
        slots.hold("a", "10.0.0.1", trio.current_time()) as why,
    ):
        assert why is None
        nursery.start_soon(wait_for_it)
        await trio.sleep(5)
    assert got == [None]


async def test_per_host_state_is_bounded(in_process_clock: trio.testing.MockClock) -> None:
    """Requests for many distinct refused hosts leave at most the limits' worth of state."""
    async with hostile_capsule() as evil:
        limits = PortalLimits(
            rate_per_second=1e6,
            rate_burst=1_000_000,
            min_host_delay=0.0,
            paced_hosts=10,
            policy_cache_hosts=10,
        )
        app = app_with([parse_connect_to(f"*.test:1965:127.0.0.1:{evil.port}")], limits)
        async with browser(app) as web:
            statuses = {(await web.get(f"/gemini/mute{i}.test/")).status_code for i in range(30)}
    up = app.upstream
    assert statuses == {403}  # robots.txt unreachable: everything disallowed
    assert (len(up.pace), len(up.policies)) == (10, 10)
    assert (len(up._policy_locks), len(up._host_locks), len(up._routes), len(up.slots)) == (
        0,
        0,
        0,
        0,
    )


def test_politeness_forgets_the_least_recently_used_idle_host() -> None:
    for max_hosts, kept in ((3, True), (2, False)):
        pace = Politeness(lambda: 0.0, max_hosts=max_hosts)
        pace.start("a")
        pace.finish("a", 1.0, 44)  # a's back-off: state worth keeping
        pace.start("b")  # in flight: never forgotten
        pace.state("c")
        assert pace.in_flight("b")
        assert (pace.state("a")[3] == 1) is kept
        assert len(pace) == min(max_hosts, 3)


async def test_a_page_asked_for_at_once_is_fetched_once(
    in_process_clock: trio.testing.MockClock,
) -> None:
    async with hostile_capsule() as evil:
        app = app_with([parse_connect_to(f"*.test:1965:127.0.0.1:{evil.port}")])
        statuses: list[int] = []

        async def ask() -> None:
            statuses.append((await web.get("/gemini/evil.test/small")).status_code)

        async with browser(app) as web, trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(ask)
    assert statuses == [200] * 5
    assert evil.requests.count(("evil.test", "/small")) == 1
    assert app.proxy._fetching == {}


class RecordingPages(Pages):
    """The portal's pages, noting where each Gemini response was rendered."""

    def __init__(self, limits: PortalLimits) -> None:
        super().__init__(limits)
        self.on_loop: list[bool] = []
        self.rendering = 0
        self.most = 0
        self._lock = threading.Lock()

    def response(self, response: Response, strip: Strip) -> HTTPResponse:
        with self._lock:
            self.rendering += 1
            self.most = max(self.most, self.rendering)
        self.on_loop.append(threading.current_thread() is threading.main_thread())
        try:
            return super().response(response, strip)
        finally:
            with self._lock:
                self.rendering -= 1


async def test_inline_render_bytes_edge_and_render_threads() -> None:
    """A body of INLINE_RENDER_BYTES is rendered on the event loop, a byte more in a
    worker thread, at most RENDER_THREADS at a time."""
    async with hostile_capsule() as evil:
        app = app_with([parse_connect_to(f"*.test:1965:127.0.0.1:{evil.port}")])
        pages = app.pages = app.proxy.pages = RecordingPages(app.limits)
        async with browser(app) as web:
            for size in (INLINE_RENDER_BYTES, INLINE_RENDER_BYTES + 1):
                assert (await web.get(f"/gemini/evil.test/bytes/{size}")).status_code == 200
            assert pages.on_loop == [True, False]
            async with trio.open_nursery() as nursery:
                for i in range(4):
                    nursery.start_soon(web.get, f"/gemini/evil.test/bytes/{10**6 + i}")
    assert pages.on_loop == [True, False] + [False] * 4
    assert pages.most == RENDER_THREADS == 1
