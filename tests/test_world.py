"""The synthetic world answers in the shapes ``upstream.md`` documents, over real sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from lxml import etree

from litfetch_df.safexml.parse import parse_xml
from tests.fake_upstream import FakeUpstream
from tests.fakes.world import (
    CC_BY_NC,
    HOST_CROSSREF,
    HOST_EBI,
    HOST_NCBI,
    HOST_OPENALEX,
    HOST_S2,
    HOST_S3,
    HOST_SPRINGER,
    HOST_SPRINGER_LINK,
    HOST_UNPAYWALL,
    Article,
    BodyHome,
    HostLimit,
    LicenceStyle,
    Publisher,
    World,
)

S3 = "{http://s3.amazonaws.com/doc/2006-03-01/}"

PMC_ARTICLE = Article(
    pmid="30000001",
    pmcid="PMC7000001",
    pmc_versions=10,
    doi="10.1000/ABC.1",
    body=BodyHome.PMC_OA,
    licence=CC_BY_NC,
    licence_style=LicenceStyle.ALI,
    oa_status="gold",
    pdf_url="https://publisher.example.org/article/10.1000/ABC.1.pdf",
    n_supplementary=2,
    n_figures=1,
)
EPMC_ONLY = Article(
    pmid="30000002", pmcid="PMC7000002", doi="10.1000/abc.2", body=BodyHome.EUROPE_PMC
)
DOI_ONLY = Article(doi="10.5555/xyz-9", in_s2=False)
SPRINGER_OA = Article(
    doi="10.1007/s00000-026-00001-x",
    body=BodyHome.SPRINGER,
    publisher=Publisher.SPRINGER,
    oa_status="gold",
    pdf_url="http://link.springer.com/openurl/pdf?id=doi:10.1007/s00000-026-00001-x",
)
WORLD_ARTICLES = (PMC_ARTICLE, EPMC_ONLY, DOI_ONLY, SPRINGER_OA)


@pytest.fixture
async def client(fake: FakeUpstream) -> AsyncIterator[httpx.AsyncClient]:
    World(WORLD_ARTICLES).install(fake)
    async with fake.client_factory()() as c:
        yield c


async def test_idconv_reports_pmc_record_and_error_records(client: httpx.AsyncClient) -> None:
    r = await client.get(
        f"https://{HOST_NCBI}/tools/idconv/api/v1/articles/",
        params={"ids": "PMC7000001,30000002,10.5555/xyz-9", "format": "json", "tool": "t"},
    )
    assert r.status_code == 200
    records = {rec["requested-id"]: rec for rec in r.json()["records"]}
    hit = records["PMC7000001"]
    assert hit["pmid"] == 30000001  # an integer on the current endpoint
    assert hit["doi"] == "10.1000/ABC.1"  # NCBI's stored casing
    assert "status" not in hit
    # Europe-PMC-only and non-PMC articles are error records, not omissions
    assert records["30000002"]["status"] == "error"
    assert records["10.5555/xyz-9"]["status"] == "error"


async def test_idconv_caps_ids_and_refuses_idtype_mismatch(client: httpx.AsyncClient) -> None:
    url = f"https://{HOST_NCBI}/tools/idconv/api/v1/articles/"
    too_many = ",".join(str(30000000 + i) for i in range(201))
    assert (await client.get(url, params={"ids": too_many, "format": "json"})).status_code == 400
    r = await client.get(url, params={"ids": "30000001", "idtype": "doi", "format": "json"})
    assert r.json()["status"] == "error" and "records" not in r.json()
    bare = await client.get(url, params={"ids": "7000001", "idtype": "pmcid", "format": "json"})
    assert bare.json()["records"][0]["pmcid"] == "PMC7000001"


async def test_s3_delimited_listing_lists_version_folders(client: httpx.AsyncClient) -> None:
    r = await client.get(
        f"https://{HOST_S3}/", params={"list-type": "2", "prefix": "PMC7000001.", "delimiter": "/"}
    )
    root = etree.fromstring(r.content)
    prefixes = [p.findtext(f"{S3}Prefix") for p in root.iter(f"{S3}CommonPrefixes")]
    assert len(prefixes) == 10
    assert prefixes[:3] == ["PMC7000001.1/", "PMC7000001.10/", "PMC7000001.2/"]  # S3 order
    assert root.findtext(f"{S3}Contents") is None
    # the trailing dot keeps PMC700000 from matching PMC7000001
    empty = await client.get(
        f"https://{HOST_S3}/", params={"list-type": "2", "prefix": "PMC700000.", "delimiter": "/"}
    )
    assert etree.fromstring(empty.content).findtext(f"{S3}KeyCount") == "0"


async def test_s3_listing_pages_and_every_listed_key_downloads(client: httpx.AsyncClient) -> None:
    keys: list[tuple[str, int]] = []
    params = {"list-type": "2", "prefix": "PMC7000001.10/", "max-keys": "3"}
    pages = 0
    while True:
        root = etree.fromstring((await client.get(f"https://{HOST_S3}/", params=params)).content)
        pages += 1
        for c in root.iter(f"{S3}Contents"):
            keys.append((c.findtext(f"{S3}Key") or "", int(c.findtext(f"{S3}Size") or -1)))
        if root.findtext(f"{S3}IsTruncated") != "true":
            break
        params["continuation-token"] = root.findtext(f"{S3}NextContinuationToken") or ""
    names = [k for k, _ in keys]
    assert pages == 3 and len(keys) == 7 and names == sorted(names)
    assert "PMC7000001.10/PMC7000001.10.xml" in names
    for key, size in keys:
        got = await client.get(f"https://{HOST_S3}/{key}")
        assert got.status_code == 200 and len(got.content) == size
    body = await client.get(f"https://{HOST_S3}/PMC7000001.10/PMC7000001.10.xml")
    assert etree.QName(parse_xml(body.content)).localname == "article"
    assert b"PMC7000001.10" in body.content
    missing = await client.get(f"https://{HOST_S3}/PMC7000001.11/PMC7000001.11.xml")
    assert missing.status_code == 404
    assert etree.fromstring(missing.content).findtext("Code") == "NoSuchKey"


async def test_s2_batch_is_aligned_with_null_for_unknown(client: httpx.AsyncClient) -> None:
    url = f"https://{HOST_S2}/graph/v1/paper/batch"
    ids = ["PMCID:7000001", "DOI:10.5555/xyz-9", "DOI:10.1000/nope", "PMID:30000002"]
    r = await client.post(url, params={"fields": "externalIds,openAccessPdf"}, json={"ids": ids})
    out = r.json()
    assert [x is None for x in out] == [False, True, True, False]
    assert out[0]["externalIds"]["PubMedCentral"] == "7000001"
    assert out[0]["openAccessPdf"]["url"] == PMC_ARTICLE.pdf_url
    assert out[3]["externalIds"]["PubMed"] == "30000002"
    too_many = await client.post(url, json={"ids": ["PMID:1"] * 501})
    assert too_many.status_code == 400


async def test_crossref_doi_list_filter_matches_case_insensitively(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get(
        f"https://{HOST_CROSSREF}/works",
        params={
            "filter": "doi:10.1000/abc.1,doi:10.1007/S00000-026-00001-X,doi:10.1000/unknown",
            "rows": "100",
            "select": "DOI,link,relation",
        },
    )
    items = r.json()["message"]["items"]
    assert sorted(i["DOI"] for i in items) == ["10.1000/ABC.1", "10.1007/s00000-026-00001-x"]
    assert all(set(i) <= {"DOI", "link", "relation"} for i in items)
    single = await client.get(f"https://{HOST_CROSSREF}/works/10.1000/unknown")
    assert single.status_code == 404 and single.text == "Resource not found."


async def test_europe_pmc_search_and_full_text(client: httpx.AsyncClient) -> None:
    base = f"https://{HOST_EBI}/europepmc/webservices/rest"
    r = await client.get(
        f"{base}/search",
        params={
            "query": "(EXT_ID:30000001 OR EXT_ID:30000002 OR EXT_ID:39999999) AND SRC:MED",
            "format": "json",
            "resultType": "lite",
            "pageSize": "3",
        },
    )
    results = {x["pmid"]: x for x in r.json()["resultList"]["result"]}
    assert set(results) == {"30000001", "30000002"}
    assert results["30000002"]["pmcid"] == "PMC7000002"
    assert (await client.get(f"{base}/PMC7000002/fullTextXML")).content.find(b"<article") >= 0
    envelope = await client.get(f"{base}/NBK1116/bookXML")
    assert envelope.status_code == 200 and b"<fullTextXMLBean>" in envelope.content
    assert (await client.get(f"{base}/PMC7999999/fullTextXML")).status_code == 404


async def test_openalex_url_form_ids_and_unpaywall_email(client: httpx.AsyncClient) -> None:
    r = await client.get(
        f"https://{HOST_OPENALEX}/works",
        params={"filter": "doi:10.1000/abc.1|10.5555/xyz-9", "select": "ids,doi", "per-page": "50"},
    )
    works = {w["doi"]: w for w in r.json()["results"]}
    assert set(works) == {"https://doi.org/10.1000/abc.1", "https://doi.org/10.5555/xyz-9"}
    ids = works["https://doi.org/10.1000/abc.1"]["ids"]
    assert ids["pmid"] == "https://pubmed.ncbi.nlm.nih.gov/30000001"
    assert ids["pmcid"].rstrip("/").rsplit("/", 1)[-1] in {"7000001", "PMC7000001"}
    url = f"https://{HOST_UNPAYWALL}/v2/10.1000/abc.1"
    assert (await client.get(url)).status_code == 422
    rec = (await client.get(url, params={"email": "dev@lab.example"})).json()
    assert rec["best_oa_location"]["license"] == "cc-by-nc"


async def test_springer_keys_and_redirected_pdf(fake: FakeUpstream) -> None:
    World(WORLD_ARTICLES, keys={"springer_meta": "meta-k", "springer_openaccess": "oa-k"}).install(
        fake
    )
    async with fake.client_factory()() as c:
        base = f"https://{HOST_SPRINGER}"
        q = {"q": "doi:10.1007/s00000-026-00001-x OR doi:10.1000/abc.1"}
        assert (
            await c.get(f"{base}/meta/v2/json", params={**q, "api_key": "oa-k"})
        ).status_code == 401
        meta = (await c.get(f"{base}/meta/v2/json", params={**q, "api_key": "meta-k"})).json()
        assert [r["openaccess"] for r in meta["records"]] == ["true"]
        jats = await c.get(f"{base}/openaccess/jats", params={**q, "api_key": "oa-k"})
        assert b"<body>" in jats.content and b"<!ENTITY %" in jats.content
        pdf_url = meta["records"][0]["url"][1]["value"]
        first = await c.get(pdf_url)
        assert first.status_code == 302
        assert first.headers["location"].startswith(f"https://{HOST_SPRINGER_LINK}/content/pdf/")
        followed = await c.get(pdf_url, follow_redirects=True)
        assert followed.status_code == 200 and followed.content.startswith(b"%PDF")


async def test_rate_limit_answers_429_with_retry_after(fake: FakeUpstream) -> None:
    world = World(WORLD_ARTICLES)
    world.install(fake, limits={HOST_S2: HostLimit(per_second=1.0, retry_after=True)})
    async with fake.client_factory()() as c:
        url = f"https://{HOST_S2}/graph/v1/paper/PMID:30000001"
        statuses = [(await c.get(url, params={"fields": "externalIds"})) for _ in range(3)]
    assert [r.status_code for r in statuses] == [200, 429, 429]
    assert statuses[1].headers["retry-after"] == "1"
    assert world.throttled[HOST_S2] == 2 and world.served[HOST_S2] == 3


def test_world_rejects_duplicate_ids_and_bad_records() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        World([DOI_ONLY, Article(doi="10.5555/XYZ-9")])
    with pytest.raises(ValueError, match="pmc_versions"):
        Article(pmcid="PMC1", body=BodyHome.PMC_OA)


def test_corpus_world_serves_every_generated_article() -> None:
    from benchmarks.corpus import generate

    # (how fast the corpus is built is the benchmarks' business, not a test's)
    corpus = generate(1000, seed=3)
    world = corpus.world()
    assert len(corpus.frame) == 1000
    assert {"pmc_oa", "bookshelf", "invalid"} <= set(corpus.mix())
    for a in world.articles[:200]:
        if a.pmc_versions:
            assert parse_xml(world.s3_object(f"{a.pmcid}.1/{a.pmcid}.1.xml") or b"") is not None
        if a.bookid:
            assert etree.QName(parse_xml(world.bits(a))).localname == "book-part-wrapper"
