"""extract_source_metadata: licence / access terms read from body bytes."""

from __future__ import annotations

from xml.sax.saxutils import escape

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litfetch_df import ELSEVIER_XML, JATS_XML, PDF, Blob, File, FileKind, SourceMetadata
from litfetch_df.operations.licence import extract_source_metadata
from litfetch_df.operations.licence_evidence import licence_named_in
from tests.conftest import data_bytes

XLINK = 'xmlns:xlink="http://www.w3.org/1999/xlink"'
ALI = 'xmlns:ali="http://www.niso.org/schemas/ali/1.0/"'


def jats(content: bytes, media_type: str | None = JATS_XML) -> Blob:
    return Blob(File(FileKind.BODY, "test", media_type, "https://x.example/a.xml"), content)


def article(permissions: str, *, body: str = "<p>Text.</p>") -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<article {XLINK} {ALI} article-type="research-article">'
        f"<front><journal-meta><journal-title-group><journal-title>J</journal-title>"
        f"</journal-title-group></journal-meta><article-meta><title-group><article-title>T"
        f"</article-title></title-group>{permissions}</article-meta></front>"
        f"<body>{body}</body></article>"
    ).encode()


def artifact(licence: str | None, access: str | None = None) -> SourceMetadata:
    return SourceMetadata(licence=licence, access=access, basis="artifact")


# -- the four real PMC files --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "PMC3166277_bmc-microbiol_1471-2180-11-174.nxml",
            artifact("http://creativecommons.org/licenses/by/2.0", "open-access"),
        ),
        (
            # Access stated only in custom-meta pmc-prop-open-access (issue 15).
            "PMC13250820_ali-license-ref_supplementary.xml",
            artifact("https://creativecommons.org/licenses/by/4.0/", "open-access"),
        ),
        (
            # Stated only in prose: the CC URL written in the text is reported.
            "PMC5608867_license-prose-only.xml",
            artifact("http://creativecommons.org/licenses/by/4.0/", "open-access"),
        ),
        (
            # Access stated only by PMC's <?properties open_access?> marker (issue 15).
            "PMC2599765_ehp-116-1694_public-domain.nxml",
            artifact("http://creativecommons.org/publicdomain/mark/1.0/", "open-access"),
        ),
    ],
    ids=["href", "ali", "prose", "public-domain"],
)
def test_real_pmc_files(name: str, expected: SourceMetadata) -> None:
    assert extract_source_metadata(jats(data_bytes("jats", name))) == expected


# -- JATS shapes --------------------------------------------------------------------------------


def test_shape_a_href_on_license() -> None:
    body = article(
        '<permissions><license xlink:href="http://creativecommons.org/licenses/by-sa/4.0/" '
        'license-type="open-access"><license-p>Reuse is permitted under CC BY-SA 4.0.'
        "</license-p></license></permissions>"
    )
    assert extract_source_metadata(jats(body)) == artifact(
        "http://creativecommons.org/licenses/by-sa/4.0/", "open-access"
    )


def test_shape_b_ali_ref_beats_license_type() -> None:
    body = article(
        '<permissions><license license-type="open-access">'
        '<ali:license_ref specific-use="textmining" content-type="ccbylicense">https://creativecommons.org/licenses/by/4.0/</ali:license_ref>'
        "<license-p>This article is licensed under a Creative Commons Attribution 4.0 "
        "International License.</license-p></license></permissions>"
    )
    assert extract_source_metadata(jats(body)) == artifact(
        "https://creativecommons.org/licenses/by/4.0/", "open-access"
    )


def test_ali_ref_prefers_vor_or_unqualified() -> None:
    body = article(
        "<permissions><license>"
        '<ali:license_ref specific-use="textmining">https://example.org/tdm</ali:license_ref>'
        '<ali:license_ref specific-use="vor"> https://creativecommons.org/licenses/by-nc/4.0/ '
        "</ali:license_ref></license></permissions>"
    )
    assert extract_source_metadata(jats(body)) == artifact(
        "https://creativecommons.org/licenses/by-nc/4.0/"
    )


def test_shape_c_cc_ext_link_in_prose() -> None:
    body = article(
        '<permissions><license license-type="open-access"><license-p>Distributed under the '
        'terms of the <ext-link ext-link-type="uri" '
        'xlink:href="https://creativecommons.org/licenses/by-nc/4.0/">CC BY-NC 4.0</ext-link>'
        " licence.</license-p></license></permissions>"
    )
    assert extract_source_metadata(jats(body)) == artifact(
        "https://creativecommons.org/licenses/by-nc/4.0/", "open-access"
    )


