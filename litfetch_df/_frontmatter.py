"""Read only the front matter of an untrusted XML document.

A licence, an open-access flag and an article's identifiers sit in the first
few kilobytes of a JATS, BITS or Elsevier document (``<front>``,
``<book-part-meta>``, ``<coredata>``); the body after them is most of the
bytes. :func:`read_front_matter` builds the tree incrementally and stops as
soon as that metadata is complete, so the rest is never parsed.

The parser is configured as :func:`litfetch_df._xml.parse_xml`'s: no external
entities, no DTD loading, no network, no entity expansion, no huge-tree mode,
and a document whose DTD declares entities is refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from lxml import etree

from ._xml import XmlError, local_name

__all__ = ["FrontMatter", "read_front_matter"]

# Where the metadata ends: after the element that holds it, or at the first
# element that can only come after it (a document without a <front>).
_ENDS_AFTER: Final = frozenset({"front", "book-part-meta", "coredata"})
_ENDS_AT: Final = frozenset(
    {"body", "back", "floats-group", "sub-article", "book-body", "book-back", "originalText"}
)
# Small enough that a 30 kB article stops after the first one or two chunks.
_CHUNK: Final = 8192


@dataclasses.dataclass(frozen=True, slots=True)
class FrontMatter:
    """The partial tree :func:`read_front_matter` built.

    ``root`` holds the document from its start through the end of the front
    matter; ``complete`` says whether the whole document was read (no front
    matter boundary was met, so nothing was skipped).
    """

    root: etree._Element
    complete: bool


def _pull_parser() -> etree.XMLPullParser:
    return etree.XMLPullParser(
        events=("start", "end"),
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=False,
        recover=False,
    )


def _refuse_entity_declarations(root: etree._Element) -> None:
    # Declared entities are never expanded here, but a body that declares any is
    # refused outright, as parse_xml refuses it.
    dtd: Any = root.getroottree().docinfo.internalDTD  # the stubs lack iterentities
    if dtd is not None and any(True for _ in dtd.iterentities()):
        raise XmlError("document declares entities; refused")


def read_front_matter(content: bytes) -> FrontMatter:
    """Parse ``content`` up to the end of its front matter.

    Stops after ``</front>`` (JATS article), ``</book-part-meta>`` (BITS book
    part) or ``</coredata>`` (Elsevier), or at the start of a ``<body>``,
    ``<back>``, ``<sub-article>`` … when no such element came first; a
    document with neither is read whole. Raises :class:`~litfetch_df._xml.XmlError`
    for empty or malformed bytes read so far, and for a DTD that declares
    entities. Bytes after the stop are not checked: a fault past the end of
    the front matter does not make it unreadable.
    """
    if not content or not content.strip():
        raise XmlError("empty document")
    parser = _pull_parser()
    root: etree._Element | None = None
    try:
        for offset in range(0, len(content), _CHUNK):
            broken: etree.XMLSyntaxError | None = None
            try:
                parser.feed(content[offset : offset + _CHUNK])
            except etree.XMLSyntaxError as exc:
                # The events before the fault are still queued: a fault past the
                # front matter's end does not undo the front matter.
                broken = exc
            for event, element in parser.read_events():
                if not isinstance(element, etree._Element):
                    continue  # only start/end events are asked for
                if root is None:
                    root = element
                    _refuse_entity_declarations(root)
                name = local_name(element)
                if event == "end" and name in _ENDS_AFTER:
                    return FrontMatter(root, complete=False)
                if event == "start" and element is not root and name in _ENDS_AT:
                    return FrontMatter(root, complete=False)
            if broken is not None:
                raise broken
        whole = parser.close()
    except XmlError:
        raise
    except etree.XMLSyntaxError as exc:
        raise XmlError(f"malformed XML: {exc.msg}") from None
    except (ValueError, LookupError) as exc:  # e.g. an unknown declared encoding
        raise XmlError(f"unreadable XML: {type(exc).__name__}") from None
    if whole is None:
        raise XmlError("no root element")
    _refuse_entity_declarations(whole)
    return FrontMatter(whole, complete=True)
