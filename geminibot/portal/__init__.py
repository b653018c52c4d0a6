"""``geminibot portal``: Gemini capsules for web browsers, obeying ``webproxy`` rules.

- :mod:`geminibot.portal.limits`: every limit the portal applies, named, and the per-client
  request-rate buckets (pure, clock injected);
- :mod:`geminibot.portal.render`: text/gemini and the portal's own pages as HTML (pure);
- :mod:`geminibot.portal.upstream`: the Gemini side: address guard, per-host pacing and
  ``44`` back-off, the policy cache, the page cache, redirects;
- :mod:`geminibot.portal.app`: the ASGI application (served by hypercorn on trio);
- :mod:`geminibot.portal.cli`: the ``portal`` subcommand.

docs/portal.md explains the behaviour and the choices.
"""
