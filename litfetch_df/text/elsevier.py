"""The Elsevier full-text XML reader (``ce:``, ``sb:``, ``ja:`` namespaces)."""

from __future__ import annotations

from lxml import etree

from .losses import as_losses
from .model import Abstract, Caption, Citation, Document, Formula, Paragraph, Reference, Section
from .render import (
    TAG_NAMES,
    Renderer,
    all_text,
    clean,
    each,
    first,
    has_entity_refs,
    local_name,
    strings,
)
from .sections import section_type

__all__ = ["read_elsevier"]

_OWN = frozenset(
    {
        "label",
        "caption",
        "figure",
        "table",
        "float-anchor",
        "display",
        "textbox",
        "section-title",
        "footnote",
        "bibliography",
        "inter-ref-title",
        "e-component",
    }
)


_first = first


def _text(el: etree._Element | None, entities: bool = True) -> str:
    return clean(all_text(el, entities=entities)) if el is not None else ""


# What a paragraph holds that is read apart from its prose, found by lxml's tag filter in C.
_INNER_TAGS = ("{*}textbox", "{*}figure", "{*}table", "{*}e-component")


def _in_box(el: etree._Element, top: etree._Element) -> bool:
    """Whether ``el`` sits inside a ``textbox`` below ``top``."""
    up = el.getparent()
    while up is not None and up is not top:
        if local_name(up) == "textbox":
            return True
        up = up.getparent()
    return False


class _Reader:
    def __init__(self, math: str) -> None:
        self.r = Renderer(math=math)
        self.paragraphs: list[Paragraph] = []
        self.citations: list[Citation] = []
        self.captions: list[Caption] = []
        self.offset = 0

    def para(self, el: etree._Element, path: tuple[str, ...], kind: str) -> None:
        text = self.r.text(el, skip=_OWN)
        if not text:
            return
        if self.paragraphs:
            self.offset += 2
        index = len(self.paragraphs)
        self.paragraphs.append(Paragraph(text, path, kind, self.offset, self.offset + len(text)))
        self.citations.extend(
            Citation(rid, index, s, e) for rids, s, e in self.r.citations for rid in rids.split()
        )
        self.offset += len(text)
        # Floats inside a paragraph still get their captions. A box (ce:textbox) is kept
        # out of the paragraph's prose (_OWN) and is not lost: it becomes the paragraph(s)
        # right after it, as a box standing in a section does, its floats captioned there.
        boxes: list[etree._Element] = []
        self._inner(el, boxes)
        for box in boxes:
            self.para(box, path, kind)

    def _inner(self, el: etree._Element, boxes: list[etree._Element]) -> None:
        """Caption the floats below ``el`` in document order; collect its outermost boxes.

        Nothing below a box is read here (the box is read as paragraphs of its own).
        """
        for found in el.iterdescendants(*_INNER_TAGS):
            if _in_box(found, el):
                continue
            if local_name(found) == "textbox":
                boxes.append(found)
            else:
                self.caption(found)

    def caption(self, el: etree._Element) -> None:
        cap = next((c for c in el if (TAG_NAMES.get(c.tag) or local_name(c)) == "caption"), None)
        label = next((c for c in el if (TAG_NAMES.get(c.tag) or local_name(c)) == "label"), None)
        # lxml picks the rows and their entries out by tag, in C.
        ents = self.r.entities
        cells = tuple(
            tuple([_text(e, ents) for e in row.iterchildren("{*}entry")]) for row in each(el, "row")
        )
        kind = {"table": "table", "e-component": "supplementary"}.get(local_name(el), "figure")
        self.captions.append(
            Caption(
                kind,
                _text(label, ents),
                self.r.text(cap, skip=frozenset()) if cap is not None else "",
                cells,
            )
        )

    def section(
        self, el: etree._Element, parent: tuple[str, ...], parent_kind: str = "other"
    ) -> Section:
        # The first title and label, read in one loop over the children.
        title_el = label_el = None
        for c in el:
            cname = TAG_NAMES.get(c.tag) or local_name(c)
            if cname == "section-title":
                if title_el is None:
                    title_el = c
            elif cname == "label" and label_el is None:
                label_el = c
        ents = self.r.entities
        title, label = _text(title_el, ents), _text(label_el, ents)
        if local_name(el) == "acknowledgment" and not title:
            title = "Acknowledgements"
        kind = section_type("acknowledgements" if local_name(el) == "acknowledgment" else "", title)
        if kind == "other":
            kind = parent_kind  # an untyped subsection of the methods is methods
        path = (*parent, title)
        subs = self.blocks(el, path, kind)
        return Section(title, label, kind, len(path), path, subs)

    def blocks(self, el: etree._Element, path: tuple[str, ...], kind: str) -> tuple[Section, ...]:
        subs: list[Section] = []
        for child in el:
            name = TAG_NAMES.get(child.tag) or local_name(child)
            if name in ("section", "acknowledgment", "appendices"):
                if name == "appendices":
                    subs.extend(self.blocks(child, path, kind))
                else:
                    subs.append(self.section(child, path, kind))
            elif name in ("sections",):
                subs.extend(self.blocks(child, path, kind))
            elif name in ("para", "simple-para", "list", "display", "formula", "displayed-quote"):
                self.para(child, path, kind)
            elif name in ("figure", "table", "e-component", "float-anchor"):
                if name != "float-anchor":
                    self.caption(child)
            elif name in ("section-title", "label", "bibliography"):
                continue
            elif name:
                self.para(child, path, kind)
        return tuple(subs)


