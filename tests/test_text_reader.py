"""Rendering rules of the text reader, bad bodies, and a generated-JATS property test."""

from __future__ import annotations

import random
import re
from xml.sax.saxutils import escape

import pytest

from litfetch_df.files import Blob, File, FileKind
from litfetch_df.text import Document, read_text

_JATS = (
    "<article article-type='research-article'><front><article-meta><title-group>"
    "<article-title>T</article-title></title-group>{abstract}</article-meta></front>"
    "<body>{body}</body><back><ref-list>{refs}</ref-list></back></article>"
)


def _doc(body: str, abstract: str = "", refs: str = "", **kw: str) -> Document:
    return read_text(_JATS.format(body=body, abstract=abstract, refs=refs).encode(), **kw)


def test_tails_kept_and_inline_joined_without_spaces() -> None:
    doc = _doc(
        "<sec><title>Introduction</title><p>CO<sub>2</sub> and <itali"
        "c>E. coli</italic>s grow [<xref ref-type='bibr' rid='r1'>1</"
        "xref>].</p></sec>"
    )
    assert doc.paragraphs[0].text == "CO2 and E. colis grow [1]."
    assert doc.sections[0].section_type == "introduction"
    cite = doc.citations[0]
    assert cite.ref_id == "r1" and doc.paragraphs[0].text[cite.start : cite.end] == "1"


def test_blocks_separated_nfc_and_no_ascii_folding() -> None:
    doc = _doc(
        "<p>e\u0301t\u00e9<list><list-item><p>one</p></list-item><list-item><p>two</p></list-item></list></p>"
    )
    assert doc.paragraphs[0].text == "\u00e9t\u00e9 one two"


def test_offsets_point_into_body_text() -> None:
    doc = _doc(
        "<p>first</p><sec><title>Methods</title><p>second</p><sec><title>Sub</title><p>third</p></sec></sec>"
    )
    for p in doc.paragraphs:
        assert doc.body_text[p.start : p.end] == p.text
    assert doc.paragraphs[2].section_path == ("Methods", "Sub")
    assert doc.sections[0].children[0].title == "Sub"


def test_math_tex_then_mathml_then_placeholder() -> None:
    tex = (
        "<p>a <inline-formula><alternatives><tex-math>x^2</tex-math><"
        "mml:math xmlns:mml='http://www.w3.org/1998/Math/MathML'><mml"
        ":mi>y</mml:mi></mml:math></alternatives></inline-formula> b<"
        "/p>"
    )
    assert _doc(tex).paragraphs[0].text == "a x^2 b"
    assert _doc(tex, math="placeholder").paragraphs[0].text == "a [formula] b"
    mml = (
        "<p>a <inline-formula><mml:math xmlns:mml='http://www.w3.org/"
        "1998/Math/MathML'><mml:mi>y</mml:mi></mml:math></inline-form"
        "ula> b</p>"
    )
    assert _doc(mml).paragraphs[0].text == "a y b"
    image = "<p>a <disp-formula><graphic/></disp-formula> b</p>"
    doc = _doc(image)
    assert "[formula]" in doc.paragraphs[0].text and doc.text_loss[0].element == "formula-image"


def test_block_formula_image_only_is_counted() -> None:
    doc = _doc("<sec><title>M</title><p>a</p><disp-formula><graphic/></disp-formula></sec>")
    assert [(x.element, x.count) for x in doc.text_loss] == [("formula-image", 1)]


def test_captions_and_cells_in_own_fields() -> None:
    doc = _doc(
        "<p>See</p><table-wrap><label>Table 1</label><caption><p>Cap<"
        "/p></caption><table><tr><td>c1</td><td>c2</td></tr></table><"
        "/table-wrap>"
    )
    assert [p.text for p in doc.paragraphs] == ["See"]
    assert doc.captions[0].label == "Table 1" and doc.captions[0].caption == "Cap"
    assert doc.captions[0].cells == (("c1", "c2"),)


