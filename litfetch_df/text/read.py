"""The entry point: body bytes or a :class:`~litfetch_df.files.Blob` → :class:`Document`."""

from __future__ import annotations

from ..files import Blob
from ..safexml.parse import XmlError, local_name, parse_xml
from .elsevier import read_elsevier
from .jats import read_jats
from .model import Document

__all__ = ["MATH_MODES", "read_text"]

MATH_MODES = ("tex", "placeholder")
"""Values of ``math=``: TeX where present else MathML text, or always a placeholder."""

_JATS_ROOTS = frozenset({"article", "book", "book-part", "book-part-wrapper", "chapter"})
_ELSEVIER_ROOTS = frozenset(
    {"doc", "full-text-retrieval-response", "simple-article", "converted-article"}
)


def read_text(body: bytes | Blob, *, math: str = "tex") -> Document:
    """Read one body into a :class:`Document`; never raises for a bad body.

    A body that is not XML (a PDF), is unsafe (declares entities) or is not a known
    format comes back as a ``Document`` with only ``text_error`` set.
    """
    if math not in MATH_MODES:
        raise ValueError(f"math must be one of {MATH_MODES}, not {math!r}")
    content = body.content if isinstance(body, Blob) else body
    if content[:5] == b"%PDF-":
        return Document(text_error="not a text format: PDF")
    try:
        root = parse_xml(content)
    except XmlError as exc:
        return Document(text_error=str(exc))
    name = local_name(root)
    ns = root.tag.split("}", 1)[0] if isinstance(root.tag, str) and root.tag.startswith("{") else ""
    if name in _ELSEVIER_ROOTS or "elsevier.com" in ns:
        return read_elsevier(root, math=math)
    if name in _JATS_ROOTS:
        return read_jats(root, math=math)
    return Document(text_error=f"not a known text format: root <{name}>")
