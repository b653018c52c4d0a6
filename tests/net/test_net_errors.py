"""One fetch-error tree: the shared classes once, the Gemini ones below them, bad URLs
apart (ValueError, as httpx's InvalidURL)."""

from __future__ import annotations

import inspect

from geminibot.gemini import errors as gemini_errors
from geminibot.net import errors as net_errors
from geminibot.urls import InvalidURL


def classes(module: object) -> dict[str, type]:
    return {
        name: value
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and issubclass(value, Exception)
        and value.__module__ == getattr(module, "__name__", "")
    }


def test_every_shared_class_is_a_fetch_error() -> None:
    shared = classes(net_errors)
    assert len(shared) >= 16
    assert all(issubclass(c, net_errors.FetchError) for c in shared.values())
    assert not issubclass(net_errors.FetchError, ValueError)


def test_gemini_errors_repeat_no_shared_name_and_sit_in_the_tree() -> None:
    own = classes(gemini_errors)
    assert own and not set(own) & set(classes(net_errors))
    for error in own.values():
        assert issubclass(error, net_errors.FetchError | InvalidURL), error
    assert issubclass(gemini_errors.HeaderTooLong, net_errors.RemoteProtocolError)
    assert issubclass(gemini_errors.RequestTooLong, InvalidURL)


def test_bad_urls_are_value_errors_not_fetch_errors() -> None:
    assert issubclass(InvalidURL, ValueError)
    assert not issubclass(InvalidURL, net_errors.FetchError)


def test_branches() -> None:
    e = net_errors
    assert issubclass(e.InvalidRedirect, e.RemoteProtocolError)
    assert issubclass(e.TooManyRedirects, e.LimitExceeded)
    assert issubclass(e.OffSiteRedirect, e.RedirectRefused)
    for timeout in (e.ConnectTimeout, e.HeaderTimeout, e.IdleTimeout, e.DeadlineExceeded):
        assert issubclass(timeout, e.FetchTimeout) and issubclass(timeout, e.TransportError)
