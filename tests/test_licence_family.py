"""licence_family: one comparable name per licence, from the forms real sources write."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from litfetch_df import JATS_XML, Blob, File, FileKind
from litfetch_df.frame.engine.licence_family import FAMILIES, licence_family
from tests.conftest import data_bytes


@pytest.mark.parametrize(
    ("raw", "family"),
    [
        # JATS <license xlink:href> (the recorded fixtures' forms, http and https)
        ("http://creativecommons.org/licenses/by/2.0", "cc-by"),
        ("https://creativecommons.org/licenses/by/4.0/", "cc-by"),
        ("https://creativecommons.org/licenses/by-nc-nd/3.0/igo/", "cc-by-nc-nd"),
        ("http://creativecommons.org/licenses/by-nc-sa/4.0/legalcode", "cc-by-nc-sa"),
        ("http://creativecommons.org/publicdomain/mark/1.0/", "public-domain"),
        ("https://creativecommons.org/publicdomain/zero/1.0/", "cc0"),
        # Unpaywall, Europe PMC, Semantic Scholar short forms
        ("cc-by", "cc-by"),
        ("CCBY", "cc-by"),
        ("cc_by", "cc-by"),
        ("cc-by-nc", "cc-by-nc"),
        ("cc-by-sa", "cc-by-sa"),
        ("cc-by-nd", "cc-by-nd"),
        ("CC BY-NC-ND 4.0", "cc-by-nc-nd"),
        ("cc0", "cc0"),
        ("CC0 1.0", "cc0"),
        ("public-domain", "public-domain"),
        ("pd", "public-domain"),
        # spelled out in licence text
        ("Creative Commons Attribution 4.0 International License", "cc-by"),
        ("Creative Commons Attribution-NonCommercial-NoDerivatives 4.0", "cc-by-nc-nd"),
        # stated, but not a Creative Commons or public-domain licence
        ("other-oa", "other"),
        ("implied-oa", "other"),
        ("publisher-specific-oa", "other"),
        ("http://www.elsevier.com/open-access/userlicense/1.0/", "other"),
        ("cc-by-sa-nd", "other"),  # no such Creative Commons licence
        ("cc-nc", "other"),  # every CC licence requires attribution
        # no licence at all
        ("", None),
        ("   ", None),
        (None, None),
    ],
)
def test_families_of_the_forms_sources_write(raw: str | None, family: str | None) -> None:
    assert licence_family(raw) == family


def test_case_and_surrounding_space_do_not_matter() -> None:
    assert licence_family("  HTTPS://CreativeCommons.org/Licenses/BY-NC/4.0/ ") == "cc-by-nc"


@given(st.one_of(st.text(), st.none(), st.integers()))
def test_any_value_gives_a_known_family_or_none(value: object) -> None:
    family = licence_family(value)  # type: ignore[arg-type]
    assert family is None or family in FAMILIES


@pytest.mark.parametrize("family", FAMILIES)
def test_a_family_is_its_own_family(family: str) -> None:
    assert licence_family(family) == family


def test_the_licence_step_adds_the_family_beside_the_raw_licence() -> None:
    body = data_bytes("jats", "PMC3166277_bmc-microbiol_1471-2180-11-174.nxml")
    blob = Blob(File(FileKind.BODY, "europe_pmc", JATS_XML), body)
    df = pd.DataFrame(
        {
            "pmcid": ["PMC3166277", "PMC3166278"],
            "body": [blob, None],
            "body_media_type": [JATS_XML, None],
            "body_source": ["europe_pmc", None],
        }
    )
    # The licence is read from the body the frame holds: no request, no session needed.
    out = df.lit.licences(resolve=False, progress=False)
    assert out["licence"].tolist()[0] == "http://creativecommons.org/licenses/by/2.0"
    assert out["licence_family"].tolist()[0] == "cc-by"
    assert pd.isna(out["licence_family"].tolist()[1])
    assert str(out["licence_family"].dtype) == "string"
