"""Hardened XML parsing for untrusted upstream bytes.

No external entities, no DTD loading, no network, no entity expansion, no
huge-tree mode. Every parse of upstream XML goes through :func:`parse_xml`.
"""

from __future__ import annotations

import re

from lxml import etree

__all__ = ["XmlError", "local_name", "parse_xml", "root_name"]


class XmlError(ValueError):
    """The bytes are not well-formed, safe XML."""


def _parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=False,
        recover=False,
    )


# An internal subset that declares entities is how expansion bombs and XXE
# arrive; upstream JATS never needs one (an external DOCTYPE id is fine).
_ENTITY_DECL = re.compile(rb"<!ENTITY", re.IGNORECASE)


def parse_xml(content: bytes, *, allow_entity_decls: bool = False) -> etree._Element:
    """Parse ``content`` safely and return the root element.

    Raises :class:`XmlError` for malformed input and, unless
    ``allow_entity_decls``, for any document that declares entities. Even when
    allowed, declared entities are never expanded or fetched.
    """
    if not content or not content.strip():
        raise XmlError("empty document")
    head = content[:65536]
    if not allow_entity_decls and _ENTITY_DECL.search(head):
        raise XmlError("document declares entities; refused")
    try:
        root = etree.fromstring(content, parser=_parser())
    except etree.XMLSyntaxError as exc:
        raise XmlError(f"malformed XML: {exc.msg}") from None
    if root is None:
        raise XmlError("no root element")
    return root


def local_name(element: etree._Element) -> str:
    """Return an element's tag without its namespace (``''`` for comments / PIs)."""
    tag = element.tag
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1]


_FIRST_TAG = re.compile(rb"<\s*([A-Za-z_][\w.\-]*:)?([A-Za-z_][\w.\-]*)")


def root_name(content: bytes) -> str | None:
    """Return the local name of the first start tag, reading no further than needed."""
    pos = 0
    n = len(content)
    while pos < n:
        lt = content.find(b"<", pos)
        if lt < 0 or lt + 1 >= n:
            return None
        nxt = content[lt + 1 : lt + 2]
        if nxt in (b"?", b"!"):
            # skip declarations, comments, DOCTYPE (with a possible internal subset)
            if content.startswith(b"<!--", lt):
                end = content.find(b"-->", lt + 4)
                pos = n if end < 0 else end + 3
                continue
            if content.startswith(b"<!DOCTYPE", lt) and b"[" in content[lt : content.find(b">", lt) + 1 or n]:
                end = content.find(b"]>", lt)
                pos = n if end < 0 else end + 2
                continue
            end = content.find(b">", lt)
            pos = n if end < 0 else end + 1
            continue
        m = _FIRST_TAG.match(content, lt)
        if not m:
            return None
        return m.group(2).decode("ascii", "replace")
    return None
