"""Hardened XML parsing for untrusted upstream bytes.

No external entities, no DTD loading, no network, no entity expansion, no
huge-tree mode (so libxml2 refuses nesting deeper than 256 levels). Every
parse of upstream XML goes through :func:`parse_xml`.
"""

from __future__ import annotations

import re
from typing import Any

from lxml import etree

__all__ = [
    "XmlError",
    "declares_entities",
    "local_name",
    "narrow_xml",
    "parse_xml",
    "root_name",
    "safe_root_name",
]


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


_GENERAL_ENTITY_DECL = re.compile(rb"<!ENTITY\s+(?!%)", re.IGNORECASE)


def declares_entities(content: bytes, *, general_only: bool = False) -> bool:
    """Return whether XML ``content`` declares entities in its prolog (without parsing it).

    Entity declarations can only sit in the prolog (the DOCTYPE's internal
    subset), however long a comment pads it: all of it is scanned, and no
    further, so a body that merely mentions ``<!ENTITY`` in a CDATA section
    does not count. UTF-16 and UTF-32 are read as the ASCII they hold.
    ``general_only``: count only general entities (``<!ENTITY name …>``), the
    ones a document's text can expand, not parameter entities
    (``<!ENTITY % name …>``, which a DOCTYPE uses to name its DTD).
    """
    narrow = narrow_xml(content)
    first = _first_start_tag(narrow)
    prolog = narrow if first < 0 else narrow[:first]
    pattern = _GENERAL_ENTITY_DECL if general_only else _ENTITY_DECL
    return pattern.search(prolog) is not None


def parse_xml(content: bytes, *, allow_entity_decls: bool = False) -> etree._Element:
    """Parse ``content`` safely and return the root element.

    Raises :class:`XmlError` for malformed input and, unless
    ``allow_entity_decls``, for any document that declares entities. Even when
    allowed, declared entities are never expanded or fetched.
    """
    if not content or not content.strip():
        raise XmlError("empty document")
    if not allow_entity_decls and declares_entities(content):
        raise XmlError("document declares entities; refused")
    try:
        root = etree.fromstring(content, parser=_parser())
    except etree.XMLSyntaxError as exc:
        raise XmlError(f"malformed XML: {exc.msg}") from None
    except (ValueError, LookupError) as exc:  # e.g. an unknown declared encoding
        raise XmlError(f"unreadable XML: {type(exc).__name__}") from None
    if root is None:
        raise XmlError("no root element")
    if not allow_entity_decls:
        # The byte scan cannot see declarations in a non-ASCII-compatible encoding
        # (UTF-16); the parsed DTD can. They were not expanded, but refuse all the same.
        dtd: Any = root.getroottree().docinfo.internalDTD  # the stubs lack iterentities
        if dtd is not None and any(True for _ in dtd.iterentities()):
            raise XmlError("document declares entities; refused")
    return root


def safe_root_name(content: bytes) -> str | None:
    """Return the root's local name if ``content`` parses with :func:`parse_xml`, else ``None``.

    For a rung that keeps the bytes without reading them: a document that declares
    entities, nests deeper than the parser allows (256 levels), is malformed or is
    truncated is never accepted as a body.
    """
    try:
        return local_name(parse_xml(content))
    except XmlError:
        return None


def local_name(element: etree._Element) -> str:
    """Return an element's tag without its namespace (``''`` for comments / PIs)."""
    tag = element.tag
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1]


_FIRST_TAG = re.compile(rb"<\s*([A-Za-z_][\w.\-]*:)?([A-Za-z_][\w.\-]*)")
# Inside a DOCTYPE: what can hide a '>' (quoted ids) or open the internal subset.
_DOCTYPE_STOP = re.compile(rb"[\"'\[>]")
# Inside the internal subset: what can hide a ']' (comments, PIs, quoted values).
_SUBSET_STOP = re.compile(rb"<!--|<\?|[\"'\]]")


