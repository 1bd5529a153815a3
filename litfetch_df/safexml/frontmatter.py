"""Read only the front matter of an untrusted XML document.

A licence, an open-access flag and an article's identifiers sit in the first
few kilobytes of a JATS, BITS or Elsevier document (``<front>``,
``<book-part-meta>``, ``<coredata>``); the body after them is most of the
bytes. :func:`read_front_matter` cuts the document just after that metadata,
closes the elements still open there, and parses only that prefix, through
:func:`litfetch_df.safexml.parse.parse_xml` (so every safeguard of the full parse
applies: no external entities, no DTD loading, no entity expansion, entity
declarations refused).

The cut is found by bytes. A false match (the end tag's text inside a
comment or a CDATA section) leaves a prefix that does not parse, and a
document whose shape is not the expected one (a prefixed root, metadata
nested elsewhere) gives no prefix at all: either way the whole document is
parsed instead, so the cut can cost time but never change the answer.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from lxml import etree

from .parse import XmlError, parse_xml, root_name

__all__ = ["FrontMatter", "read_front_matter"]

# Root element → (the end tag that closes its metadata, the elements still open
# there, innermost first).
_CUTS: Final[dict[str, tuple[bytes, tuple[str, ...]]]] = {
    "article": (b"</front>", ("article",)),
    "book-part-wrapper": (b"</book-part-meta>", ("book-part", "book-part-wrapper")),
    "book": (b"</book-meta>", ("book",)),
    "full-text-retrieval-response": (b"</coredata>", ("full-text-retrieval-response",)),
}


@dataclasses.dataclass(frozen=True, slots=True)
class FrontMatter:
    """The tree :func:`read_front_matter` built.

    ``root`` holds the document from its start through the end of the front
    matter; ``complete`` says whether it is the whole document (no cut was
    possible, so nothing was skipped).
    """

    root: etree._Element
    complete: bool


def read_front_matter(content: bytes) -> FrontMatter:
    """Parse ``content`` up to the end of its front matter.

    Cuts after the first ``</front>`` of a JATS ``<article>``, the first
    ``</book-part-meta>`` of a BITS ``<book-part-wrapper>``, the first
    ``</book-meta>`` of a BITS ``<book>``, or the first ``</coredata>`` of an
    Elsevier answer; any other document, or one whose prefix does not parse,
    is parsed whole. Raises :class:`~litfetch_df.safexml.parse.XmlError` as
    :func:`~litfetch_df.safexml.parse.parse_xml` does. Bytes after the cut are not
    read: a fault there does not make the front matter unreadable.
    """
    prefix = _prefix(content)
    if prefix is not None:
        try:
            return FrontMatter(parse_xml(prefix), complete=False)
        except XmlError:
            pass  # a false cut, or a fault in the front matter itself: the whole parse decides
    return FrontMatter(parse_xml(content), complete=True)


def _prefix(content: bytes) -> bytes | None:
    cut = _CUTS.get(root_name(content) or "")
    if cut is None:
        return None
    end_tag, still_open = cut
    at = content.find(end_tag)
    if at < 0:
        return None
    closing = b"".join(b"</" + name.encode() + b">" for name in still_open)
    return content[: at + len(end_tag)] + closing
