"""The redirect policy, without I/O (in the manner of httpx's ``_build_redirect_request``),
and :func:`follow_chain`, the one loop that applies it around a client's requests.

Given the URL that answered with a redirect, its target (Gemini's meta, HTTP's
``Location``) and the URLs already redirected from in this fetch, :func:`next_hop`
returns the URL to request next, ``None`` when the redirect is to be handed back to the
caller unfollowed, or raises a typed :class:`~geminibot.net.errors.FetchError`. The
Gemini client, the web client and the crawler's policy-file fetches all decide here;
they only do the I/O.

The checks, in order:

1. no target (an HTTP 3xx without ``Location``): handed back;
2. the target, resolved against the current URL, of a scheme not in
   :attr:`RedirectRules.schemes`: handed back when ``switch_schemes``, else
   :class:`~geminibot.net.errors.SchemeSwitchRefused`;
3. a target that is not a valid URL, or longer than ``max_url_bytes`` (Gemini's
   1024-byte request limit): :class:`~geminibot.net.errors.InvalidRedirect`;
4. another origin when ``same_origin``: :class:`~geminibot.net.errors.OffSiteRedirect`;
5. a URL already visited in this fetch: :class:`~geminibot.net.errors.RedirectLoop`
   (refused as soon as the loop closes);
6. ``max_redirects`` hops already followed: :class:`~geminibot.net.errors.TooManyRedirects`
   (so exactly ``max_redirects`` redirects are followed, and the next one is refused).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from geminibot.net.errors import (
    InvalidRedirect,
    OffSiteRedirect,
    RedirectLoop,
    SchemeSwitchRefused,
    TooManyRedirects,
)
from geminibot.net.limits import MAX_REDIRECTS
from geminibot.urls import URL, InvalidURL, parse_url, resolve_reference

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class RedirectRules:
    """Which redirects a fetch follows: the schemes, the hops, the origin and the URL length."""

    schemes: tuple[str, ...]
    """The URL schemes a redirect may lead to (``("gemini",)``, ``("http", "https")``)."""
    max_redirects: int = MAX_REDIRECTS
    switch_schemes: bool = False
    """A redirect to another scheme is handed back unfollowed instead of refused."""
    same_origin: bool = False
    """Follow redirects on the same scheme, host and port only."""
    max_url_bytes: int | None = None
    """Longest URL that can be requested, or None for no limit."""


def next_hop(
    current: URL, location: str | None, followed: Sequence[URL], rules: RedirectRules
) -> URL | None:
    """The URL to request after ``current`` redirected to ``location``; ``followed``
    holds the URLs that redirected before ``current`` in this fetch (its length is the
    number of hops already taken). See the module docstring for the checks."""
    if not location or not location.strip():
        return None
    target = resolve_reference(str(current), location.strip())
    if target.partition(":")[0].lower() not in rules.schemes:
        if rules.switch_schemes:
            return None
        raise SchemeSwitchRefused(f"{current} redirects to another scheme: {target}")
    try:
        url = parse_url(target, rules.schemes)
    except InvalidURL as exc:
        raise InvalidRedirect(f"{current} redirects to an invalid URL: {exc}") from None
    size = len(str(url))  # normalised URLs are ASCII: characters are bytes
    if rules.max_url_bytes is not None and size > rules.max_url_bytes:
        raise InvalidRedirect(
            f"{current} redirects to a URL of {size} bytes, the limit is {rules.max_url_bytes}"
        )
    if rules.same_origin and url.origin != current.origin:
        raise OffSiteRedirect(f"{current} redirects to another host: {url}")
    if url == current or url in followed:
        raise RedirectLoop(f"redirect loop: {current} leads back to {url}")
    if len(followed) >= rules.max_redirects:
        raise TooManyRedirects(f"more than {rules.max_redirects} redirects, last to {url}")
    return url


async def follow_chain(
    first: URL,
    exchange: Callable[[URL, tuple[URL, ...]], Awaitable[R]],
    location: Callable[[R], str | None],
    rules: RedirectRules | None,
) -> R:
    """Drive one fetch through its redirects; the I/O is the caller's.

    ``exchange(url, followed)`` makes one request (``followed``: the URLs that redirected
    before it) and returns its response; ``location(response)`` is the redirect target
    of a response, or None when it is not a redirect. Each target goes through
    :func:`next_hop`; the last response is returned (a redirect ``next_hop`` hands back,
    included). With ``rules`` None, no redirect is followed."""
    followed: list[URL] = []
    current = first
    while True:
        response = await exchange(current, tuple(followed))
        target = location(response)
        if rules is None or target is None:
            return response
        hop = next_hop(current, target, followed, rules)
        if hop is None:
            return response
        followed.append(current)
        current = hop
