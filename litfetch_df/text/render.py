"""Rendering one element's text: tails kept, inline joined, blocks separated, NFC."""

from __future__ import annotations

import functools
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, cast

from lxml import etree

__all__ = [
    "Renderer",
    "all_text",
    "clean",
    "each",
    "first",
    "has_entity_refs",
    "local_name",
    "strings",
]


# Elements whose text belongs to a field of its own, never to the prose around them.
OWN_FIELD = frozenset(
    {
        "label",
        "caption",
        "fig",
        "table-wrap",
        "table-wrap-foot",
        "fn",
        "fn-group",
        "ref-list",
        "float",
        "figure",
        "table",
        "display",
        "object-id",
        "alt-text",
        "graphic",
        # Floats get captions of their own (jats.py), wherever they sit.
        "supplementary-material",
        "media",
        "fig-group",
        "table-wrap-group",
    }
)
# Elements that start a new block (a space is put either side of their text).
BLOCK = frozenset(
    {
        "p",
        "list",
        "list-item",
        "def-list",
        "def-item",
        "term",
        "def",
        "disp-quote",
        "boxed-text",
        "title",
        "sec",
        "statement",
        "para",
        "simple-para",
        "verse-group",
        "verse-line",
        "address",
        "tr",
        "td",
        "th",
        "entry",
        "row",
        "br",
        "section-title",
        "disp-formula",
    }
)
# ref-types of an <xref> that is a footnote marker rather than part of a word.
_MARKERS = frozenset({"fn", "table-fn", "author-notes"})
# Elements dropped on purpose with their text counted as lost.
LOST = frozenset({"sub-article", "response", "processing-meta", "private-char", "inline-graphic"})
# Elements the walk treats other than as plain inline text (lost, math, blocks, citations).
_SPECIAL = LOST | BLOCK | {"inline-formula", "disp-formula", "math", "formula", "xref", "cross-ref"}


