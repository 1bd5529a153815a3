"""The offline demo: it runs with no network, and everything it reports is true.

"True" is checked against the recorded real data in tests/data/ (PROVENANCE.md),
independently of tools/build_demo.py: the ids in the export, every response in
the bundled cache, and the demo's results.
"""

from __future__ import annotations

import io
import json
import math
import sqlite3
import urllib.parse
import zlib
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

import litfetch_df.demo as demo
from litfetch_df import ArticleIds, Blob, Related, RelationType
from litfetch_df._xml import local_name, parse_xml
from litfetch_df.frame.accessor import LitFrameAccessor
from tests.conftest import data_bytes, data_json

JATS = {
    "PMC3166277": "PMC3166277_bmc-microbiol_1471-2180-11-174.nxml",
    "PMC2599765": "PMC2599765_ehp-116-1694_public-domain.nxml",
    "PMC5608867": "PMC5608867_license-prose-only.xml",
    "PMC13250820": "PMC13250820_ali-license-ref_supplementary.xml",
}

# The identifier chains of PROVENANCE.md ("linked chains"), for the articles without JATS.
CHAINS = {
    "10.1016/j.xgen.2025.100814": ("40120586", "PMC12008803"),
    "10.1073/pnas.1414271111": ("25349395", "PMC4234579"),
    "10.1038/s42256-024-00832-8": ("38799228", "PMC11116106"),
}

CROSSREF = {
    "10.1016/j.xgen.2025.100814": (
        "crossref_work_10.1016_j.xgen.2025.100814_elsevier-tdm-links.json"
    ),
    "10.1038/s42256-024-00832-8": "crossref_work_10.1038_s42256-024-00832-8_links-ccby.json",
    "10.1101/2024.04.01.587366": "crossref_work_10.1101_2024.04.01.587366_is-preprint-of.json",
    "10.3389/fgene.2017.00147": "crossref_work_10.3389_fgene.2017.00147_has-preprint.json",
}
UNPAYWALL = {
    "10.1016/j.xgen.2025.100814": "unpaywall_v2_10.1016_j.xgen.2025.100814_gold.json",
    "10.1073/pnas.1414271111": "unpaywall_v2_10.1073_pnas.1414271111_bronze_pmc-repository.json",
    "10.1007/s40278-023-41815-2": "unpaywall_v2_10.1007_s40278-023-41815-2_closed.json",
}
S2 = {
    "10.1016/j.xgen.2025.100814": "s2_graph_paper_DOI_10.1016_j.xgen.2025.100814.json",
    "10.1038/s42256-024-00832-8": "s2_graph_paper_DOI_10.1038_s42256-024-00832-8.json",
    "10.1101/2024.04.01.587366": "s2_graph_paper_DOI_10.1101_2024.04.01.587366_404.json",
}


def jats_ids(name: str) -> dict[str, str]:
    root = parse_xml(data_bytes("jats", name))
    meta = next(el for el in root.iter() if local_name(el) == "article-meta")
    ids: dict[str, str] = {}
    for el in meta:
        if local_name(el) == "article-id" and el.text:
            ids.setdefault(el.get("pub-id-type") or "", el.text.strip())
    return {
        "pmid": ids["pmid"],
        "pmcid": ids.get("pmcid") or "PMC" + ids["pmc"],
        "doi": ids["doi"],
    }


