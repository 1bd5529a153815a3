"""Full text as text: bodies (JATS, BITS, Elsevier XML) read into frozen :class:`Document` values.

Needs no pandas; the frame face (``df.lit.text()``) builds on it.
"""

from __future__ import annotations

from .model import (
    Abstract,
    Caption,
    Citation,
    Document,
    Formula,
    Paragraph,
    Reference,
    Section,
    Statement,
    TextLoss,
)
from .read import MATH_MODES, read_text
from .sections import SECTION_TYPES, section_type

__all__ = [
    "MATH_MODES",
    "SECTION_TYPES",
    "Abstract",
    "Caption",
    "Citation",
    "Document",
    "Formula",
    "Paragraph",
    "Reference",
    "Section",
    "Statement",
    "TextLoss",
    "read_text",
    "section_type",
]