def test_non_cc_ext_link_does_not_count_as_a_licence_url() -> None:
    body = article(
        '<permissions><license license-type="publisher"><license-p>See <ext-link '
        'xlink:href="https://publisher.example.org/terms">our terms</ext-link>.</license-p>'
        "</license></permissions>"
    )
    assert extract_source_metadata(jats(body)) == artifact("publisher")


def test_license_type_only() -> None:
    body = article('<permissions><license license-type="Open Access"/></permissions>')
    assert extract_source_metadata(jats(body)) == artifact("Open Access", "open-access")


def test_text_only_is_collapsed() -> None:
    body = article(
        "<permissions><license><license-p>\n  All rights\n\treserved;   reuse by\n"
        "  <bold>permission</bold> only.\n</license-p></license></permissions>"
    )
    assert extract_source_metadata(jats(body)) == artifact(
        "All rights reserved; reuse by permission only."
    )


def test_empty_license_is_skipped() -> None:
    body = article(
        "<permissions><license/><license><license-p>   </license-p></license>"
        '<license xlink:href="https://creativecommons.org/publicdomain/zero/1.0/"/></permissions>'
    )
    assert extract_source_metadata(jats(body)) == artifact(
        "https://creativecommons.org/publicdomain/zero/1.0/"
    )


def test_copyright_only_states_no_licence() -> None:
    body = article(
        "<permissions><copyright-statement>© 2026 The Authors</copyright-statement>"
        "<copyright-year>2026</copyright-year></permissions>"
    )
    assert extract_source_metadata(jats(body)) == SourceMetadata()


def test_article_meta_is_read_before_earlier_licences() -> None:
    body = (
        f"<article {XLINK}><front><journal-meta><permissions>"
        '<license xlink:href="https://journal.example.org/licence"/></permissions></journal-meta>'
        "<article-meta><permissions>"
        '<license xlink:href="https://creativecommons.org/licenses/by/4.0/"/></permissions>'
        "</article-meta></front><body/></article>"
    ).encode()
    assert extract_source_metadata(jats(body)) == artifact(
        "https://creativecommons.org/licenses/by/4.0/"
    )


def test_sub_article_licence_never_overrides_the_article() -> None:
    body = article(
        '<permissions><license xlink:href="https://creativecommons.org/licenses/by/4.0/"/>'
        "</permissions>",
        body=(
            "<fig><permissions><license "
            'xlink:href="https://creativecommons.org/licenses/by-nd/4.0/"/></permissions></fig>'
        ),
    )
    assert extract_source_metadata(jats(body)).licence == (
        "https://creativecommons.org/licenses/by/4.0/"
    )


def test_falls_back_to_document_order() -> None:
    body = article(
        "<permissions><copyright-statement>©</copyright-statement></permissions>",
        body=(
            '<sec><permissions><license license-type="open-access" '
            'xlink:href="https://creativecommons.org/licenses/by/3.0/"/></permissions></sec>'
        ),
    )
    assert extract_source_metadata(jats(body)) == artifact(
        "https://creativecommons.org/licenses/by/3.0/", "open-access"
    )


def test_prose_url_trailing_punctuation_is_dropped() -> None:
    body = article(
        '<permissions><license license-type="OpenAccess"><license-p>Licensed under '
        "https://creativecommons.org/licenses/by/4.0/legalcode.</license-p></license></permissions>"
    )
    assert extract_source_metadata(jats(body)).licence == (
        "https://creativecommons.org/licenses/by/4.0/legalcode"
    )


def test_media_type_parameters_are_ignored() -> None:
    body = article('<permissions><license license-type="open-access"/></permissions>')
    got = extract_source_metadata(jats(body, "application/jats+xml; charset=utf-8"))
    assert got == artifact("open-access", "open-access")


# -- BITS book parts ----------------------------------------------------------------------------


def book(part_permissions: str, book_permissions: str, part_body: str = "<p>x</p>") -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<book-part-wrapper {XLINK} dtd-version="2.0">'
        f"<book-meta><book-title-group><book-title>Example Reviews</book-title>"
        f"</book-title-group>{book_permissions}</book-meta>"
        f'<book-part book-part-type="chapter" id="x"><book-part-meta><title-group><title>X</title>'
        f"</title-group>{part_permissions}</book-part-meta><body>{part_body}</body></book-part>"
        f"</book-part-wrapper>"
    ).encode()


BOOK_LICENCE = (
    '<permissions><license license-type="open-access" '
    'xlink:href="https://books.example.org/terms/"><license-p>Book terms.</license-p>'
    "</license></permissions>"
)


