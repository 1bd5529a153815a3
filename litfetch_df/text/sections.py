"""Normalised section types from ``sec-type`` attributes and titles."""

from __future__ import annotations

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
    for text in (sec_type.replace("|", " ").replace("-", " "), title):
        if not text:
            continue
        for kind, pattern in _RULES:
            if pattern.search(text):
                return kind
    return "other"
