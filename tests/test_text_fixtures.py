"""The text reader against renditions of the same XML that other people produced.

Fixtures: /work/shared/fixtures/text/ (CRAFT corpus, docling, Elsevier OA-STM; see its
PROVENANCE.md for sources and licences). Word multisets are compared, not strings.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from lxml import etree

from litfetch_df.text import Document, Section, read_text

FIXTURES = Path("/work/shared/fixtures/text")
CRAFT = sorted(p.name.removesuffix(".craft.txt") for p in FIXTURES.glob("*.craft.txt"))
DOCLING = sorted(p.name.removesuffix(".docling.md") for p in FIXTURES.glob("*.docling.md"))
ELSEVIER = sorted(p.name.removesuffix(".simpletext.txt") for p in FIXTURES.glob("*.simpletext.txt"))
_WORD = re.compile(r"[^\W\d_]{4,}")

# Documented quirks of the renditions (README): words a rendition adds that are not the XML's prose.
# CRAFT appends "Click here for additional data file." to each supplementary entry and a
# "Figures and Tables" block heading; docling writes "image" comments and pipe-table cells.
_ADDED = {
    "craft": Counter(
        {
            "click": 10**6,
            "here": 10**6,
            "additional": 0,
            "data": 0,
            "file": 0,
            "figures": 1,
            "tables": 1,
        }
    ),
}


def words(text: str) -> Counter[str]:
    """Lower-case tokens of four or more letters."""
    return Counter(w.lower() for w in _WORD.findall(text))


def _titles(sections: tuple[Section, ...]) -> list[str]:
    out: list[str] = []
    for s in sections:
        out.append(s.title)
        out.extend(_titles(s.children))
    return out


def everything(doc: Document) -> str:
    """All text the document holds, for recall (prose, titles, captions, cells, footnotes, refs)."""
    parts = [
        doc.title,
        *(a.title + "\n" + a.text for a in doc.abstracts),
        doc.body_text,
        *_titles(doc.sections),
    ]
    for c in doc.captions:
        parts += [c.label, c.caption, *(" ".join(r) for r in c.cells)]
    parts += list(doc.footnotes) + list(doc.keywords)
    return "\n".join(parts)


def craft_section_heads(stem: str) -> set[str]:
    """The first line of each CRAFT ``section`` span (typography spans are left out)."""
    root = etree.parse(str(FIXTURES / f"{stem}.craft-sections.knowtator.xml")).getroot()
    sections = {
        cm.get("id")
        for cm in root.iter("classMention")
        if cm.find("mentionClass").get("id") == "section"
    }
    heads = set()
    for ann in root.iter("annotation"):
        if ann.find("mention").get("id") in sections:
            heads.add((ann.findtext("spannedText") or "").split("\n", 1)[0].strip())
    return heads


def _unspan(line: str) -> str:
    """Quirk (docling): a spanning table cell is repeated in each column; keep it once."""
    if not line.startswith("|"):
        return line
    cells = [c.strip() for c in line.strip("|").split("|")]
    return " | ".join(c for i, c in enumerate(cells) if i == 0 or c != cells[i - 1])


def recall(truth: Counter[str], got: Counter[str]) -> float:
    # Quirk (CRAFT): a table footnote's one-letter label is glued to its first word
    # ("aMedian"); such a token counts as found when the word without the letter is.
    for w in [w for w in truth if w not in got and len(w) > 4 and w[1:] in got]:
        truth[w[1:]] += truth.pop(w)
    total = sum(truth.values())
    return sum(min(n, got[w]) for w, n in truth.items()) / total if total else 1.0


def _read(name: str) -> Document:
    return read_text((FIXTURES / name).read_bytes())


@pytest.mark.parametrize("stem", CRAFT)
def test_craft_word_recall_titles_references_captions(stem: str) -> None:
    doc = _read(f"{stem}.nxml")
    assert not doc.text_error
    truth = words((FIXTURES / f"{stem}.craft.txt").read_text(encoding="utf-8"))
    truth -= _ADDED["craft"]
    assert recall(truth, words(everything(doc))) >= 0.99
    # Every top-level CRAFT section span starts with its heading line.
    heads = craft_section_heads(stem)
    titles = set(_titles(doc.sections)) | {"Abstract", doc.title} | {a.title for a in doc.abstracts}
    # Quirk: CRAFT heads the back-matter footnotes "Footnotes"; the XML's <fn-group> has no title.
    if doc.footnotes:
        titles.add("Footnotes")
    # Quirk: CRAFT's caption spans and its "Figures and Tables" block are not sections of the XML.
    wanted = {h for h in heads if not re.match(r"(Figure|Table|Figures)\b", h)}
    xml = (FIXTURES / f"{stem}.nxml").read_text(encoding="utf-8")
    assert len(doc.references) == xml.count("<ref ")
    assert len([c for c in doc.captions if c.kind in ("figure", "table")]) >= xml.count("<fig ")
    missing = {h for h in wanted if h not in titles}
    assert not missing
    # CRAFT has all the text except image-only display formulas (README): text_loss says so.
    if "<disp-formula" in xml and "<mml:math" not in xml and "<tex-math" not in xml:
        assert {x.element for x in doc.text_loss} == {"formula-image"}
    else:
        assert not doc.text_loss


@pytest.mark.parametrize("stem", ELSEVIER)
def test_elsevier_word_recall_and_references(stem: str) -> None:
    doc = _read(f"{stem}.elsevier.xml")
    assert doc.text_format == "elsevier" and not doc.text_error
    truth = words((FIXTURES / f"{stem}.simpletext.txt").read_text(encoding="utf-8"))
    assert recall(truth, words(everything(doc))) >= 0.99
    xml = (FIXTURES / f"{stem}.elsevier.xml").read_text(encoding="utf-8")
    assert len(doc.references) == len(re.findall(r"<ce:bib-reference\b", xml))


@pytest.mark.parametrize("stem", DOCLING)
def test_docling_word_recall_titles_references(stem: str) -> None:
    doc = _read(f"{stem}.nxml")
    md = (FIXTURES / f"{stem}.docling.md").read_text(encoding="utf-8")
    body, _, refs = md.partition("\n## References")
    # Quirk: docling's author and affiliation paragraphs (2nd and 3rd blocks) are front matter.
    blocks = body.split("\n\n")
    prose = "\n\n".join(
        b for i, b in enumerate(blocks) if i not in (1, 2) and "<!-- image -->" not in b
    )
    truth = words("\n".join(_unspan(line) for line in prose.splitlines()))
    # Quirk: docling heads an untitled abstract "Abstract"; the XML has no such word.
    truth["abstract"] -= sum(1 for a in doc.abstracts if not a.title)
    # Quirk: docling heads an untitled <ack> "Acknowledgments"; the reader (as CRAFT) says
    # "Acknowledgements".
    untitled_ack = "Acknowledgements" in _titles(doc.sections)
    truth["acknowledgments"] -= int(untitled_ack)
    assert recall(+truth, words(everything(doc))) >= 0.99
    headings = {h.strip() for h in re.findall(r"^#{2,4} (.+)$", body, re.M)}
    titles = set(_titles(doc.sections)) | {"Abstract"} | {a.title for a in doc.abstracts}
    # Quirk: docling turns PLOS front-matter author notes (competing interests, contributions,
    # ethics) into headings; they are not sections of the XML's body or back.
    titles |= {"Author contributions", "Competing interests", "Ethics"}
    if untitled_ack:
        titles.add("Acknowledgments")
    assert not {h for h in headings if h not in titles}
    assert len(doc.references) == len(re.findall(r"^- ", refs, re.M))
    # eLife's sub-articles are not in docling's text, and the reader counts them as lost.
    if "<sub-article" in (FIXTURES / f"{stem}.nxml").read_text(encoding="utf-8"):
        assert any(loss.element == "sub-article" for loss in doc.text_loss)


ALL_XML = sorted([f"{s}.nxml" for s in CRAFT + DOCLING] + [f"{s}.elsevier.xml" for s in ELSEVIER])
_LOST_SUBTREES = ("sub-article", "response")


def xml_captions(name: str) -> list[str]:
    """Each caption's words as the XML has them, counted here without the reader.

    A caption inside a sub-article is not counted (the reader counts the sub-article as
    lost); a caption nested in another caption is its own, so its words are taken out of
    the outer one.
    """
    root = etree.parse(
        str(FIXTURES / name), etree.XMLParser(load_dtd=False, no_network=True)
    ).getroot()
    out = []
    for el in root.iter("{*}caption"):
        if any(etree.QName(a).localname in _LOST_SUBTREES for a in el.iterancestors()):
            continue
        nested = [c for c in el.iter("{*}caption") if c is not el]
        text = " ".join(el.itertext())
        for inner in nested:
            # The whole float the inner caption belongs to (label, caption, media) is its own.
            float_el = inner.getparent()
            text = (
                text.replace(" ".join(float_el.itertext()), " ", 1)
                if float_el is not None
                else text
            )
        out.append(text)
    return out


@pytest.mark.parametrize("name", ALL_XML)
def test_every_caption_present(name: str) -> None:
    doc = _read(name)
    want = xml_captions(name)
    got = [c for c in doc.captions if c.caption]
    assert len(got) == len(want)
    # Every caption's words are in the reader's caption (and label) texts, none lost.
    truth = words(" ".join(want))
    found = words(" ".join(f"{c.label} {c.caption}" for c in doc.captions))
    assert recall(truth, found) == 1.0


@pytest.mark.parametrize("name", ALL_XML)
def test_text_loss_says_what_the_output_lacks(name: str) -> None:
    doc = _read(name)
    xml = (FIXTURES / name).read_text(encoding="utf-8")
    lost = {x.element for x in doc.text_loss}
    if "<sub-article" in xml:
        # eLife's decision letter and author response are not rendered: said so.
        assert lost == {"sub-article"}
    elif "<disp-formula" in xml and "<mml:math" not in xml and "<tex-math" not in xml:
        assert lost == {"formula-image"}
    else:
        # Everything else in these articles is rendered, so nothing is reported lost.
        assert not lost