def test_reference_forms() -> None:
    refs = (
        "<ref id='a'><label>1</label><element-citation><person-group>"
        "<name><surname>Doe</surname><given-names>J</given-names></na"
        "me></person-group>"
        "<article-title>X</article-title><source>J</source><year>2001"
        "</year><pub-id pub-id-type='doi'>10.1/x</pub-id><pub-id pub-"
        "id-type='pmid'>123</pub-id></element-citation></ref>"
        "<ref id='b'><citation-alternatives><mixed-citation>Raw text "
        "2002.</mixed-citation><element-citation><year>2002</year></e"
        "lement-citation></citation-alternatives></ref>"
        "<ref id='c'><citation citation-type='journal'><source>Old</s"
        "ource><year>1999</year></citation></ref>"
    )
    doc = _doc("<p>x</p>", refs=refs)
    a, b, c = doc.references
    assert (a.doi, a.pmid, a.authors, a.year) == ("10.1/x", "123", ("Doe J",), "2001")
    assert b.year == "2002" and b.raw == "Raw text 2002."
    assert c.source == "Old"


def test_several_abstracts_kept_with_type() -> None:
    ab = (
        "<abstract><p>Main.</p></abstract><abstract abstract-type='su"
        "mmary'><title>S</title><p>Plain.</p></abstract>"
    )
    doc = _doc("<p>x</p>", abstract=ab)
    assert doc.abstract == "Main." and doc.abstracts[1].abstract_type == "summary"


def test_sub_article_counted_as_lost() -> None:
    raw = _JATS.format(body="<p>x</p>", abstract="", refs="").replace(
        "</article>", "<sub-article><body><p>reply words</p></body></sub-article></article>"
    )
    doc = read_text(raw.encode())
    assert [(x.element, x.count) for x in doc.text_loss] == [("sub-article", 1)]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"%PDF-1.4 ...", "PDF"),
        (b"<article><p>unclosed", "malformed"),
        (b"", "empty"),
        (b"<html><body>x</body></html>", "not a known text format"),
        (
            b'<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]><article>&x;</article>',
            "entities",
        ),
        (
            b'<!DOCTYPE a [<!ENTITY a "aaaaaaaaaa">'
            b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><article>&b;</article>',
            "entities",
        ),
    ],
)
def test_bad_bodies_get_text_error(body: bytes, reason: str) -> None:
    doc = read_text(body)
    assert reason in doc.text_error and not doc.paragraphs


def test_blob_accepted() -> None:
    blob = Blob(
        File(kind=FileKind.BODY, source="pmc", media_type="application/xml"),
        _JATS.format(body="<p>hi</p>", abstract="", refs="").encode(),
    )
    assert read_text(blob).paragraphs[0].text == "hi"


_INLINE = ("italic", "bold", "sub", "sup", "sc", "underline", "monospace")
_WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa")


def _gen(rng: random.Random, depth: int, tokens: list[str], prefix: str = "") -> str:
    """A random mixed-content fragment; every text node is a fresh token."""

    def tok() -> str:
        t = f"{prefix}{rng.choice(_WORDS)}{len(tokens)}"
        tokens.append(t)
        return t

    out = [tok(), " "]
    for _ in range(rng.randint(0, 3)):
        if depth and rng.random() < 0.6:
            name = rng.choice((*_INLINE, "xref", "unknown-inline"))
            out.append(f"<{name}>{_gen(rng, depth - 1, tokens, prefix)}</{name}>")
        else:
            out.append(escape(" & "))
        out.append(f" {tok()} ")
    return "".join(out)


@pytest.mark.parametrize("seed", range(25))
def test_every_generated_text_node_is_in_output_or_text_loss(seed: int) -> None:
    rng = random.Random(seed)
    tokens: list[str] = []
    secs = []
    for _ in range(rng.randint(1, 3)):
        paras = "".join(f"<p>{_gen(rng, 3, tokens)}</p>" for _ in range(rng.randint(1, 3)))
        inner = (
            f"<sec><title>{_gen(rng, 1, tokens)}</title><p>{_gen(rng, 2, tokens)}</p></sec>"
            if rng.random() < 0.5
            else ""
        )
        cap = (
            f"<fig><label>{_gen(rng, 0, tokens)}</label>"
            f"<caption><p>{_gen(rng, 1, tokens)}</p></caption></fig>"
            if rng.random() < 0.5
            else ""
        )
        secs.append(f"<sec><title>{_gen(rng, 1, tokens)}</title>{paras}{cap}{inner}</sec>")
    lost: list[str] = []
    extra = ""
    if rng.random() < 0.5:
        extra = f"<sub-article><body><p>{_gen(rng, 1, lost, 'lost')}</p></body></sub-article>"
    raw = _JATS.format(body="".join(secs), abstract="", refs="").replace(
        "</article>", extra + "</article>"
    )
    doc = read_text(raw.encode())
    text = "\n".join(
        [doc.body_text, *(s for sec in doc.sections for s in _all_titles(sec))]
        + [c.label + " " + c.caption for c in doc.captions]
    )
    found = set(re.findall(r"[a-z]+\d+", text))
    assert set(tokens) <= found
    assert not (set(lost) & found)
    lost_chars = sum(x.chars for x in doc.text_loss)
    assert lost_chars >= sum(len(t) for t in lost)


