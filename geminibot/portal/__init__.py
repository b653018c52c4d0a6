"""``geminibot portal``: Gemini capsules for web browsers, obeying ``webproxy`` rules.

- :mod:`geminibot.portal.limits`: every limit the portal applies, named, and the per-client
  request-rate buckets (pure, clock injected);
- :mod:`geminibot.portal.render`: text/gemini as HTML within a budget, and the page
  frame (pure);
- :mod:`geminibot.portal.pages`: where a request path leads, and every answer as an HTTP
  response: Gemini pages, refusals, failures (pure);
- :mod:`geminibot.portal.cache`: the page cache of rendered answers (pure);
- :mod:`geminibot.portal.upstream`: the Gemini side: address guard, per-host pacing and
  ``44`` back-off, upstream slots shared per client and per server, the policy cache,
  redirects;
- :mod:`geminibot.portal.proxy`: a Gemini page shown: the rules asked, fetched once for all
  who ask at once, rendered, cached;
- :mod:`geminibot.portal.app`: the ASGI application;
- :mod:`geminibot.portal.server`: the HTTP/1.1 server (h11 on trio) that serves it, and
  :mod:`geminibot.portal.connections`, its table of open connections (pure);
- :mod:`geminibot.portal.cli`: the ``portal`` subcommand.

docs/portal.md explains the behaviour and the choices.
"""
