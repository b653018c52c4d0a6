"""A page's language: its MIME type's ``lang`` parameter, else detected from its text; and
the Snowball stemmer tantivy ships for it.

Detection uses py3langid (langid.py's model, bundled with the package: nothing is
downloaded), loaded once per process on first use (about 2 s) and only when an index is
built, never for a search. A text shorter than :data:`MIN_DETECT_CHARS`, or detected
with a probability under :data:`MIN_PROBABILITY`, has no language (``None``): its words
are indexed unstemmed only. Languages are ISO 639-1 codes (``de``), lower case, the
primary subtag of a MIME ``lang`` (``de-CH`` -> ``de``).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

#: Languages with a Snowball stemmer in tantivy, by ISO 639-1 code.
STEMMERS = {
    "ar": "arabic",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "en": "english",
    "es": "spanish",
    "fi": "finnish",
    "fr": "french",
    "hu": "hungarian",
    "it": "italian",
    "nb": "norwegian",
    "nl": "dutch",
    "nn": "norwegian",
    "no": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
}
#: Shortest text whose language is detected (characters): a line or two says too little.
MIN_DETECT_CHARS = 200
#: Characters of a page's text the detector reads (its start): enough to tell, and it
#: bounds the cost per page (about 0.5 ms here).
DETECT_CHARS = 1_000
#: Lowest probability of the detected language that is believed.
MIN_PROBABILITY = 0.9
_TAG = re.compile(r"[a-z]{2,3}")


def primary(tag: str | None) -> str | None:
    """The primary language subtag of a language tag, lower case (``de-CH`` -> ``de``);
    None when ``tag`` is empty or not a language tag."""
    if not tag:
        return None
    code = tag.strip().lower().replace("_", "-").split("-", 1)[0]
    return code if _TAG.fullmatch(code) else None


@cache
def _identifier() -> Any:
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_modelpath(MODEL_DIR / MODEL_FILE, norm_probs=True)


def detect(text: str) -> str | None:
    """The language of ``text`` (see the module docstring), or None."""
    sample = text[:DETECT_CHARS]
    if len(sample) < MIN_DETECT_CHARS:
        return None
    code, probability = _identifier().classify(sample)
    return primary(str(code)) if float(probability) >= MIN_PROBABILITY else None


def page_language(mime_lang: str | None, text: str) -> str | None:
    """A page's language: the first of its MIME ``lang`` parameter's codes (it may list
    several: ``en,fr``), else :func:`detect` of its text."""
    if mime_lang:
        code = primary(mime_lang.split(",", 1)[0])
        if code is not None:
            return code
    return detect(text)
