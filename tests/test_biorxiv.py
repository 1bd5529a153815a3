"""bioRxiv / medRxiv: the details lookup and the (pluggable-download) BiorxivFetcher."""

from __future__ import annotations

import logging
import sys
import types
from typing import Any

import pytest

from litfetch_df import JATS_XML, ArticleIds, FileKind, Session
from litfetch_df.sources.biorxiv import (
    BiorxivFetcher,
    fetch_biorxiv_collection,
    latest_jatsxml,
    latest_published,
)
from tests.fake_upstream import FakeResponse, FakeUpstream, json_response

API = "api.biorxiv.org"
PREPRINT = "10.1101/2026.01.05.600001"
V1_XML = "https://www.biorxiv.org/content/early/2026/01/07/2026.01.05.600001.source.xml"
V2_XML = "https://www.biorxiv.org/content/early/2026/03/11/2026.01.05.600001.source.xml"
MED_XML = "https://www.medrxiv.org/content/early/2026/02/02/2026.01.05.600001.source.xml"

# Shaped as upstream.md 3.6 shows (no real details response is recorded).
DETAILS = {
    "messages": [{"status": "ok"}],
    "collection": [
        {
            "doi": PREPRINT,
            "title": "An example preprint",
            "authors": "Doe, J.; Roe, R.",
            "author_corresponding": "Jane Doe",
            "author_corresponding_institution": "Example University",
            "date": "2026-01-07",
            "version": "1",
            "type": "new results",
            "license": "cc_by",
            "category": "genomics",
            "jatsxml": V1_XML,
            "abstract": "An abstract.",
            "published": "NA",
            "server": "bioRxiv",
        },
        {
            "doi": PREPRINT,
            "date": "2026-03-11",
            "version": "2",
            "type": "new results",
            "license": "cc_by",
            "jatsxml": V2_XML,
            "published": "10.1000/journal.2026.123",
            "server": "bioRxiv",
        },
    ],
}
NOT_FOUND = {"messages": [{"status": "no posts found"}], "collection": []}

JATS = b"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE article PUBLIC "-//NLM//DTD JATS (Z39.96) Journal Archiving and Interchange DTD v1.2
 20190208//EN" "JATS-archivearticle1.dtd">
<article xmlns:xlink="http://www.w3.org/1999/xlink" article-type="article" dtd-version="1.2">
  <front><article-meta>
    <article-id pub-id-type="doi">10.1101/2026.01.05.600001</article-id>
  </article-meta></front>
  <body><sec><title>Introduction</title><p>Text.</p></sec></body>
