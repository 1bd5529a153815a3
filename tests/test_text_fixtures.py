"""The text reader against renditions of the same XML that other people produced.

Fixtures: /work/shared/fixtures/text/ (CRAFT corpus, docling, Elsevier OA-STM; see its
PROVENANCE.md for sources and licences). Word multisets are compared, not strings.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from litfetch_df.text import Document, Section, read_text

FIXTURES = Path("/work/shared/fixtures/text")
CRAFT = sorted(p.name.split(".")[0] for p in FIXTURES.glob("*.craft.txt"))
DOCLING = sorted(p.name.split(".")[0] for p in FIXTURES.glob("*.docling.md"))
ELSEVIER = sorted(p.name.split(".")[0] for p in FIXTURES.glob("*.simpletext.txt"))
_WORD = re.compile(r"[^\W\d_]{4,}")

# Documented quirks of the renditions (README): words a rendition adds that are not the XML's prose.
# CRAFT appends "Click here for additional data file." to each supplementary entry and a
# "Figures and Tables" block heading; docling writes "image" comments and pipe-table cells.
_ADDED = {
    "craft": Counter({"click": 10**6, "here": 10**6, "additional": 0, "data": 0, "file": 0, "figures": 1, "tables": 1}),
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
    parts = [doc.title, *(a.text for a in doc.abstracts), doc.body_text, *_titles(doc.sections)]
    for c in doc.captions:
        parts += [c.label, c.caption, *(" ".join(r) for r in c.cells)]
    parts += list(doc.footnotes) + list(doc.keywords)
    return "\n".join(parts)


def recall(truth: Counter[str], got: Counter[str]) -> float:
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
    spans = (FIXTURES / f"{stem}.craft-sections.knowtator.xml").read_text(encoding="utf-8")
    heads = {m.split("\n", 1)[0].strip() for m in re.findall(r"<spannedText>(.*?)</spannedText>", spans, re.S)}
    titles = set(_titles(doc.sections)) | {"Abstract", doc.title}
    wanted = {h for h in heads if len(h) < 80 and not re.match(r"(Figure|Table|Figures)\b", h)}
    xml = (FIXTURES / f"{stem}.nxml").read_text(encoding="utf-8")
    assert len(doc.references) == xml.count("<ref ")
    assert len([c for c in doc.captions if c.kind in ("figure", "table")]) >= xml.count("<fig ") 
    missing = {h for h in wanted if h not in titles and not any(h in t for t in titles)}
    assert len(missing) <= len(wanted) // 4, missing


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
    prose = "\n\n".join(b for i, b in enumerate(blocks) if i not in (1, 2) and "<!-- image -->" not in b)
    assert recall(words(prose), words(everything(doc))) >= 0.99
    headings = {h.strip() for h in re.findall(r"^#{2,4} (.+)$", body, re.M)}
    titles = set(_titles(doc.sections)) | {"Abstract", "Author summary"} | {a.abstract_type for a in doc.abstracts}
    assert not {h for h in headings if h not in titles}
    assert len(doc.references) == len(re.findall(r"^- ", refs, re.M))
    # eLife's sub-articles are not in docling's text, and the reader counts them as lost.
    if "<sub-article" in (FIXTURES / f"{stem}.nxml").read_text(encoding="utf-8"):
        assert any(loss.element == "sub-article" for loss in doc.text_loss)