def _author(a: etree._Element, ents: bool) -> str:
    """Surname and given name: the first of each below ``a``, in document order."""
    surname = given = None
    for c in a:
        if len(c):
            # Not all leaves: a name may sit deeper, ahead of a later child's.
            surname, given = _first(a, "surname"), _first(a, "given-name")
            break
        name = TAG_NAMES.get(c.tag) or local_name(c)
        if name == "surname":
            if surname is None:
                surname = c
        elif name == "given-name" and given is None:
            given = c
    return " ".join(p for p in (_text(surname, ents), _text(given, ents)) if p)


def _reference(bib: etree._Element, ents: bool = True) -> Reference:
    label = _text(next((c for c in bib if local_name(c) == "label"), None), ents)
    sb = _first(bib, "reference")
    authors: tuple[str, ...] = ()
    title = source = year = doi = ""
    if sb is not None:
        authors = tuple(_author(a, ents) for a in each(sb, "author", "collaboration"))
        contribution = _first(sb, "contribution")
        title = _text(_first(contribution, "maintitle"), ents) if contribution is not None else ""
        host = _first(sb, "host")
        if host is not None:
            issue = _first(host, "issue", "book", "edited-book", "e-host")
            src = _first(issue if issue is not None else host, "maintitle")
            source = _text(src, ents)
            year = _text(_first(host, "date"), ents)
            doi = _text(_first(host, "doi"), ents)
    if not doi:
        doi = _text(_first(bib, "doi"), ents)
    return Reference(
        bib.get("id", ""),
        label,
        doi,
        "",
        "",
        title,
        source,
        year,
        authors,
        clean(
            " ".join(t for c in bib if local_name(c) != "label" for t in strings(c, entities=ents))
        ),
    )


def read_elsevier(root: etree._Element, *, math: str = "tex") -> Document:
    """Read a parsed Elsevier full-text tree (``xocs:doc`` or ``ja:article``) into a Document."""
    reader = _Reader(math)
    ents = reader.r.entities = has_entity_refs(root)
    found = _first(root, "article", "simple-article", "book-review", "converted-article")
    # An lxml element with no children is falsy, so test for None rather than use ``or``.
    article = found if found is not None else root
    head = _first(article, "head", "simple-head")
    title_el = _first(head, "title") if head is not None else None
    title = reader.r.text(title_el, skip=frozenset()) if title_el is not None else ""
    abstracts: list[Abstract] = []
    keywords: list[str] = []
    if head is not None:
        # lxml picks the abstracts, their paragraphs and the keywords out by tag, in C.
        for ab in head.iter("{*}abstract", "{*}keyword"):
            if local_name(ab) == "abstract":
                paras = [reader.r.text(p, skip=_OWN) for p in ab.iter("{*}simple-para", "{*}para")]
                lang = ab.get("{http://www.w3.org/XML/1998/namespace}lang", "")
                heading = _text(
                    next((c for c in ab if local_name(c) == "section-title"), None), ents
                )
                abstracts.append(
                    Abstract(clean(" ".join(paras)), ab.get("class", ""), lang, heading)
                )
            elif local_name(ab) == "keyword":
                keywords.append(_text(ab, ents))
    # Elsevier's main abstract has class "author"; the frame's main abstract is the type-less one.
    abstracts = [
        Abstract(
            a.text, "" if a.abstract_type == "author" else a.abstract_type, a.language, a.title
        )
        for a in abstracts
    ]
    sections: list[Section] = []
    body = _first(article, "body")
    if body is not None:
        sections.extend(reader.blocks(body, (), "other"))
    tail = _first(article, "tail", "back")
    if tail is not None:
        sections.extend(reader.blocks(tail, (), "other"))
    # Floats sit apart from the body, in <ce:floats>; supplementary files are e-components.
    for floats in each(article, "floats"):
        for child in floats:
            if local_name(child) in ("figure", "table", "e-component"):
                reader.caption(child)
            elif local_name(child) == "textbox":
                reader.r.lose(child)  # a floating box has no place in the prose: counted
    refs = [_reference(b, ents) for b in each(article, "bib-reference")]
    return Document(
        text_format="elsevier",
        article_type=article.get("docsubtype", ""),
        title=title,
        abstracts=tuple(abstracts),
        keywords=tuple(keywords),
        sections=tuple(sections),
        paragraphs=tuple(reader.paragraphs),
        captions=tuple(reader.captions),
        formulas=tuple(Formula(t, n, d) for t, n, d in reader.r.formulas),
        references=tuple(refs),
        citations=tuple(reader.citations),
        text_loss=as_losses(reader.r),
    )