</article>
"""


class Downloads:
    """A pluggable JATS download that records the URLs it was asked for."""

    def __init__(self, answer: bytes | None = JATS, error: Exception | None = None) -> None:
        self.answer = answer
        self.error = error
        self.urls: list[str] = []

    async def __call__(self, url: str) -> bytes | None:
        self.urls.append(url)
        if self.error is not None:
            raise self.error
        return self.answer


def route_details(
    fake: FakeUpstream, biorxiv: FakeResponse | None = None, medrxiv: FakeResponse | None = None
) -> None:
    fake.route(API, r"/details/biorxiv/.+", biorxiv or json_response(DETAILS))
    fake.route(API, r"/details/medrxiv/.+", medrxiv or json_response(NOT_FOUND))


async def test_hit_downloads_the_latest_version(fake: FakeUpstream, fake_session: Session) -> None:
    route_details(fake)
    download = Downloads()
    blob = await BiorxivFetcher(download=download).fetch(
        ArticleIds(doi=PREPRINT), http=fake_session
    )
    assert blob is not None
    assert blob.content == JATS
    assert (blob.file.kind, blob.file.source, blob.file.media_type, blob.file.uri) == (
        FileKind.BODY,
        "biorxiv",
        JATS_XML,
        V2_XML,
    )
    assert download.urls == [V2_XML]
    (req,) = fake.requests(API)
    assert req.path == f"/details/biorxiv/{PREPRINT}"


async def test_new_prefix_and_medrxiv_fallback(fake: FakeUpstream, fake_session: Session) -> None:
    doi = "10.64898/2026.04.07.716663"
    med = {"messages": [{"status": "ok"}], "collection": [{"doi": doi, "jatsxml": MED_XML}]}
    route_details(fake, biorxiv=json_response(NOT_FOUND), medrxiv=json_response(med))
    download = Downloads()
    blob = await BiorxivFetcher(download=download).fetch(ArticleIds(doi=doi), http=fake_session)
    assert blob is not None and blob.file.uri == MED_XML
    assert [r.path for r in fake.requests(API)] == [
        f"/details/biorxiv/{doi}",
        f"/details/medrxiv/{doi}",
    ]


async def test_not_a_preprint_doi_makes_no_request(
    fake: FakeUpstream, fake_session: Session
) -> None:
    route_details(fake)
    download = Downloads()
    fetcher = BiorxivFetcher(download=download)
    for ids in (
        ArticleIds(doi="10.1000/abc.1"),
        ArticleIds(pmid="30000001"),
        ArticleIds(doi="10.1101/../../admin"),
        ArticleIds(doi="10.1101/./x"),
    ):
        assert await fetcher.fetch(ids, http=fake_session) is None
    assert await fetch_biorxiv_collection(fake_session, "10.1101/../../admin", "biorxiv") is None
    assert fake.count() == 0
    assert download.urls == []


async def test_no_posts_found_anywhere_declines(fake: FakeUpstream, fake_session: Session) -> None:
    route_details(fake, biorxiv=json_response(NOT_FOUND))
    download = Downloads()
    assert (
        await BiorxivFetcher(download=download).fetch(ArticleIds(doi=PREPRINT), http=fake_session)
        is None
    )
    assert fake.count(API) == 2
    assert download.urls == []


@pytest.mark.parametrize(
    "answer",
    [
        FakeResponse(200, b'{"messages": [{"status": "ok"}], "collection": [{"jatsxml": '),
        json_response({"collection": [{"doi": PREPRINT, "jatsxml": ""}]}),
        json_response({"collection": [{"doi": PREPRINT, "jatsxml": "https://evil.example/x.xml"}]}),
        json_response({"collection": "nope"}),
        FakeResponse(404, "not here"),
    ],
)
async def test_malformed_answers_move_on_then_decline(
    fake: FakeUpstream, fake_session: Session, answer: FakeResponse
) -> None:
    route_details(fake, biorxiv=answer, medrxiv=answer)
    download = Downloads()
    assert (
        await BiorxivFetcher(download=download).fetch(ArticleIds(doi=PREPRINT), http=fake_session)
        is None
    )
    assert download.urls == []
    assert fake.count(API) == 2


async def test_an_html_page_for_json_is_a_transient_failure(
    fake: FakeUpstream, fake_session: Session
) -> None:
    # Changed by issue 14 (it used to be a plain decline after one request): a 200 HTML
    # page where JSON was asked for is retried, then given up with a reason, never kept.
    page = FakeResponse(200, b"<html><body>Cloudflare</body></html>", {"Content-Type": "text/html"})
    route_details(fake, biorxiv=page, medrxiv=page)
    download = Downloads()
    assert (
        await BiorxivFetcher(download=download).fetch(ArticleIds(doi=PREPRINT), http=fake_session)
        is None
    )
    assert download.urls == []
    assert fake.count(API) == 6  # three attempts on each server
    assert any("UnexpectedPayload" in f for f in fake_session.failures)


async def test_retried_failure_then_hit(fake: FakeUpstream, fake_session: Session) -> None:
    route_details(fake)
    fake.fail_next(API, "/details/biorxiv/", FakeResponse(503, "busy"))
    blob = await BiorxivFetcher(download=Downloads()).fetch(
        ArticleIds(doi=PREPRINT), http=fake_session
    )
    assert blob is not None
    assert fake.count(API, "/details/biorxiv/") == 2


async def test_all_failing_declines(fake: FakeUpstream, fake_session: Session) -> None:
    route_details(fake)
    fake.fail_next(API, "/details/", *(["drop"] * 6))
    assert (
        await BiorxivFetcher(download=Downloads()).fetch(
            ArticleIds(doi=PREPRINT), http=fake_session
        )
        is None
    )
    assert fake_session.failures


@pytest.mark.parametrize(
    "download",
    [
        Downloads(answer=None),
        Downloads(answer=b""),
        Downloads(answer=b"<!DOCTYPE html><html><body>Just a moment...</body></html>"),
        Downloads(error=RuntimeError("TLS handshake failed")),
    ],
)
async def test_failed_download_declines(
    fake: FakeUpstream, fake_session: Session, download: Downloads
) -> None:
    route_details(fake)
    assert (
        await BiorxivFetcher(download=download).fetch(ArticleIds(doi=PREPRINT), http=fake_session)
        is None
    )
    assert download.urls == [V2_XML]


async def test_without_curl_cffi_declines_with_one_log_line(
    fake: FakeUpstream,
    fake_session: Session,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setitem(sys.modules, "curl_cffi", None)  # import now raises ImportError
    monkeypatch.setitem(sys.modules, "curl_cffi.requests", None)
    route_details(fake)
    fetcher = BiorxivFetcher()
    with caplog.at_level(logging.INFO):
        assert await fetcher.fetch(ArticleIds(doi=PREPRINT), http=fake_session) is None
        assert await fetcher.fetch(ArticleIds(doi=PREPRINT), http=fake_session) is None
    lines = [r for r in caplog.records if "curl_cffi" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING
    assert fake.count() == 0


def fake_curl_cffi(status: int, content: bytes, seen: list[dict[str, Any]]) -> types.ModuleType:
    """A stand-in for curl_cffi.requests recording how its AsyncSession is used."""

    class Response:
        def __init__(self) -> None:
            self.status_code = status
            self.content = content

    class AsyncSession:
        def __init__(self, **kwargs: Any) -> None:
            seen.append(dict(kwargs))

        async def __aenter__(self) -> AsyncSession:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

        async def get(self, url: str) -> Response:
            seen.append({"url": url})
            return Response()

    module = types.ModuleType("curl_cffi.requests")
    module.AsyncSession = AsyncSession  # type: ignore[attr-defined]
    return module


@pytest.mark.parametrize(("status", "hit"), [(200, True), (403, False)])
async def test_default_download_uses_curl_cffi_lazily(
    fake: FakeUpstream,
    fake_session: Session,
    monkeypatch: pytest.MonkeyPatch,
    status: int,
    hit: bool,
) -> None:
    seen: list[dict[str, Any]] = []
    package = types.ModuleType("curl_cffi")
    monkeypatch.setitem(sys.modules, "curl_cffi", package)
    monkeypatch.setitem(sys.modules, "curl_cffi.requests", fake_curl_cffi(status, JATS, seen))
    route_details(fake)
    blob = await BiorxivFetcher(impersonate="safari").fetch(
        ArticleIds(doi=PREPRINT), http=fake_session
    )
    assert (blob is not None) is hit
    assert seen[0]["impersonate"] == "safari"
    assert seen[1] == {"url": V2_XML}


def test_collection_helpers() -> None:
    collection: list[dict[str, Any]] = DETAILS["collection"]
    assert latest_jatsxml(collection) == V2_XML
    assert latest_published(collection) == "10.1000/journal.2026.123"
    assert latest_published(collection[:1]) is None  # "NA"
    assert latest_published([{"published": "https://doi.org/10.1000/x.1"}]) == "10.1000/x.1"
    assert latest_published([{"published": "junk"}]) is None
    assert latest_jatsxml([]) is None


def test_module_import_does_not_import_curl_cffi() -> None:
    import subprocess

    code = (
        "import sys, litfetch_df.sources.biorxiv, litfetch_df.operations.relations; "
        "sys.exit('curl_cffi' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
