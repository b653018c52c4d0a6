"""What the Gemini and web clients and the crawler share, none of it doing I/O: the
fetch-error tree (:mod:`.errors`), the limits of a fetch (:mod:`.limits`), where to
connect for a host (:mod:`.connect`), which addresses may be reached (:mod:`.guard`) and the redirect policy (:mod:`.redirects`).
URLs themselves are :mod:`geminibot.urls`."""