def _skip_quoted(content: bytes, i: int) -> int:
    """Return the offset just past the quoted literal starting at ``i`` (``-1``: unterminated)."""
    end = content.find(content[i : i + 1], i + 1)
    return -1 if end < 0 else end + 1


def _doctype_end(content: bytes, pos: int) -> int:
    """Return the offset just past the DOCTYPE declaration whose body starts at ``pos``."""
    while True:
        m = _DOCTYPE_STOP.search(content, pos)
        if m is None:
            return -1
        tok, i = m.group(), m.start()
        if tok == b">":
            return i + 1
        pos = _subset_end(content, i + 1) if tok == b"[" else _skip_quoted(content, i)
        if pos < 0:
            return -1


def _subset_end(content: bytes, pos: int) -> int:
    """Return the offset just past the ``]`` closing the internal subset opened before ``pos``."""
    while True:
        m = _SUBSET_STOP.search(content, pos)
        if m is None:
            return -1
        tok, i = m.group(), m.start()
        if tok == b"]":
            return i + 1
        if tok == b"<!--":
            end = content.find(b"-->", i + 4)
            pos = -1 if end < 0 else end + 3
        elif tok == b"<?":
            end = content.find(b"?>", i + 2)
            pos = -1 if end < 0 else end + 2
        else:
            pos = _skip_quoted(content, i)
        if pos < 0:
            return -1


def _first_start_tag(content: bytes) -> int:
    """Return the offset of the ``<`` of the first start tag, skipping the prolog (``-1``: none)."""
    pos = 0
    n = len(content)
    while True:
        lt = content.find(b"<", pos)
        if lt < 0 or lt + 1 >= n:
            return -1
        if content.startswith(b"<!--", lt):
            end = content.find(b"-->", lt + 4)
            pos = -1 if end < 0 else end + 3
        elif content.startswith(b"<?", lt):
            # a PI ends at '?>', and its data may hold a bare '>'
            end = content.find(b"?>", lt + 2)
            pos = -1 if end < 0 else end + 2
        elif content[lt : lt + 9].upper() == b"<!DOCTYPE":
            # the internal subset's declarations contain '>' of their own
            pos = _doctype_end(content, lt + 9)
        elif content.startswith(b"<!", lt):
            end = content.find(b">", lt + 2)
            pos = -1 if end < 0 else end + 1
        else:
            return lt
        if pos < 0:
            return -1


# How a document in a wide encoding begins: its byte-order mark, or (without one) how
# "<?" or "<" is spelled in it (XML 1.0, Appendix F).
_WIDE_STARTS: tuple[tuple[bytes, str], ...] = (
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\xfe\xff", "utf-16-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\x00\x00\x00<", "utf-32-be"),
    (b"<\x00\x00\x00", "utf-32-le"),
    (b"\x00<", "utf-16-be"),
    (b"<\x00", "utf-16-le"),
)


def narrow_xml(content: bytes) -> bytes:
    """Return ``content`` re-encoded as UTF-8 when it is UTF-16 or UTF-32, else unchanged.

    The markup scanners below work on bytes and need ``<`` to be one byte.
    """
    for start, encoding in _WIDE_STARTS:
        if content.startswith(start):
            text = content.decode(encoding, "replace").lstrip("\ufeff")
            return text.encode("utf-8", "replace")
    return content


def root_name(content: bytes) -> str | None:
    """Return the local name of the first start tag, reading no further than needed.

    Skips the XML declaration, processing instructions, comments and a DOCTYPE
    (internal subset included); returns ``None`` when no start tag is found.
    UTF-16 and UTF-32 documents are read too. Never raises on arbitrary bytes.
    """
    content = narrow_xml(content)
    lt = _first_start_tag(content)
    if lt < 0:
        return None
    m = _FIRST_TAG.match(content, lt)
    if not m:
        return None
    return m.group(2).decode("ascii", "replace")
