"""Each fast path of the text reader gives what the general path it short-cuts gives.

The fast paths (text gathered in C, whitespace collapsed in place, citation offsets by
arithmetic, leaf ``<xref>`` read in place, cells and names read by plain child loops,
memoised section types) are checked against the general code on documents with inline
markup, tails, CDATA, processing instructions, character and entity references and
nested elements.
"""

from __future__ import annotations

import random
import sys

import pytest
from lxml import etree

from litfetch_df.safexml.parse import XmlError, parse_xml
from litfetch_df.text import read_text, section_type
from litfetch_df.text import sections as sections_module
from litfetch_df.text.elsevier import _author
from litfetch_df.text.render import (
    Renderer,
    _collapse,
    all_text,
    clean,
    first,
    has_entity_refs,
    land,
    land_by_pieces,
    strings,
)

_MIXED = (
    "<article><body><sec><title>T<italic>i</italic>tle</title>"
    "<p>CO<sub>2</sub> and <bold>E.\u00a0<italic>coli</italic></bold>s<?pi not text?> grow"
    "<![CDATA[ <raw> ]]>tail&#160;&#x2009;x<unknown>u<sup>n</sup>k</unknown>\n\t end</p>"
    "<p>caf\u0065\u0301 <xref ref-type='bibr' rid='r1'>1</xref>, "
    "<xref rid='r2 r3'><sup>2</sup></xref><xref ref-type='table-fn' rid='t1'>a</xref>.</p>"
    "</sec></body><back><ref-list><ref id='r1'><label>1</label><mixed-citation>"
    "<person-group><name><surname>Sm<italic>i</italic>th</surname><given-names>J</given-names>"
    "</name></person-group> <article-title>A <?pi x?>title</article-title>"
    "<source>S<![CDATA[rc]]></source></mixed-citation></ref></ref-list></back></article>"
)


def _elements(root: etree._Element) -> list[etree._Element]:
    return [e for e in root.iter() if isinstance(e.tag, str)]


def test_text_gathered_in_c_is_itertexts_without_entity_references() -> None:
    root = parse_xml(_MIXED.encode())
    assert not has_entity_refs(root)
    for el in _elements(root):
        assert all_text(el, entities=False) == all_text(el)
        assert strings(el, entities=False) == strings(el)


def test_only_a_body_with_a_doctype_can_hold_entity_references() -> None:
    with pytest.raises(XmlError, match="not defined"):
        parse_xml(b"<article><p>a&nbsp;b</p></article>")
    assert not has_entity_refs(parse_xml(b"<!DOCTYPE article SYSTEM 'j.dtd'><article/>"))


def test_a_body_with_entity_references_keeps_the_general_path() -> None:
    # An external DTD that is not loaded leaves &nbsp; as an entity-reference node:
    # itertext() yields it as "&nbsp;", the C gatherers skip it, so they must not be used.
    body = (
        "<?xml version='1.0'?><!DOCTYPE article SYSTEM 'jats.dtd'>"
        "<article><body><p>a&nbsp;b</p></body><back><ref-list><ref id='r1'>"
        "<mixed-citation>x&nbsp;y</mixed-citation></ref></ref-list></back></article>"
    )
    root = parse_xml(body.encode())
    assert has_entity_refs(root)
    cit = first(root, "mixed-citation")
    assert cit is not None
    assert all_text(cit) == "x&nbsp;y" != all_text(cit, entities=False)
    doc = read_text(body.encode())
    assert doc.references[0].raw == "x &nbsp; y"
    assert doc.paragraphs[0].text == "ab"  # the walk renders no entity's text


_WHITESPACE = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]


def test_every_whitespace_character_but_the_space_is_unprintable() -> None:
    # What the in-place collapse relies on: a printable string's only whitespace is " ".
    assert [c for c in _WHITESPACE if c.isprintable()] == [" "]