def _all_titles(sec: object) -> list[str]:
    from litfetch_df.text import Section

    assert isinstance(sec, Section)
    return [sec.title, *(t for c in sec.children for t in _all_titles(c))]


def test_text_package_imports_no_pandas() -> None:
    import ast
    from pathlib import Path

    import litfetch_df.text as pkg

    for path in Path(pkg.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not {n for n in names if n.split(".")[0] in ("pandas", "httpx")}, path


def test_footnote_marker_is_not_glued_to_its_word() -> None:
    doc = _doc(
        "<sec><title>T</title><p>in different scenarios<xref ref-type='table-fn' rid='fn1'>"
        "<sup>a</sup></xref>. CO<sub>2</sub></p></sec>"
    )
    assert doc.paragraphs[0].text == "in different scenarios a . CO2"


def test_every_float_captioned_wherever_it_sits() -> None:
    body = (
        "<sec><title>S</title>"
        "<p>Text <fig id='f1'><label>Figure 1</label><caption><title>In a paragraph.</title>"
        "<p>Source data <supplementary-material><label>Data 1</label><caption><title>Nested"
        "</title></caption></supplementary-material></p></caption></fig> goes on.</p>"
        "<fig-group><caption><title>Group</title></caption><fig><label>Figure 2</label>"
        "<caption><p>Member</p></caption></fig></fig-group>"
        "<table-wrap-group><caption><p>Tables</p></caption><table-wrap><label>Table 1</label>"
        "<caption><p>One</p></caption><table><tr><td>x</td></tr></table></table-wrap>"
        "</table-wrap-group>"
        "<boxed-text><caption><title>Box title</title><p>Box caption</p></caption>"
        "<p>Box prose</p></boxed-text></sec>"
    )
    raw = _JATS.format(body=body, abstract="", refs="").replace(
        "</back>",
        "</back><floats-group><fig><label>Figure 3</label><caption><p>Floating</p>"
        "</caption></fig></floats-group>",
    )
    doc = read_text(raw.encode())
    got = [(c.kind, c.label, c.caption) for c in doc.captions]
    assert got == [
        ("figure", "Figure 1", "In a paragraph. Source data"),
        ("supplementary", "Data 1", "Nested"),
        ("figure", "", "Group"),
        ("figure", "Figure 2", "Member"),
        ("table", "", "Tables"),
        ("table", "Table 1", "One"),
        ("box", "", "Box title Box caption"),
        ("figure", "Figure 3", "Floating"),
    ]
    # The prose keeps its words, and no caption's words leak into it.
    assert doc.paragraphs[0].text == "Text goes on."
    assert "Box prose" in doc.body_text and "Box title" not in doc.body_text


def test_an_untyped_subsection_takes_its_parents_type() -> None:
    doc = _doc(
        "<sec sec-type='methods'><title>Methods</title><sec><title>Mice</title><p>m</p></sec>"
        "<sec><title>Statistical analysis</title><p>s</p></sec></sec>"
        "<sec><title>Outlook</title><p>o</p></sec>"
    )
    assert [c.section_type for c in doc.sections[0].children] == ["methods", "methods"]
    assert doc.sections[1].section_type == "other"
    assert [p.section_type for p in doc.paragraphs] == ["methods", "methods", "other"]


def test_a_sub_articles_floats_are_not_the_articles() -> None:
    raw = _JATS.format(body="<p>x</p>", abstract="", refs="").replace(
        "</article>",
        "<sub-article><body><fig><caption><p>Reply figure</p></caption></fig></body>"
        "</sub-article></article>",
    )
    doc = read_text(raw.encode())
    assert doc.captions == () and [x.element for x in doc.text_loss] == ["sub-article"]


_ELSEVIER = (
    "<doc xmlns:ce='http://www.elsevier.com/xml/common/dtd'"
    " xmlns:ja='http://www.elsevier.com/xml/ja/dtd'><ja:article><ja:head>"
    "<ce:title>T</ce:title></ja:head><ja:body><ce:sections><ce:section>"
    "<ce:section-title>Introduction</ce:section-title>{body}</ce:section></ce:sections>"
    "</ja:body>{floats}</ja:article></doc>"
)


def test_an_elsevier_box_in_a_paragraph_is_rendered_after_it_and_a_floating_one_counted() -> None:
    box = (
        "<ce:textbox id='b1'><ce:textbox-body><ce:sections><ce:para>Boxed words "
        "<ce:figure id='f1'><ce:label>Fig. 1</ce:label><ce:caption><ce:simple-para>"
        "In the box</ce:simple-para></ce:caption></ce:figure>here.</ce:para></ce:sections>"
        "</ce:textbox-body></ce:textbox>"
    )
    floating = (
        "<ce:floats><ce:textbox id='b2'><ce:textbox-body><ce:sections><ce:para>Afloat"
        "</ce:para></ce:sections></ce:textbox-body></ce:textbox></ce:floats>"
    )
    body = f"<ce:para>Before {box}after.</ce:para><ce:para>Next.</ce:para>"
    doc = read_text(_ELSEVIER.format(body=body, floats=floating).encode())
    assert doc.text_format == "elsevier" and not doc.text_error
    # The box is its own paragraph right after the one it sits in, not glued into it.
    assert [p.text for p in doc.paragraphs] == ["Before after.", "Boxed words here.", "Next."]
    assert all(p.section_path == ("Introduction",) for p in doc.paragraphs)
    assert [(c.kind, c.label, c.caption) for c in doc.captions] == [
        ("figure", "Fig. 1", "In the box")
    ]
    assert {(x.element, x.count, x.chars) for x in doc.text_loss} == {("textbox", 1, 6)}


def test_a_formula_holding_only_a_processing_instruction_is_counted_not_a_crash() -> None:
    # A typesetter's PI alone in a formula: nothing to render, and not an image either.
    body = (
        "<sec><title>M</title><p>a <inline-formula><?xpp formula?></inline-formula> b</p>"
        "<disp-formula id='e1'><?xpp display?><label>(1)</label></disp-formula></sec>"
    )
    # the second body holds an entity reference (an external DTD's), so text is not
    # gathered in C: both ways of reading a formula's text meet the PI
    dtd = '<!DOCTYPE article PUBLIC "-//NLM//DTD JATS 1.3//EN" "JATS-archivearticle1.dtd">'
    for head, last in (("", ""), (dtd, "<p>x &agr;</p>")):
        xml = head + _JATS.format(body=body + last, abstract="", refs="")
        doc = read_text(xml.encode())
        assert not doc.text_error
        assert doc.paragraphs[0].text == "a [formula] b"
        assert ("formula-empty", 2) in [(x.element, x.count) for x in doc.text_loss]
        assert [f.notation for f in doc.formulas] == ["placeholder", "placeholder"]


def test_a_processing_instruction_in_an_elsevier_reference_is_read_past() -> None:
    refs = (
        "<ce:bibliography><ce:bibliography-sec><ce:bib-reference id='r1'>"
        "<ce:label>[1]</ce:label><?xpp ref?><ce:other-ref><ce:textref>A. Author, A paper, "
        "2001.</ce:textref></ce:other-ref></ce:bib-reference></ce:bibliography-sec>"
        "</ce:bibliography>"
    )
    xml = _ELSEVIER.format(body="<ce:para>Text.</ce:para>", floats="").replace(
        "</ja:body>", f"</ja:body><ja:tail>{refs}</ja:tail>"
    )
    doc = read_text(xml.encode())
    assert not doc.text_error
    assert [(r.label, r.raw) for r in doc.references] == [("[1]", "A. Author, A paper, 2001.")]
