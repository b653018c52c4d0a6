"""The census of Geminispace: figures computed once from a crawl store (:mod:`.figures`,
:mod:`.policies`, :mod:`.host`), rendered as text, JSON or gemtext (:mod:`.render`), kept
as history (:mod:`.history`); the ``census`` command (:mod:`.cli`)."""
