"""Normalised section types from ``sec-type`` attributes and titles."""

from __future__ import annotations

import functools
import re

__all__ = ["SECTION_TYPES", "section_type"]

# Order matters: the first pattern that matches a title wins ("materials and methods" is methods).
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (
        (
            "data availability",
            r"data (availability|accessibility|sharing)|availability of (data|supporting)",
        ),
        (
            "competing interests",
            r"competing|conflicts? of interest|declaration of interest|disclosure",
        ),
        ("author contributions", r"author'?s'? contributions?|contributions"),
        ("acknowledgements", r"acknowledge?ments?"),
        ("funding", r"funding|financial support|grant"),
        ("supplementary", r"supplementary|supporting information|additional (data )?files?"),
        ("abbreviations", r"abbreviations"),
        ("introduction", r"introduction|background"),
        (
            "methods",
            r"methods?|materials|experimental( procedures| section)?|methodology|procedures",
        ),
        ("results", r"results"),
        ("discussion", r"discussion"),
        ("conclusions", r"conclusions?|concluding|summary"),
    )
)

SECTION_TYPES: tuple[str, ...] = (*tuple(k for k, _ in _RULES), "other")
"""Every value :func:`section_type` can return."""


def section_type(sec_type: str, title: str) -> str:
    """Map a ``sec-type`` attribute (first) or a title to one of :data:`SECTION_TYPES`."""
    if sec_type:
        kind = _matching(sec_type.replace("|", " ").replace("-", " "))
        if kind:
            return kind
    return (_matching(title) if title else "") or "other"


@functools.lru_cache(maxsize=1024)
def _matching(text: str) -> str:
    """The first rule matching ``text`` (``""``: none), memoised: a corpus repeats the
    same few hundred titles and ``sec-type`` values, each tried against twelve patterns."""
    for kind, pattern in _RULES:
        if pattern.search(text):
            return kind
    return ""
