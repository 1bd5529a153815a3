"""is_landing_page: resolver links and article pages are not files (issue 15)."""

from __future__ import annotations

import pytest

from litfetch_df.sources.landing import is_landing_page
from litfetch_df.sources.semantic_scholar import s2_pdf_files
from litfetch_df.sources.unpaywall import unpaywall_files


@pytest.mark.parametrize(
    ("url", "landing"),
    [
        ("https://doi.org/10.1016/j.xgen.2025.100814", True),
        ("http://dx.doi.org/10.1000/x", True),
        ("https://hdl.handle.net/10013/epic.1", True),
        ("https://www.ncbi.nlm.nih.gov/pmc/articles/12008803", True),
        ("https://www.ncbi.nlm.nih.gov/pmc/articles/PMC12008803/", True),
        ("https://pmc.ncbi.nlm.nih.gov/articles/PMC12008803/", True),
        ("https://europepmc.org/article/MED/40120586", True),
        ("https://www.ncbi.nlm.nih.gov/pmc/articles/PMC12008803/pdf/main.pdf", False),
        ("https://europepmc.org/articles/PMC12008803/pdf", False),
        ("https://www.cell.com/action/showPdf?pii=S2666-979X(25)00070-9", False),
        ("https://doi.org.example.com/x.pdf", False),
        ("not a url", False),
    ],
)
def test_is_landing_page(url: str, landing: bool) -> None:
    assert is_landing_page(url) is landing


def test_s2_and_unpaywall_do_not_list_a_landing_page_as_a_pdf() -> None:
    doi_link = "https://doi.org/10.1016/j.xgen.2025.100814"
    assert s2_pdf_files({"openAccessPdf": {"url": doi_link, "status": "HYBRID"}}) == ()
    assert unpaywall_files({"best_oa_location": {"url_for_pdf": doi_link}}) == ()
    real = "https://arxiv.org/pdf/2304.05376"
    assert [f.uri for f in s2_pdf_files({"openAccessPdf": {"url": real}})] == [real]
