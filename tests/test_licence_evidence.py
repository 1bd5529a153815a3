"""Licence evidence ranked, and access from every place a document states it (issue 15)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from litfetch_df import ELSEVIER_XML, JATS_XML, Blob, File, FileKind, SourceMetadata
from litfetch_df.frame.engine.licence_family import licence_family
from litfetch_df.operations import licence as licence_module
from litfetch_df.operations.licence import extract_source_metadata, licence_evidence
from litfetch_df.operations.licence_evidence import (
    LicenceClue,
    is_open_licence_url,
    licence_named_in,
    rank_licence_clues,
)
from litfetch_df.safexml.parse import parse_xml
from tests.conftest import data_bytes
from tests.test_licence import ALI, XLINK, article, artifact, jats

# -- the shapes the issue names -------------------------------------------------------------------

FRONTIERS = (
    "<permissions><copyright-statement>Copyright © 2012 Doe.</copyright-statement>"
    '<license license-type="open-access" xlink:href="http://www.frontiersin.org/licenseagreement">'
    "<license-p>This is an open-access article distributed under the terms of the "
    '<uri xlink:href="http://creativecommons.org/licenses/by-nc/3.0/">Creative Commons '
    "Attribution Non Commercial License</uri>, which permits non-commercial use, distribution, "
    "and reproduction in other forums, provided the original authors and source are credited."
    "</license-p></license></permissions>"
)


def test_frontiers_cc_uri_in_the_text_beats_the_publisher_agreement() -> None:
    evidence = licence_evidence(jats(article(FRONTIERS)))
    assert evidence.licence == "http://creativecommons.org/licenses/by-nc/3.0/"
    assert licence_family(evidence.licence) == "cc-by-nc"
    # The agreement is kept as evidence, ranked below the licence it grants.
    values = [clue.value for clue in evidence.clues]
    assert "http://www.frontiersin.org/licenseagreement" in values
    assert values.index("http://www.frontiersin.org/licenseagreement") > 0
    assert evidence.access == "open-access"


def test_a_uri_given_only_as_text_counts() -> None:
    body = article(
        "<permissions><license><license-p>Licensed under "
        "<uri>https://creativecommons.org/licenses/by-sa/4.0/</uri>.</license-p></license>"
        "</permissions>"
    )
    assert extract_source_metadata(jats(body)).licence == (
        "https://creativecommons.org/licenses/by-sa/4.0/"
    )


def test_a_licence_named_in_the_text_beats_the_generic_flag() -> None:
    body = article(
        '<permissions><license license-type="open-access"><license-p>This is an open access '
        "article distributed under the terms of the Creative Commons Attribution License, which "
        "permits unrestricted use, distribution, and reproduction in any medium."
        "</license-p></license></permissions>"
    )
    got = extract_source_metadata(jats(body))
    assert got == artifact("CC BY", "open-access")
    assert licence_family(got.licence) == "cc-by"
    # The raw text stays available beside the name drawn from it.
    text = licence_evidence(jats(body)).text
    assert text is not None and text.startswith("This is an open access article")


def test_a_named_licence_beats_a_publisher_url_but_not_a_cc_url() -> None:
    named = "Creative Commons Attribution-NonCommercial-NoDerivatives 4.0 International License"
    publisher = article(
        '<permissions><license xlink:href="https://publisher.example.org/oa-terms">'
        f"<license-p>Published under a {named}.</license-p></license></permissions>"
    )
    assert extract_source_metadata(jats(publisher)).licence == "CC BY-NC-ND 4.0"
    cc = article(
        '<permissions><license xlink:href="https://creativecommons.org/licenses/by-nc-nd/4.0/">'
        f"<license-p>Published under a {named}.</license-p></license></permissions>"
    )
    assert extract_source_metadata(jats(cc)).licence == (
        "https://creativecommons.org/licenses/by-nc-nd/4.0/"
    )


def test_custom_meta_states_access_when_license_type_is_absent() -> None:
    body = (
        f'<?xml version="1.0"?><article {XLINK} {ALI}><front><article-meta>'
        '<permissions><license><ali:license_ref specific-use="textmining" '
        'content-type="ccbylicense">https://creativecommons.org/licenses/by/4.0/</ali:license_ref>'
        "<license-p>This article is licensed under a Creative Commons licence.</license-p>"
        "</license></permissions><custom-meta-group>"
        "<custom-meta><meta-name>pmc-status-live</meta-name><meta-value>yes</meta-value>"
        "</custom-meta><custom-meta><meta-name>pmc-prop-open-access</meta-name>"
        "<meta-value>yes</meta-value></custom-meta></custom-meta-group></article-meta></front>"
        "<body><p>x</p></body></article>"
    ).encode()
    evidence = licence_evidence(jats(body))
    assert evidence.access == "open-access"
    assert evidence.access_where == "custom-meta pmc-prop-open-access"
    assert extract_source_metadata(jats(body)) == artifact(
        "https://creativecommons.org/licenses/by/4.0/", "open-access"
    )


def test_custom_meta_saying_no_states_nothing() -> None:
    body = article(
        "<permissions><copyright-statement>©</copyright-statement></permissions>"
        "<custom-meta-group><custom-meta><meta-name>pmc-prop-open-access</meta-name>"
        "<meta-value>no</meta-value></custom-meta></custom-meta-group>"
    )
    assert extract_source_metadata(jats(body)) == SourceMetadata()


def test_pmc_properties_marker_states_access_alone() -> None:
    body = (
        f"<article {XLINK}><?properties open_access?><front><article-meta>"
        "<permissions><copyright-statement>©</copyright-statement></permissions>"
        "</article-meta></front><body/></article>"
    ).encode()
    assert extract_source_metadata(jats(body)) == artifact(None, "open-access")
    manuscript = body.replace(b"open_access", b"manuscript")
    assert extract_source_metadata(jats(manuscript)) == SourceMetadata()


# -- naming a licence in prose --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("distributed under the Creative Commons Attribution License, which permits", "CC BY"),
        ("under a Creative Commons Attribution 4.0 International License", "CC BY 4.0"),
        ("the Creative Commons Attribution Non Commercial License, which", "CC BY-NC"),
        (
            "Creative Commons Attribution-NonCommercial-NoDerivs 3.0 Unported License",
            "CC BY-NC-ND 3.0",
        ),
        ("a Creative Commons Attribution-ShareAlike 4.0 licence", "CC BY-SA 4.0"),
        ("Creative Commons Attribution-NonCommercial-ShareAlike 2.5 licence", "CC BY-NC-SA 2.5"),
        ("Open access under the CC BY-NC-ND license.", "CC BY-NC-ND"),
        ("published under a CC-BY 4.0 licence", "CC BY 4.0"),
        ("Creative Commons CC0 1.0 Universal public domain dedication", "CC0 1.0"),
        ("The Creative Commons Public Domain Dedication waiver applies.", "CC0"),
        (
            "This article is a US Government work and is in the public domain in the USA.",
            "public domain",
        ),
        ("This article is distributed under a Creative Commons licence.", None),
        ("© 2020 Example Press. This work is not in the public domain.", None),
        ("All rights reserved. Version 2.0 of the agreement.", None),
    ],
)
def test_licence_named_in(text: str, named: str | None) -> None:
    assert licence_named_in(text) == named


@pytest.mark.parametrize(
    ("named", "family"),
    [
        ("CC BY 4.0", "cc-by"),
        ("CC BY-NC-ND 3.0", "cc-by-nc-nd"),
        ("CC BY-SA", "cc-by-sa"),
        ("CC0 1.0", "cc0"),
        ("public domain", "public-domain"),
        ("CC BY-NC-SA 2.5", "cc-by-nc-sa"),
    ],
)
def test_every_name_has_its_family(named: str, family: str) -> None:
    assert licence_family(named) == family


def test_ranking_puts_open_urls_then_names_then_other_urls_then_flags_then_text() -> None:
    clues = [
        LicenceClue("All rights reserved", "license-p"),
        LicenceClue("open-access", "license-type"),
        LicenceClue("https://publisher.example.org/terms", "xlink:href"),
        LicenceClue("CC BY 4.0", "license-p name"),
        LicenceClue("https://creativecommons.org/licenses/by/4.0/", "ali:license_ref"),
        LicenceClue("open-access", "license-type"),
    ]
    ranked = rank_licence_clues(clues)
    assert [c.where for c in ranked] == [
        "ali:license_ref",
        "license-p name",
        "xlink:href",
        "license-type",
        "license-p",
    ]


@pytest.mark.parametrize(
    ("url", "is_open"),
    [
        ("http://creativecommons.org/licenses/by/2.0", True),
        ("https://creativecommons.org/publicdomain/zero/1.0/", True),
        ("https://www.creativecommons.org/licences/by-nc/4.0/", True),
        ("https://creativecommons.org/about/", False),
        ("http://www.frontiersin.org/licenseagreement", False),
        ("https://example.org/?u=http://creativecommons.org/licenses/by/4.0/", False),
    ],
)
def test_is_open_licence_url(url: str, is_open: bool) -> None:
    assert is_open_licence_url(url) is is_open


# -- every JATS fixture: family and version -------------------------------------------------------

FIXTURES = {
    "PMC3166277_bmc-microbiol_1471-2180-11-174.nxml": ("cc-by", "2.0", "license-type"),
    "PMC13250820_ali-license-ref_supplementary.xml": (
        "cc-by",
        "4.0",
        "custom-meta pmc-prop-open-access",
    ),
    "PMC5608867_license-prose-only.xml": ("cc-by", "4.0", "license-type"),
    "PMC2599765_ehp-116-1694_public-domain.nxml": (
        "public-domain",
        "1.0",
        "<?properties open_access?>",
    ),
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_every_jats_fixture_has_the_right_family_version_and_access(name: str) -> None:
    family, version, access_where = FIXTURES[name]
    evidence = licence_evidence(jats(data_bytes("jats", name)))
    assert licence_family(evidence.licence) == family
    assert evidence.licence is not None
    assert re.search(rf"/{re.escape(version)}/?$", evidence.licence)
    assert (evidence.access, evidence.access_where) == ("open-access", access_where)
    assert evidence.text  # every fixture carries licence text


# -- reading only the front matter ----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_front_matter_reader_agrees_with_a_whole_parse(name: str) -> None:
    content = data_bytes("jats", name)
    whole = licence_module._jats_evidence(parse_xml(content))
    assert licence_evidence(jats(content)) == whole


def test_the_body_after_the_front_matter_is_not_read() -> None:
    # Broken past </front>: a whole parse would refuse it, the front matter is enough.
    body = article(FRONTIERS).replace(b"</body>", b"</bod")
    assert licence_evidence(jats(body)).licence == "http://creativecommons.org/licenses/by-nc/3.0/"


def test_a_licence_after_the_front_matter_is_still_found() -> None:
    body = article(
        "<permissions/>",
        body=(
            '<sec><permissions><license xlink:href="https://creativecommons.org/licenses/by/3.0/"/>'
            "</permissions></sec>"
        ),
    )
    assert extract_source_metadata(jats(body)).licence == (
        "https://creativecommons.org/licenses/by/3.0/"
    )


def test_entity_declarations_are_refused_by_the_front_matter_reader() -> None:
    body = (
        b'<?xml version="1.0"?><!DOCTYPE article [<!ENTITY l "https://creativecommons.org/'
        b'licenses/by/4.0/">]><article xmlns:xlink="http://www.w3.org/1999/xlink"><front>'
        b'<article-meta><permissions><license license-type="open-access"><license-p>&l;'
        b"</license-p></license></permissions></article-meta></front><body/></article>"
    )
    assert extract_source_metadata(jats(body)) == SourceMetadata()


# -- Elsevier -------------------------------------------------------------------------------------

ELSEVIER = (
    '<full-text-retrieval-response xmlns="http://www.elsevier.com/xml/svapi/article/dtd">'
    "<coredata>{flags}{licence}</coredata><originalText>{text}</originalText>"
    "</full-text-retrieval-response>"
)


def elsevier(flags: str, licence: str = "", text: str = "") -> Blob:
    content = ELSEVIER.format(flags=flags, licence=licence, text=text).encode()
    return Blob(File(FileKind.BODY, "elsevier_oa", ELSEVIER_XML), content)


@pytest.mark.parametrize(
    ("flags", "access", "where"),
    [
        ("<openaccessArticle>true</openaccessArticle>", "open-access", "openaccessArticle"),
        (
            "<openaccess>1</openaccess><openaccessArticle>false</openaccessArticle>",
            "open-access",
            "openaccess",
        ),
        ("<openaccess>0</openaccess><openaccessArticle>true</openaccessArticle>", None, None),
        ("<openaccessArticle>false</openaccessArticle>", None, None),
    ],
)
def test_elsevier_access_flags(flags: str, access: str | None, where: str | None) -> None:
    lic = (
        "<openaccessUserLicense>http://creativecommons.org/licenses/by/4.0/</openaccessUserLicense>"
    )
    evidence = licence_evidence(elsevier(flags, lic))
    assert (evidence.access, evidence.access_where) == (access, where)
    assert evidence.licence == "http://creativecommons.org/licenses/by/4.0/"


def test_elsevier_terms_are_read_from_coredata_only() -> None:
    # Raw text after coredata never speaks for the article's terms.
    blob = elsevier("", text="<openaccessUserLicense>http://x.example/l</openaccessUserLicense>")
    assert licence_evidence(blob).is_empty()


def test_jats_media_type_with_nothing_to_say_is_empty() -> None:
    blob = Blob(File(FileKind.BODY, "t", JATS_XML), b"<article><front/><body/></article>")
    assert licence_evidence(blob).is_empty()


def test_front_matter_answers_equal_whole_parse_answers_on_the_synthetic_corpus() -> None:
    # JATS of every licence style, BITS book parts and Elsevier answers from the fake world.
    from benchmarks.frontmatter import _bodies, _whole_parse_evidence

    blobs = _bodies(300, 11)
    assert {b.file.media_type for b in blobs} == {JATS_XML, ELSEVIER_XML}
    differ = [b for b in blobs if licence_evidence(b) != _whole_parse_evidence(b)]
    assert differ == []
    assert sum(1 for b in blobs if licence_evidence(b).licence) > len(blobs) // 2


_PLACES = st.sampled_from(
    [
        "xlink:href",
        "ali:license_ref",
        "license-p link",
        "license-p url",
        "license-p name",
        "license-type",
        "license-p",
    ]
)
_OTHER = st.builds(LicenceClue, st.text(min_size=1, max_size=30), _PLACES)


@given(others=st.lists(_OTHER, max_size=6), at=st.integers(min_value=0, max_value=6))
def test_an_open_licence_url_wins_wherever_it_stands(others: list[LicenceClue], at: int) -> None:
    cc = LicenceClue("https://creativecommons.org/licenses/by-nd/4.0/", "ali:license_ref")
    clues = [*others[:at], cc, *others[at:]]
    ranked = rank_licence_clues(clues)
    assert ranked[0] == cc or is_open_licence_url(ranked[0].value)
    assert set(ranked) == set(clues)  # nothing lost, repeats dropped


def test_an_access_statement_alone_in_the_front_does_not_hide_a_later_licence() -> None:
    body = (
        f"<article {XLINK}><front><article-meta><permissions/><custom-meta-group><custom-meta>"
        "<meta-name>pmc-prop-open-access</meta-name><meta-value>yes</meta-value></custom-meta>"
        "</custom-meta-group></article-meta></front><body><sec><permissions><license "
        'xlink:href="https://creativecommons.org/licenses/by/3.0/"/></permissions></sec></body>'
        "</article>"
    ).encode()
    whole = licence_module._jats_evidence(parse_xml(body))
    got = licence_evidence(jats(body))
    assert got == whole
    assert (got.licence, got.access) == (
        "https://creativecommons.org/licenses/by/3.0/",
        "open-access",
    )