@functools.lru_cache(maxsize=256)
def _tags(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{{*}}{n}" for n in names)


def each(el: etree._Element, *names: str) -> Iterator[etree._Element]:
    """``el`` and its descendants named ``names`` (any namespace), in document order.

    lxml filters by tag in C: far faster than testing every element's local name.
    """
    return el.iter(*_tags(names))


def first(el: etree._Element | None, *names: str) -> etree._Element | None:
    """The first of ``el`` and its descendants named one of ``names``, or ``None``."""
    return None if el is None else next(el.iter(*_tags(names)), None)


# Every text node below an element, gathered by libxml2's XPath in C (plain ``str``, not
# lxml's "smart" strings): several times faster than ``itertext()``, whose iterator runs
# through lxml's event walker. The two differ only on entity references (an undeclared
# ``&nbsp;`` under an external DTD that was not loaded): itertext() yields the reference
# as ``"&nbsp;"``, XPath and libxml2's text serialiser skip it. A document with any such
# node (:func:`has_entity_refs`, checked once per body) takes itertext() throughout.
_TEXT_NODES = etree.XPath("descendant::text()", smart_strings=False)
# An element's text nodes joined, by libxml2 in C (the element's tail left out).
_TEXT_OF = functools.partial(etree.tostring, method="text", encoding=str, with_tail=False)


def has_entity_refs(root: etree._Element) -> bool:
    """Whether the tree holds an entity-reference node (lxml finds them in C, in one pass).

    Without a DOCTYPE an undeclared entity is a well-formedness error (the parse fails),
    so only a body that has one can hold such a node.
    """
    docinfo: Any = root.getroottree().docinfo  # the stubs lack DocInfo.doctype
    if not docinfo.doctype:
        return False
    return next(root.iter(etree.Entity), None) is not None


def strings(el: etree._Element, *, entities: bool = True) -> list[str]:
    """Every text node under ``el`` (the stubs say str | bytes; parsed XML gives str).

    ``entities=False`` (the tree holds no entity reference) gathers them in C. A
    processing instruction or comment holds none of the document's text: ``[]``.
    """
    if not isinstance(el.tag, str):
        return []  # the XPath would refuse a node that is not an element
    if not entities:
        return cast(list[str], _TEXT_NODES(el))
    return cast(list[str], list(el.itertext()))


def all_text(el: etree._Element, *, entities: bool = True) -> str:
    """Every text node under ``el``, joined as is (``entities=False``: joined in C)."""
    if not len(el) and isinstance(el.tag, str):
        return el.text or ""  # a leaf (most cells, names, years): no iterator needed
    if not entities:
        return _TEXT_OF(el)
    return "".join(cast("Iterator[str]", el.itertext()))


def clean(text: str) -> str:
    """NFC and collapsed whitespace, no ASCII folding."""
    if not text.isascii():  # ASCII is NFC already; the check is far cheaper than normalize
        text = unicodedata.normalize("NFC", text)
    return _collapse(text)


def _collapse(text: str) -> str:
    """``" ".join(text.split())``: every run of whitespace one space, none at either end.

    ``str.split()`` splits on exactly the characters ``\\s`` matches (tabs, newlines,
    NBSP, the Unicode spaces, U+0085, U+2028/9, U+001C-1F), and is several times faster
    than a regex. Every one of them but the ASCII space is unprintable (categories Cc,
    Zs, Zl, Zp), so a printable string's only whitespace is the space: it is collapsed
    in place, without splitting it into words (most text is such a string).
    """
    if not text.isprintable():
        return " ".join(text.split())
    while "  " in text:
        text = text.replace("  ", " ")
    return text.strip(" ")


Cited = tuple[str, int, int]


def land(raw: str, citations: list[Cited], end: int, *, single: bool | None = None) -> list[Cited]:
    """Citations' raw offsets moved to where they land once ``raw`` is cleaned.

    Where single spaces are the only whitespace, cleaning drops a leading space and a
    trailing one and nothing else, so an offset lands one earlier when the text starts
    with a space (never below 0, never past ``end``, the cleaned length); elsewhere
    :func:`land_by_pieces` works it out. ``single``: whether that is so, when the
    caller knows.
    """
    if single is None:
        single = "  " not in raw and raw.isprintable()
    if single:
        lead = raw[:1] == " "
        return [
            (rid, min(max(s - lead, 0), end), min(max(e - lead, 0), end)) for rid, s, e in citations
        ]
    return land_by_pieces(raw, citations, end)


def land_by_pieces(raw: str, citations: list[Cited], end: int) -> list[Cited]:
    """:func:`land` for any text: the length of the cleaned prefix at each offset.

    (Leading space dropped, each run one space.) The text is cleaned piece by piece
    between the offsets in order, once over, in C; a run across a cut is one run.
    """
    wanted = sorted({min(o, len(raw)) for _, s, e in citations for o in (s, e)})
    landed: dict[int, int] = {}
    pos = length = 0
    after_space = True
    for offset in wanted:
        # The piece's cleaned length without building it: its words joined by single
        # spaces, plus one space for a leading run (unless one was just counted) and
        # one for a trailing run; a piece of only whitespace is one space.
        seg = raw[pos:offset]
        if seg:
            words = " ".join(seg.split())
            if words:
                trail = seg[-1].isspace()
                length += len(words) + trail + (not after_space and seg[0].isspace())
                after_space = trail
            elif not after_space:
                length += 1
                after_space = True
        landed[offset] = min(length, end)
        pos = offset
    return [(rid, landed[min(s, len(raw))], landed[min(e, len(raw))]) for rid, s, e in citations]


TAG_NAMES: dict[object, str] = {}


def local_name(element: etree._Element) -> str:
    """An element's tag without its namespace (``''`` for comments / PIs), memoised.

    The walk asks this of every element, so each distinct tag is split once.
    """
    tag = element.tag
    try:
        return TAG_NAMES[tag]
    except KeyError:
        name = tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""
        if len(TAG_NAMES) < 4096:  # a hostile body cannot grow the memo without bound
            TAG_NAMES[tag] = name
        return name


@dataclass
class Renderer:
    """Renders elements; ``math`` is ``"tex"`` (TeX, else MathML text) or ``"placeholder"``."""

    math: str = "tex"
    # Whether the tree holds entity references (:func:`has_entity_refs`); ``True``, the
    # general path, unless the reader checked.
    entities: bool = True
    loss: Counter[str] = field(default_factory=Counter)
    loss_chars: Counter[str] = field(default_factory=Counter)
    formulas: list[tuple[str, str, bool]] = field(default_factory=list)
    citations: list[tuple[str, int, int]] = field(default_factory=list)
    # The walk's citations: rid and the indexes into its parts where each opens and closes.
    _cites: list[tuple[str, int, int]] = field(default_factory=list, repr=False)

    def lose(self, el: etree._Element) -> None:
        """Count ``el``'s text (not its tail) as not rendered."""
        name = local_name(el)
        self.loss[name] += 1
        self.loss_chars[name] += len(clean(all_text(el, entities=self.entities)))

    def text(self, el: etree._Element, *, skip: frozenset[str] = OWN_FIELD) -> str:
        """The cleaned text of ``el`` without its tail; in-text citations recorded by offset."""
        self.citations = []
        self._cites = []
        parts: list[str] = []
        if local_name(el) in ("inline-formula", "disp-formula", "formula"):
            # A formula standing as a block of its own still goes through the math rules
            # (an image-only one is counted as lost, not skipped).
            self._math(el, parts, display=True)
        else:
            self._walk(el, parts, skip, top=True)
        raw = "".join(parts)
        if self._cites:
            # The walk noted where each citation opens and closes as indexes into the
            # parts; their offsets into the raw text are the parts' running lengths.
            ends = list(accumulate(map(len, parts), initial=0))
            self.citations = [(rid, ends[i], ends[j]) for rid, i, j in self._cites]
        return self._clean_with_citations(raw)

    def _clean_with_citations(self, raw: str) -> str:
        # NFC first (composed characters shift offsets only where they compose, rarely).
        if not raw.isascii():
            raw = unicodedata.normalize("NFC", raw)
        # _collapse in place, keeping what it learns for land(): whether single spaces
        # are the only whitespace (the text is long; each check is a pass over it).
        if raw.isprintable():
            single = "  " not in raw
            stripped = raw.strip(" ") if single else _collapse(raw)
        else:
            single = False
            stripped = " ".join(raw.split())
        if self.citations:
            self.citations = land(raw, self.citations, len(stripped), single=single)
        return stripped

    def _walk(self, el: etree._Element, parts: list[str], skip: frozenset[str], top: bool) -> None:
        # The memo looked up in place: this runs for every element of every paragraph.
        name = TAG_NAMES.get(el.tag) or local_name(el)
        if not top:
            if not name:  # a processing instruction: its text is not prose
                self._tail(el, parts)
                return
            if name in LOST:
                self.lose(el)
                self._tail(el, parts)
                return
            if name in skip:
                self._tail(el, parts)
                return
            if name in ("inline-formula", "disp-formula", "math", "formula"):
                self._math(el, parts, display=name != "inline-formula")
                self._tail(el, parts)
                return
        # A footnote marker (``scenarios<xref ref-type="table-fn">a</xref>``) is not part
        # of the word it follows: set apart, so "scenarios" stays a word.
        block = name in BLOCK or (name == "xref" and el.get("ref-type") in _MARKERS)
        if block:
            parts.append(" ")
        cite = name in ("xref", "cross-ref") and el.get("ref-type", "bibr") == "bibr"
        rid = (el.get("rid") or el.get("refid") or "") if cite else ""
        opened = len(parts)
        text = el.text
        if text:
            parts.append(text)
        for child in el:
            # A plain inline leaf (<italic>, <sub>: most of them) is its text and its tail;
            # anything else, or a tag not yet memoised, takes the full walk.
            child_name = TAG_NAMES.get(child.tag)
            if not child_name or child_name in skip or len(child):
                self._walk(child, parts, skip, top=False)
            elif child_name not in _SPECIAL:
                text = child.text
                if text:
                    parts.append(text)
                text = child.tail
                if text:
                    parts.append(text)
            elif child_name == "xref":
                # A leaf <xref> (most citations) read in place, as the full walk reads it:
                # a footnote marker set apart by spaces, a citation noted by its parts.
                ref_type = child.get("ref-type")
                marker = ref_type in _MARKERS
                if marker:
                    parts.append(" ")
                child_rid = (
                    (child.get("rid") or child.get("refid") or "")
                    if ref_type in (None, "bibr")
                    else ""
                )
                child_opened = len(parts)
                text = child.text
                if text:
                    parts.append(text)
                if child_rid:
                    self._cites.append((child_rid, child_opened, len(parts)))
                if marker:
                    parts.append(" ")
                text = child.tail
                if text:
                    parts.append(text)
            else:
                self._walk(child, parts, skip, top=False)
        if rid:
            self._cites.append((rid, opened, len(parts)))
        if block:
            parts.append(" ")
        if not top:
            self._tail(el, parts)

    @staticmethod
    def _tail(el: etree._Element, parts: list[str]) -> None:
        if el.tail:
            parts.append(el.tail)

    def _math(self, el: etree._Element, parts: list[str], *, display: bool) -> None:
        tex = list(each(el, "tex-math"))
        mml = list(each(el, "math"))
        label = [c for c in el if local_name(c) == "label"]
        if self.math == "placeholder":
            text, notation = "[formula]", "placeholder"
        elif tex and tex[0].text:
            text, notation = clean(tex[0].text), "tex"
        elif mml:
            text, notation = clean(all_text(mml[0], entities=self.entities)), "mathml"
        else:
            ents = self.entities
            rest = clean(
                "".join(
                    t for c in el if local_name(c) != "label" for t in strings(c, entities=ents)
                )
            )
            if rest:
                text, notation = rest, "mathml"
            else:
                # Nothing to render (an image, or only a processing instruction), so it is
                # counted under what the formula holds.
                image = any(True for _ in each(el, "graphic", "inline-graphic"))
                self.loss["formula-image" if image else "formula-empty"] += 1
                text, notation = "[formula]", "placeholder"
        if label:
            text = text  # the label stays in its own field; it is not prose
        self.formulas.append((text, notation, display))
        parts.append(f" {text} " if display else text)

    def losses(self) -> dict[str, tuple[int, int]]:
        """What was not rendered: element name → (count, characters)."""
        return {k: (self.loss[k], self.loss_chars[k]) for k in sorted(self.loss)}