@pytest.mark.parametrize("seed", range(20))
def test_collapse_is_split_and_join(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = ["a", "b", "é", "\u0301", "ﬁ", "\u200b", "\xad", "  ", " ", *_WHITESPACE]
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert _collapse(text) == " ".join(text.split())
        assert clean(text) == clean(text + " ")


@pytest.mark.parametrize("seed", range(20))
def test_citation_offsets_by_arithmetic_are_the_piecewise_ones(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(200):
        words = [rng.choice(["a", "bc", "déf", "[1]", "x-y"]) for _ in range(rng.randint(0, 6))]
        raw = " ".join(words)
        if raw:  # a leading and a trailing space, or neither (never two in a row)
            raw = rng.choice(["", " "]) + raw + rng.choice(["", " "])
        cuts = sorted(rng.randint(0, len(raw) + 2) for _ in range(4))
        cites = [("r1", cuts[0], cuts[1]), ("r2", cuts[2], cuts[3]), ("r3", cuts[1], cuts[1])]
        end = len(_collapse(raw))
        assert "  " not in raw and raw.isprintable()
        assert land(raw, cites, end) == land_by_pieces(raw, cites, end)


@pytest.mark.parametrize(
    "xref",
    [
        "<xref ref-type='bibr' rid='r1'>{}</xref>",
        "<xref rid='r1 r2'>{}</xref>",
        "<xref refid='r3'>{}</xref>",
        "<xref ref-type='fig' rid='f1'>{}</xref>",
        "<xref ref-type='table-fn' rid='t1'>{}</xref>",
        "<xref ref-type='fn' rid='n1'>{}</xref>",
        "<xref ref-type='bibr'>{}</xref>",
        "<xref ref-type='bibr' rid='r1'/>",
    ],
)
def test_a_leaf_xref_read_in_place_is_the_full_walks(xref: str) -> None:
    # <xref>1</xref> takes the in-place path; <xref><named-content>1</named-content></xref>
    # (the same text, one level down) takes the full walk.
    def render(inner: str) -> tuple[str, list[tuple[str, int, int]]]:
        p = etree.fromstring(
            f"<p>see\n {xref.format(inner)}  and{xref.format(inner)}, x {xref.format(inner)}</p>"
        )
        r = Renderer()
        return r.text(p), r.citations

    leaf, nested = render("1"), render("<named-content>1</named-content>")
    assert leaf == nested


def _old_author(a: etree._Element) -> str:
    parts = (clean(all_text(x)) if x is not None else "" for x in (first(a, "surname"),))
    given = first(a, "given-name")
    return " ".join(p for p in (*parts, clean(all_text(given)) if given is not None else "") if p)


@pytest.mark.parametrize(
    "author",
    [
        "<author><given-name>J.</given-name><surname>Smith</surname></author>",
        "<author><surname>A</surname><surname>B</surname><given-name>C</given-name></author>",
        "<author><given-name>J</given-name><?pi x?><surname>S</surname></author>",
        "<author><x><surname>Deep</surname></x><surname>Shallow</surname></author>",
        "<author><surname>S<italic>m</italic></surname><given-name>G</given-name></author>",
        "<author/>",
    ],
)
def test_an_elsevier_author_read_from_leaf_children_is_the_first_of_each(author: str) -> None:
    a = etree.fromstring(author)
    assert _author(a, True) == _author(a, False) == _old_author(a)


def test_table_cells_read_in_place_are_their_cleaned_text() -> None:
    rows = (
        "<tr><td>a  b</td><th>caf\u0065\u0301</th><td/><td>x<sup>2</sup> y</td>"
        "<?pi z?><td>\u00a0n\u2009m\n</td><other>no</other></tr><tr/>"
    )
    body = f"<article><body><table-wrap><table>{rows}</table></table-wrap></body></article>"
    doc = read_text(body.encode())
    root = etree.fromstring(body)
    want = tuple(
        tuple(clean(all_text(c)) for c in tr if isinstance(c.tag, str) and c.tag in ("td", "th"))
        for tr in root.iter("tr")
    )
    assert doc.captions[0].cells == want
    assert want[0] == ("a b", "café", "", "x2 y", "n m")


def test_memoised_section_types_are_the_rules() -> None:
    titles = ["Materials and Methods", "Results", "", "Data availability", "Outlook"]
    sections_module._matching.cache_clear()
    first_pass = [section_type(st, t) for st in ("", "methods", "intro|background") for t in titles]
    again = [section_type(st, t) for st in ("", "methods", "intro|background") for t in titles]
    assert first_pass == again
    assert first_pass[:5] == ["methods", "results", "other", "data availability", "other"]
    assert set(first_pass[5:10]) == {"methods"}
    assert set(first_pass[10:]) == {"introduction"}


def test_elsevier_floats_in_a_paragraph_and_its_boxes_in_document_order() -> None:
    ns = (
        "xmlns='http://www.elsevier.com/xml/ja/dtd' "
        "xmlns:ce='http://www.elsevier.com/xml/common/dtd'"
    )
    fig = (
        "<ce:figure><ce:label>{0}</ce:label><ce:caption><ce:simple-para>{0} cap"
        "</ce:simple-para></ce:caption>{1}</ce:figure>"
    )
    body = (
        f"<article {ns}><body><ce:sections><ce:section><ce:section-title>S</ce:section-title>"
        "<ce:para>p1 " + fig.format("F1", fig.format("F2", "")) + " mid "
        "<ce:textbox><ce:textbox-body><ce:sections><ce:para>box "
        + fig.format("F3", "")
        + "</ce:para></ce:sections></ce:textbox-body></ce:textbox> <ce:italic>"
        + fig.format("F4", "")
        + "</ce:italic> end</ce:para></ce:section></ce:sections></body></article>"
    )
    doc = read_text(body.encode())
    assert [c.label for c in doc.captions] == ["F1", "F2", "F4", "F3"]
    assert [p.text for p in doc.paragraphs] == ["p1 mid end", "box"]