def true_ids() -> dict[str, tuple[str | None, str | None]]:
    """DOI (lower-cased) → (pmid, pmcid) for every demo article, from the fixtures alone."""
    known: dict[str, tuple[str | None, str | None]] = {
        doi.lower(): ids for doi, ids in CHAINS.items()
    }
    for name in JATS.values():
        ids = jats_ids(name)
        known[ids["doi"].lower()] = (ids["pmid"], ids["pmcid"])
    return known


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any real HTTP request fail the test."""

    async def refuse(self: Any, request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"the demo tried the network: {request.url}")

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", refuse)


@pytest.fixture(scope="module")
def result() -> pd.DataFrame:
    with pytest.MonkeyPatch.context() as mp:

        async def refuse(self: Any, request: httpx.Request) -> httpx.Response:
            raise AssertionError(f"the demo tried the network: {request.url}")

        mp.setattr(httpx.AsyncHTTPTransport, "handle_async_request", refuse)
        return demo.run_demo(stream=io.StringIO())


def row(frame: pd.DataFrame, doi: str) -> dict[str, Any]:
    matches = frame[frame["doi"].str.lower() == doi.lower()]
    assert len(matches) == 1, doi
    return {str(k): v for k, v in matches.iloc[0].to_dict().items()}


# -- the bundled files -----------------------------------------------------------------------


def test_export_ids_are_the_real_articles_ids() -> None:
    export = demo.load_demo_export()
    known = true_ids()
    assert len(export) == 10
    by_pmid = {pmid: doi for doi, (pmid, _) in known.items() if pmid}
    for record in export.to_dict("records"):
        pmid, pmcid, doi = record["PMID"], record["PMCID"], record["DOI"]
        if pd.isna(doi):
            assert not pd.isna(pmid)
            doi = by_pmid[pmid]
        facts = known.get(doi.lower())
        if facts is None:
            # Only a DOI, and we hold no PMID / PMCID for it: those cells stay blank.
            assert pd.isna(pmid) and pd.isna(pmcid)
            continue
        assert pd.isna(pmid) or pmid == facts[0]
        assert pd.isna(pmcid) or pmcid == facts[1]
    # Some ids are left out on purpose, so that resolve() has work.
    assert export["PMCID"].isna().sum() >= 3
    assert export["DOI"].isna().sum() >= 1


def test_every_recorded_answer_is_a_fixture_or_states_only_true_facts() -> None:
    known = true_ids()
    cache = Path(demo.__file__).parent / demo.DEMO_DIR / demo.CACHE_NAME
    conn = sqlite3.connect(f"file:{cache}?mode=ro&immutable=1", uri=True)
    try:
        rows = conn.execute("SELECT status, url, content, codec FROM litfetch_responses").fetchall()
    finally:
        conn.close()
    assert rows, "the demo cache is empty"
    seen_hosts = set()
    for status, url, content, codec in rows:
        body = zlib.decompress(content) if codec == "zlib" else bytes(content)
        parsed = urllib.parse.urlsplit(url)
        path = urllib.parse.unquote(parsed.path)
        seen_hosts.add(parsed.netloc)
        if path.endswith("/fullTextXML"):
            pmcid = path.split("/")[-2]
            assert status == 200 and body == data_bytes("jats", JATS[pmcid])
        elif parsed.netloc == "api.crossref.org":
            doi = path.removeprefix("/works/")
            assert status == 200 and body == data_bytes("json", CROSSREF[doi])
        elif parsed.netloc == "api.unpaywall.org":
            doi = path.removeprefix("/v2/")
            assert status == 200 and body == data_bytes("json", UNPAYWALL[doi])
        elif parsed.netloc == "api.semanticscholar.org":
            doi = path.removeprefix("/graph/v1/paper/DOI:")
            recorded = data_json("json", S2[doi])
            if status == 404:
                assert body == data_bytes("json", S2[doi])
                continue
            answer = json.loads(body)
            # A subset of the recorded record: the fields asked for, values unchanged.
            assert answer == {k: recorded[k] for k in answer}
        elif path.endswith("/search"):
            results = json.loads(body)["resultList"]["result"]
            assert results
            for record in results:
                assert known[record["doi"].lower()] == (record["pmid"], record.get("pmcid"))
        else:
            raise AssertionError(f"unexpected recorded answer for {url}")
    assert "pmc-oa-opendata.s3.amazonaws.com" not in seen_hosts  # no bucket facts: nothing


def test_package_data_is_small() -> None:
    assert len(demo.demo_cache_bytes()) + len(demo.demo_export_bytes()) < 2_000_000


def test_the_demo_replays_without_expiry(tmp_path: Path) -> None:
    store = demo._open_cache(tmp_path)
    try:
        assert store.ttl == math.inf
        assert store.info().entries > 0
    finally:
        store.close()


# -- the run ---------------------------------------------------------------------------------


def test_bodies_and_licences_come_from_the_real_jats(result: pd.DataFrame) -> None:
    for pmcid, name in JATS.items():
        ids = jats_ids(name)
        r = row(result, ids["doi"])
        assert r["pmcid"] == pmcid and r["pmid"] == ids["pmid"]
        assert r["body_source"] == "europe_pmc"
        assert isinstance(r["body"], Blob) and r["body"].content == data_bytes("jats", name)
        assert r["licence_basis"] == "artifact"
    assert row(result, "10.1186/1471-2180-11-174")["licence"] == (
        "http://creativecommons.org/licenses/by/2.0"
    )
    assert row(result, "10.1289/ehp.11570")["licence"] == (
        "http://creativecommons.org/publicdomain/mark/1.0/"
    )
    assert "creativecommons.org/licenses/by/4.0" in row(result, "10.1111/tct.70460")["licence"]


def test_resolve_fills_the_blank_ids_truthfully(result: pd.DataFrame) -> None:
    known = true_ids()
    for doi, (pmid, pmcid) in known.items():
        r = row(result, doi)
        assert (r["pmid"], r["pmcid"]) == (pmid, pmcid)
        assert pd.isna(r["resolve_error"])
    # The article whose export row had only its PMID got its DOI and PMCID.
    prose = row(result, "10.1007/s12529-016-9630-3")
    assert prose["pmcid"] == "PMC5608867"


def test_facts_we_do_not_hold_are_reported_not_invented(result: pd.DataFrame) -> None:
    for doi in ("10.1101/2024.04.01.587366", "10.3389/fgene.2017.00147"):
        r = row(result, doi)
        assert pd.isna(r["pmid"]) and pd.isna(r["pmcid"])
        assert r["resolve_error"].startswith("abandoned: not in cache")
    # No bucket listing was recorded: the JATS articles' file-sets are unknown, not empty.
    r = row(result, "10.1186/1471-2180-11-174")
    assert pd.isna(r["n_files"]) and r["files_error"].startswith("abandoned")


def test_relations_are_the_crossref_assertions(result: pd.DataFrame) -> None:
    preprint = row(result, "10.1101/2024.04.01.587366")
    assert (
        Related(RelationType.PUBLISHED, ArticleIds(doi="10.1016/j.xgen.2025.100814"))
        in (preprint["related"])
    )
    assert preprint["published_doi"] == "10.1016/j.xgen.2025.100814"
    stated = data_json("json", CROSSREF["10.3389/fgene.2017.00147"])["message"]["relation"]
    assert (
        row(result, "10.3389/fgene.2017.00147")["preprint_doi"] == (stated["has-preprint"][0]["id"])
    )


def test_access_terms_and_files_match_the_recorded_answers(result: pd.DataFrame) -> None:
    for doi, name in UNPAYWALL.items():
        record = data_json("json", name)
        r = row(result, doi)
        assert r["access"] == record["oa_status"]
        best = record["best_oa_location"] or {}
        assert (None if pd.isna(r["licence"]) else r["licence"]) == best.get("license")
        assert r["licence_basis"] == "unpaywall"
    pnas = row(result, "10.1073/pnas.1414271111")
    pdf = data_json("json", UNPAYWALL["10.1073/pnas.1414271111"])["best_oa_location"]["url_for_pdf"]
    assert [f.uri for f in pnas["files"]] == [pdf]
    nmi = row(result, "10.1038/s42256-024-00832-8")
    links = data_json("json", CROSSREF["10.1038/s42256-024-00832-8"])["message"]["link"]
    tdm = {link["URL"] for link in links if link["intended-application"] == "text-mining"}
    # A URL Semantic Scholar lists too is one file naming both sources (issue 15).
    assert {f.uri for f in nmi["files"] if "crossref_tdm" in f.listed_by} == tdm


def test_run_demo_prints_and_writes(tmp_path: Path, no_network: None) -> None:
    out = io.StringIO()
    target = tmp_path / "demo-result.csv"
    frame = demo.run_demo(target, stream=out)
    text = out.getvalue()
    assert "Summary" in text and "PMC3166277" in text and "published 10.1016/j.xgen" in text
    written = pd.read_csv(target, dtype="string")
    assert len(written) == len(frame) == 10
    assert "body" not in written.columns and "body_size" in written.columns
    assert "<article" not in target.read_text(encoding="utf-8")
    files = pd.read_csv(tmp_path / "demo-result.files.csv", dtype="string")
    assert len(files) == int(frame["n_files"].sum())


def test_demo_session_serves_the_accessor_offline(no_network: None) -> None:
    export = demo.load_demo_export()
    resolved = LitFrameAccessor(export).resolve(session=demo.demo_session(), progress=False)
    assert resolved.loc[0, "pmcid"] == "PMC3166277"


def test_the_bundled_demo_data_is_what_the_builder_makes_today() -> None:
    """If a source changes the requests it sends, the replay cache must be rebuilt."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(root / "tools" / "build_demo.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "up to date" in done.stdout + done.stderr
