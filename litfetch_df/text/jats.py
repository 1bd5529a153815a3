"""The JATS / NLM 2.x-3 / BITS reader: one walk over the parsed tree."""

from __future__ import annotations

from lxml import etree

from .losses import as_losses
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
)
from .render import (
    BLOCK,
    LOST,
    OWN_FIELD,
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

__all__ = ["read_jats"]

_CITATIONS = ("element-citation", "mixed-citation", "citation", "nlm-citation")
# Containers whose children are walked as sections or paragraphs.
_PARA = frozenset(
    {
        "p",
        "disp-quote",
        "list",
        "def-list",
        "boxed-text",
        "statement",
        "verse-group",
        "disp-formula",
        "speech",
        "preformat",
        "code",
        "array",
    }
)


# Elements that carry a caption of their own, and the kind their Caption gets.
_FLOAT_KIND = {
    "fig": "figure",
    "fig-group": "figure",
    "table-wrap": "table",
    "table-wrap-group": "table",
    "supplementary-material": "supplementary",
    "media": "supplementary",
    "boxed-text": "box",
    "chem-struct-wrap": "chemistry",
    "disp-formula-group": "formula",
    "graphic": "figure",
    "code": "code",
    "preformat": "code",
}
# Floats are kept out of the prose (and out of a caption they sit in): they get captions.
_FLOATS = frozenset(
    {"fig", "fig-group", "table-wrap", "table-wrap-group", "supplementary-material", "media"}
)

_NOT_CAPTION = frozenset({"label", "caption", "object-id", "graphic", "alt-text", ""})

# A footnote's label ("a", "*") is its own token, never glued to the first word.
_LABEL = frozenset({"label"})
_NONE: frozenset[str] = frozenset()
_FLOATS_OWN = _FLOATS | OWN_FIELD


def _children(el: etree._Element, *names: str) -> list[etree._Element]:
    return list(el.iterchildren(*(f"{{*}}{n}" for n in names)))


_first = first
_FRONT = frozenset({"front", "book-meta", "book-part-meta", "front-matter"})


_PRUNED = LOST | {"ref-list"}


def _pruned(el: etree._Element, top: etree._Element) -> bool:
    """Whether ``el`` sits (below ``top``) in a sub-article or the reference list."""
    up = el.getparent()
    while up is not None:
        if up is top:
            return False
        if (TAG_NAMES.get(up.tag) or local_name(up)) in _PRUNED:
            return True
        up = up.getparent()
    return False


class _Reader:
    def __init__(self, math: str) -> None:
        self.r = Renderer(math=math)
        self.paragraphs: list[Paragraph] = []
        self.citations: list[Citation] = []
        self.captions: list[Caption] = []
        self.footnotes: list[str] = []
        self.offset = 0

    def add_paragraph(self, el: etree._Element, path: tuple[str, ...], kind: str) -> None:
        text = self.r.text(el)
        if not text:
            return
        if self.paragraphs:
            self.offset += 2  # the blank line between paragraphs
        index = len(self.paragraphs)
        self.paragraphs.append(Paragraph(text, path, kind, self.offset, self.offset + len(text)))
        for rid, s, e in self.r.citations:
            for one in rid.split():
                self.citations.append(Citation(one, index, s, e))
        self.offset += len(text)

    def caption(self, el: etree._Element) -> None:
        """One :class:`Caption` for a float: its own label and caption, a table's cells."""
        name = local_name(el)
        # The first label, the first caption and (a figure's, a supplementary file's) the
        # text beside them, read in one loop over the children.
        label = cap = None
        beside: list[etree._Element] = []
        keep_beside = name in _FLOATS and name not in ("table-wrap", "table-wrap-group")
        for c in el:
            cname = TAG_NAMES.get(c.tag) or local_name(c)
            if cname == "label":
                if label is None:
                    label = c
            elif cname == "caption":
                if cap is None:
                    cap = c
            elif keep_beside and cname not in _NOT_CAPTION and cname not in _FLOATS:
                beside.append(c)
        cells: list[tuple[str, ...]] = []
        ents = self.r.entities
        if name == "table-wrap":
            # lxml picks the rows out in C; a row's cells by a plain loop over its children
            # (cheaper than setting up a tag filter per row), each leaf read in place.
            for tr in each(el, "tr"):
                row: list[str] = []
                for td in tr:
                    tag = td.tag  # compared first as is: most cells are in no namespace
                    if tag != "td" and tag != "th":
                        cname = TAG_NAMES.get(tag) or local_name(td)
                        if cname != "td" and cname != "th":
                            continue
                    if not len(td):
                        text = td.text
                        if not text:
                            row.append("")
                            continue
                        if text.isascii():
                            row.append(" ".join(text.split()))
                            continue
                    row.append(clean(all_text(td, entities=ents)))
                cells.append(tuple(row))
        self.captions.append(
            Caption(
                _FLOAT_KIND.get(name, name),
                clean(all_text(label, entities=ents)) if label is not None else "",
                self._caption_text(cap, beside),
                tuple(cells),
            )
        )
        if name != "table-wrap":
            return
        # Table footnotes: each <fn>, or the whole foot when it holds bare paragraphs
        # (found by lxml's tag filter, not by naming every element of the table).
        for fn in each(el, "table-wrap-foot", "fn"):
            if local_name(fn) == "fn" or _first(fn, "fn") is None:
                self.footnotes.append(self.r.text(fn, skip=_LABEL))

    def _caption_text(self, cap: etree._Element | None, beside: list[etree._Element]) -> str:
        # A float nested in the caption (eLife's source data) is a caption of its own.
        parts = [self.r.text(cap, skip=_FLOATS)] if cap is not None else []
        # Text a figure or a supplementary file holds beside its caption (<p>, <attrib>)
        # is kept with the caption; nested floats and own-field parts are not prose.
        parts.extend(self.r.text(c, skip=_FLOATS_OWN) for c in beside)
        return clean(" ".join(p for p in parts if p))

    def floats(self, el: etree._Element) -> None:
        """Caption every float under ``el`` in document order, wherever it sits.

        Floats turn up inside paragraphs, inside other floats' captions (eLife's source
        data), in groups with a caption of their own and in ``<floats-group>``; walking
        the whole tree once is what makes sure none is skipped. Sub-articles are lost
        as a whole (counted once, elsewhere) and the reference list holds no floats.
        """
        # lxml finds the candidates in C; each float is its figure or table, or the
        # parent of a caption (the first caption only, should a float have two).
        for found in each(el, "fig", "table-wrap", "caption"):
            if (TAG_NAMES.get(found.tag) or local_name(found)) == "caption":
                owner = found.getparent()
                if (
                    owner is None
                    or local_name(owner) in ("fig", "table-wrap")
                    or next(owner.iterchildren("{*}caption")) is not found
                ):
                    continue
            else:
                owner = found
            if owner is not el and not _pruned(owner, el):
                self.caption(owner)

    def blocks(self, el: etree._Element, path: tuple[str, ...], kind: str) -> tuple[Section, ...]:
        """Walk a section-like container; return its subsections."""
        subs: list[Section] = []
        for child in el:
            name = TAG_NAMES.get(child.tag) or local_name(child)
            if name in ("sec", "book-part", "chapter", "ack", "app", "notes", "glossary", "bio"):
                subs.append(self.section(child, path, kind))
            elif name in _PARA:
                self.add_paragraph(child, path, kind)
            elif name in _FLOATS:
                continue  # captioned by floats(), wherever they sit
            elif name in ("fn-group", "fn"):
                for fn in [child] if name == "fn" else _children(child, "fn"):
                    self.footnotes.append(self.r.text(fn, skip=_LABEL))
            elif name in (
                "title",
                "label",
                "sec-meta",
                "book-part-meta",
                "ref-list",
                "object-id",
                "graphic",
            ):
                continue
            elif name in (
                "body",
                "book-body",
                "back",
                "front-matter",
                "book-back",
                "named-book-part-body",
                "app-group",
                "body-part",
            ):
                subs.extend(self.blocks(child, path, kind))
            elif name and name in LOST:
                self.r.lose(child)
            elif name:
                # Unknown block element: render it as a paragraph rather than lose it.
                self.add_paragraph(child, path, kind)
        return tuple(subs)

    def section(
        self, el: etree._Element, parent: tuple[str, ...], parent_kind: str = "other"
    ) -> Section:
        name = local_name(el)
        # The first title, label and metadata child, read in one loop.
        title_el = label_el = meta = None
        for c in el:
            cname = TAG_NAMES.get(c.tag) or local_name(c)
            if cname == "title":
                if title_el is None:
                    title_el = c
            elif cname == "label":
                if label_el is None:
                    label_el = c
            elif cname in ("book-part-meta", "sec-meta") and meta is None:
                meta = c
        if title_el is None and meta is not None:
            title_el = _first(meta, "title")
        title = self.r.text(title_el, skip=_NONE) if title_el is not None else ""
        if not title and name == "ack":
            title = "Acknowledgements"
        label = clean(all_text(label_el, entities=self.r.entities)) if label_el is not None else ""
        kind = section_type(
            el.get("sec-type", "")
            or el.get("notes-type", "")
            or ("acknowledgements" if name == "ack" else "")
            or ("supplementary" if name == "app" and not title else ""),
            title,
        )
        if kind == "other":
            kind = parent_kind  # an untyped subsection of the methods is methods
        path = (*parent, title)
        children = self.blocks(el, path, kind)
        return Section(title, label, kind, len(path), path, children)


def _person(el: etree._Element, entities: bool = True) -> str:
    # Surname and given names are nearly always children: look there before searching.
    # (The last of each wins, as a later duplicate always has.) The children are read by
    # a plain loop: an lxml tag filter costs more to set up than a name's two children.
    sur = given = None
    for c in el:
        # The tag compared as is first (no namespace, the usual), its local name else.
        tag = c.tag
        name = (
            tag if tag == "surname" or tag == "given-names" else TAG_NAMES.get(tag) or local_name(c)
        )
        if name == "surname":
            sur = c
        elif name == "given-names":
            given = c
    if sur is None and given is None:
        if not len(el):  # a leaf (most string-names and collabs): nothing to search
            return clean(el.text or "")
        sur, given = _first(el, "surname"), _first(el, "given-names")
    elif sur is not None and given is not None and not len(sur) and not len(given):
        # The usual name, two leaves: their texts joined without walking either.
        joined = f"{sur.text or ''} {given.text or ''}"
        if joined.isascii():  # clean() in place: ASCII is NFC already
            joined = " ".join(joined.split())
            if joined:
                return joined
        return clean(joined) or clean(all_text(el, entities=entities))
    parts = [all_text(x, entities=entities) for x in (sur, given) if x is not None]
    return clean(" ".join(parts)) or clean(all_text(el, entities=entities))


_XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
# Every element a reference's fields come from, found in one lxml-filtered pass over
# the citation (document order, as the separate searches saw them): the per-field
# searches were the largest single cost of reading a JATS body.
_REF_TAGS = tuple(
    f"{{*}}{n}"
    for n in (
        "pub-id",
        "ext-link",
        "name",
        "string-name",
        "collab",
        "article-title",
        "chapter-title",
        "part-title",
        "source",
        "year",
    )
)
_REF_FIELD = {
    "article-title": "title",
    "chapter-title": "title",
    "part-title": "title",
    "source": "source",
    "year": "year",
}
_PERSON = frozenset({"name", "string-name", "collab"})
_CITATION_TAGS = tuple(f"{{*}}{n}" for n in _CITATIONS)


def _reference(ref: etree._Element, entities: bool = True) -> Reference:
    cits = list(ref.iter(*_CITATION_TAGS))
    # citation-alternatives: prefer the structured rendering for fields, keep the first raw.
    cit = next((c for c in cits if local_name(c) == "element-citation"), cits[0] if cits else ref)
    ids: dict[str, str] = {}
    fields: dict[str, str] = {}
    authors: list[str] = []
    for c in cit.iter(*_REF_TAGS):
        name = TAG_NAMES.get(c.tag) or local_name(c)
        if name in _PERSON:  # the most of them
            authors.append(_person(c, entities))
        elif name == "pub-id":
            ids.setdefault(c.get("pub-id-type", ""), clean(c.text or ""))
        elif name == "ext-link":
            href = c.get(_XLINK_HREF) or ""
            if "doi.org/" in href:
                ids.setdefault("doi", href.split("doi.org/", 1)[1])
        elif name in _REF_FIELD:
            key = _REF_FIELD[name]
            if key not in fields:  # the first in document order, as before
                fields[key] = clean(all_text(c, entities=entities))
    label = next(ref.iterchildren("{*}label"), None)
    raw_src = cits[0] if cits else ref
    return Reference(  # by position (ref_id, label, doi, pmid, pmcid, title, ...): cheaper
        ref.get("id", ""),
        clean(all_text(label, entities=entities)) if label is not None else "",
        ids.get("doi", ""),
        ids.get("pmid", ""),
        ids.get("pmcid", "") or ids.get("pmc", ""),
        fields.get("title", ""),
        fields.get("source", ""),
        fields.get("year", ""),
        tuple(authors),
        clean(" ".join(strings(raw_src, entities=entities))),
    )


# fn-type values of footnotes and author notes that are statements, and their type.
_FN_STATEMENTS = {
    "conflict": "competing interests",
    "coi-statement": "competing interests",
    "financial-disclosure": "funding",
    "funding": "funding",
    "supported-by": "funding",
    "data-availability": "data availability",
    "con": "author contributions",
}
_META_STATEMENTS = {"data availability": "data availability", "funding": "funding"}


def _statements(root: etree._Element, r: Renderer) -> tuple[Statement, ...]:
    """Statements outside the sections: funding statements, typed footnotes, custom meta."""
    out: list[Statement] = []
    for el in each(root, "funding-statement", "fn", "custom-meta"):
        if _pruned(el, root):
            continue  # a sub-article's notes are not the article's
        name = local_name(el)
        if name == "custom-meta":
            meta = _children(el, "meta-name")
            key = clean(all_text(meta[0], entities=r.entities)).lower() if meta else ""
            kind = _META_STATEMENTS.get(key, "")
            value = _children(el, "meta-value")
            if kind and value:
                out.append(Statement(kind, r.text(value[0], skip=_LABEL)))
            continue
        if name == "funding-statement":
            kind = "funding"
        else:
            kind = _FN_STATEMENTS.get((el.get("fn-type") or "").lower(), "")
        text = r.text(el, skip=_LABEL) if kind else ""
        if text:
            out.append(Statement(kind, text))
    return tuple(out)


def read_jats(root: etree._Element, *, math: str = "tex") -> Document:
    """Read a parsed JATS, NLM 2.x/3 or BITS tree into a :class:`Document`."""
    reader = _Reader(math)
    reader.r.entities = has_entity_refs(root)
    is_book = local_name(root) in ("book", "book-part", "book-part-wrapper", "chapter")
    meta = _first(root, "article-meta", "book-part-meta", "book-meta")
    title_el = _first(meta, "article-title", "title") if meta is not None else None
    title = reader.r.text(title_el, skip=frozenset()) if title_el is not None else ""
    abstracts: list[Abstract] = []
    keywords: list[str] = []
    if meta is not None:
        # lxml picks the abstracts and keywords out of the front matter by tag, in C.
        for ab in each(meta, "abstract", "trans-abstract", "kwd", "compound-kwd"):
            if local_name(ab) in ("abstract", "trans-abstract"):
                parts = [
                    reader.r.text(c)
                    for c in ab
                    if local_name(c) not in ("title", "label", "object-id")
                ]
                text = clean(" ".join(p for p in parts if p)) or reader.r.text(ab)
                lang = ab.get("{http://www.w3.org/XML/1998/namespace}lang", "")
                head = _children(ab, "title")
                abstracts.append(
                    Abstract(
                        text,
                        ab.get("abstract-type", ""),
                        lang,
                        reader.r.text(head[0]) if head else "",
                    )
                )
            elif local_name(ab) in ("kwd", "compound-kwd"):
                keywords.append(clean(all_text(ab, entities=reader.r.entities)))
    sections: list[Section] = []
    for part in root:
        name = local_name(part)
        if name in (
            "body",
            "back",
            "book-body",
            "book-back",
            "book-part",
            "chapter",
            "named-book-part-body",
        ):
            sections.extend(reader.blocks(part, (), "other"))
        elif name in ("sub-article", "response"):
            reader.r.lose(part)
    # Captions in document order: abstracts' floats (graphical abstracts) first, then the rest.
    if meta is not None:
        for ab in each(meta, "abstract", "trans-abstract"):
            reader.floats(ab)
    for part in root:
        name = local_name(part)
        # A sub-article is lost whole (counted above): its floats are not the article's.
        if name and name not in LOST and name not in _FRONT:
            reader.floats(part)
    refs = [_reference(r, reader.r.entities) for r in each(root, "ref")]
    formulas = tuple(Formula(t, n, d) for t, n, d in reader.r.formulas)
    return Document(
        text_format="bits" if is_book else "jats",
        article_type=root.get("article-type", "") or root.get("book-part-type", ""),
        title=title,
        abstracts=tuple(abstracts),
        keywords=tuple(keywords),
        sections=tuple(sections),
        paragraphs=tuple(reader.paragraphs),
        captions=tuple(reader.captions),
        formulas=formulas,
        footnotes=tuple(reader.footnotes),
        references=tuple(refs),
        citations=tuple(reader.citations),
        statements=_statements(root, Renderer(math=math, entities=reader.r.entities)),
        text_loss=as_losses(reader.r),
    )


_ = (BLOCK, OWN_FIELD)  # re-exported names kept for readers that extend the sets