def test_book_part_licence_wins_over_book() -> None:
    part = (
        '<permissions><license xlink:href="https://creativecommons.org/licenses/by-nc-nd/4.0/">'
        "<license-p>Part terms.</license-p></license></permissions>"
    )
    # The part states no license-type: its terms are not filled in from the book's.
    assert extract_source_metadata(jats(book(part, BOOK_LICENCE))) == artifact(
        "https://creativecommons.org/licenses/by-nc-nd/4.0/"
    )


def test_book_licence_when_the_part_has_none() -> None:
    part = "<permissions><copyright-statement>©</copyright-statement></permissions>"
    assert extract_source_metadata(jats(book(part, BOOK_LICENCE))) == artifact(
        "https://books.example.org/terms/", "open-access"
    )


def test_book_figure_licences_are_ignored() -> None:
    fig = (
        '<fig><permissions><license xlink:href="https://creativecommons.org/licenses/by/4.0/"/>'
        "</permissions></fig>"
    )
    assert extract_source_metadata(jats(book("", "", part_body=fig))) == SourceMetadata()


# -- Elsevier -----------------------------------------------------------------------------------

ELSEVIER = b"""<full-text-retrieval-response xmlns="http://www.elsevier.com/xml/svapi/article/dtd"
    xmlns:ce="http://www.elsevier.com/xml/common/dtd"
    xmlns:dc="http://purl.org/dc/elements/1.1/"
    xmlns:prism="http://prismstandard.org/namespaces/basic/2.0/">
  <coredata>
    <prism:doi>10.1016/j.example.2026.01.011</prism:doi>
    <openaccess>%s</openaccess>
    <openaccessArticle>true</openaccessArticle>
    <openaccessType>Full</openaccessType>
    %s
  </coredata>
  <originalText/>
</full-text-retrieval-response>"""


def elsevier(openaccess: bytes, licence: bytes) -> Blob:
    return jats(ELSEVIER % (openaccess, licence), ELSEVIER_XML)


def test_elsevier_open_access_licence() -> None:
    blob = elsevier(
        b"1",
        b"<openaccessUserLicense> http://creativecommons.org/licenses/by/4.0/ "
        b"</openaccessUserLicense>",
    )
    assert extract_source_metadata(blob) == artifact(
        "http://creativecommons.org/licenses/by/4.0/", "open-access"
    )


def test_elsevier_flag_only_and_licence_only() -> None:
    assert extract_source_metadata(elsevier(b"true", b"")) == artifact(None, "open-access")
    got = extract_source_metadata(
        elsevier(b"0", b"<openaccessUserLicense>http://x.example/l</openaccessUserLicense>")
    )
    assert got == artifact("http://x.example/l")


def test_elsevier_without_terms_is_empty() -> None:
    blob = elsevier(b"0", b"<openaccessUserLicense>  </openaccessUserLicense>")
    assert extract_source_metadata(blob) == SourceMetadata()


# -- no terms -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "blob",
    [
        jats(b"%PDF-1.7 ...", PDF),
        jats(data_bytes("jats", "PMC2599765_ehp-116-1694_public-domain.nxml"), PDF),
        jats(data_bytes("jats", "PMC2599765_ehp-116-1694_public-domain.nxml"), None),
        jats(data_bytes("jats", "PMC2599765_ehp-116-1694_public-domain.nxml"), "text/plain"),
        jats(b"<article><front><article-meta><permissions><license xlink:href="),
        jats(b""),
        jats(b"<html><body>not xml"),
        jats(b"<article><body><p>No permissions at all.</p></body></article>"),
    ],
    ids=["pdf", "jats-bytes-as-pdf", "no-type", "text", "truncated", "empty", "html", "none"],
)
def test_empty_when_nothing_is_stated(blob: Blob) -> None:
    assert extract_source_metadata(blob) == SourceMetadata()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400), st.sampled_from([JATS_XML, ELSEVIER_XML, PDF]))
def test_never_raises_on_arbitrary_bytes(content: bytes, media_type: str) -> None:
    result = extract_source_metadata(jats(content, media_type))
    assert result.basis in (None, "artifact")


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=80))
def test_licence_text_is_reported_collapsed(text: str) -> None:
    body = article(
        f"<permissions><license><license-p>{escape(text)}</license-p></license></permissions>"
    )
    got = extract_source_metadata(jats(body))
    if not text.split():
        assert got == SourceMetadata()
    elif "creativecommons.org" not in text.lower() and licence_named_in(text) is None:
        # (since issue 15 a licence the text names, such as "CC0", is reported by name)
        assert got.basis == "artifact"
        assert got.licence is not None and got.licence.split() == text.split()
