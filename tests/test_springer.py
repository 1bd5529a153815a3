"""Springer Nature: OpenAccess JATS fetcher and Meta API file source."""

from __future__ import annotations

import json
import logging

import pytest

from litfetch_df import INSTITUTIONAL, JATS_XML, PDF, ArticleIds, Blob, File, FileKind, Session
from litfetch_df.safexml.parse import local_name, parse_xml
from litfetch_df.sources.springer import SpringerFetcher, SpringerFileSource, extract_article
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream, json_response

HOST = "api.springernature.com"
KEY = "sk-OA-0123456789abcdef"
META_KEY = "sk-META-fedcba9876543210"
DOI = "10.1186/s00000-026-00001-2"
META_DOI = "10.1007/s00000-026-00001-x"

ENVELOPE = f"""<?xml version="1.0" encoding="UTF-8"?>
<?xml-stylesheet type="text/xsl" href="/resources/spdi-openaccess-jats.xsl"?>
<!DOCTYPE response [
<!ENTITY % article SYSTEM "http://jats.nlm.nih.gov/archiving/1.2/JATS-archivearticle1.dtd">
]>
<response>
  <apiMessage>This XML was provided by Springer Nature</apiMessage>
  <query>doi:{DOI}</query>
  <result>
    <total>1</total><start>1</start><pageLength>10</pageLength><recordsDisplayed>1</recordsDisplayed>
  </result>
  <records>
    <article xmlns:mml="http://www.w3.org/1998/Math/MathML"
             xmlns:xlink="http://www.w3.org/1999/xlink"
             dtd-version="1.2" article-type="research-article" xml:lang="en">
      <front><article-meta><article-id pub-id-type="doi">{DOI}</article-id>
        <permissions><license xlink:href="http://creativecommons.org/licenses/by/4.0/">
          <license-p>Open Access.</license-p></license></permissions>
      </article-meta></front>
      <body><sec id="Sec1"><title>Background</title><p>Text.</p></sec></body>
      <back><ref-list/></back>
    </article>
  </records>
  <facets><facet name="subject"/></facets>
</response>
""".encode()

EMPTY = b"""<?xml version="1.0" encoding="UTF-8"?>
<response>
  <apiMessage>This XML was provided by Springer Nature</apiMessage>
  <query>doi:10.1186/s00000-026-99999-9</query>
  <result><total>0</total><start>1</start><pageLength>10</pageLength><recordsDisplayed>0</recordsDisplayed></result>
  <records/>
  <facets/>
</response>
"""

NO_BODY = ENVELOPE.replace(
    b'<body><sec id="Sec1"><title>Background</title><p>Text.</p></sec></body>', b""
)


def route_oa(fake: FakeUpstream, response: FakeResponse) -> None:
    fake.route(HOST, r"/openaccess/jats", response)


def meta_record(openaccess: str, urls: list[dict[str, str]] | None = None) -> dict[str, object]:
    if urls is None:
        urls = [
            {
                "format": "html",
                "platform": "",
                "value": f"http://link.springer.com/openurl/fulltext?id=doi:{META_DOI}",
            },
            {
                "format": "pdf",
                "platform": "",
                "value": f"http://link.springer.com/openurl/pdf?id=doi:{META_DOI}",
            },
        ]
    return {
        "apiMessage": "This JSON was provided by Springer Nature",
        "query": f"doi:{META_DOI}",
        "apiKey": META_KEY,  # Springer may echo the caller's key
        "result": [{"total": "1", "start": "1", "pageLength": "10", "recordsDisplayed": "1"}],
        "records": [
            {
                "contentType": "Article",
                "identifier": f"doi:{META_DOI}",
                "language": "en",
                "url": urls,
                "title": "An example",
                "publicationName": "Journal of Examples",
                "doi": META_DOI,
                "publisher": "Springer",
                "publicationDate": "2026-02-01",
                "openaccess": openaccess,
            }
        ],
        "facets": [],
    }


# -- OpenAccess JATS ----------------------------------------------------------------------------


async def test_oa_hit_slices_the_article_and_records_no_key(
    fake: FakeUpstream, fake_session: Session
) -> None:
    route_oa(fake, FakeResponse(200, ENVELOPE, {"Content-Type": "application/xml"}))
    blob = await SpringerFetcher().fetch(
        ArticleIds(doi=f"https://doi.org/{DOI}"),
        credentials={"springer_api_key": KEY},
        http=fake_session,
    )
    assert blob is not None
    assert blob.content.startswith(b"<?xml version='1.0' encoding='UTF-8'?>\n<article ")
    assert blob.content.rstrip().endswith(b"</article>")
    assert b"<response>" not in blob.content and b"ENTITY" not in blob.content
    assert local_name(parse_xml(blob.content)) == "article"
    assert blob.file == File(
        kind=FileKind.BODY,
        source="springer_oa",
        media_type=JATS_XML,
        uri="https://api.springernature.com/openaccess/jats?q=doi%3A10.1186%2Fs00000-026-00001-2",
    )
    (req,) = fake.requests(HOST)
    assert req.path == "/openaccess/jats"
    assert req.param("q") == f"doi:{DOI}"
    assert req.param("api_key") == KEY


@pytest.mark.parametrize(
    "credentials",
    [None, {}, {"springer_api_key": ""}, {"springer_api_key": "   "}, {"springer_api_key": 42}],
    ids=["none", "empty-map", "empty", "blank", "not-a-string"],
)
async def test_oa_without_a_usable_key_makes_no_request(
    fake: FakeUpstream, fake_session: Session, credentials: dict[str, object] | None
) -> None:
    route_oa(fake, FakeResponse(200, ENVELOPE))
    fetcher = SpringerFetcher()
    assert (
        await fetcher.fetch(ArticleIds(doi=DOI), credentials=credentials, http=fake_session) is None
    )
    # The Meta key is for another product and is not used here.
    assert (
        await fetcher.fetch(
            ArticleIds(doi=DOI), credentials={"springer_meta_api_key": META_KEY}, http=fake_session
        )
        is None
    )
    assert fake.count() == 0


@pytest.mark.parametrize(
    "response",
    [
        FakeResponse(200, EMPTY),
        FakeResponse(200, NO_BODY),
        FakeResponse(200, b""),
        FakeResponse(200, ENVELOPE[: len(ENVELOPE) // 2]),  # truncated: no </article>
        FakeResponse(200, b"<!DOCTYPE html><html><body>Service unavailable</body></html>"),
        FakeResponse(200, b'{"status": "Fail", "message": "Authentication failed"}'),
        FakeResponse(401, {"status": "Fail", "message": "Authentication failed"}),
        FakeResponse(403, b"<error>Forbidden</error>"),
        FakeResponse(404, b""),
    ],
    ids=["no-records", "no-body", "empty", "truncated", "html", "json", "401", "403", "404"],
)
async def test_oa_misses_and_malformed_answers_decline(
    fake: FakeUpstream, fake_session: Session, response: FakeResponse
) -> None:
    route_oa(fake, response)
    blob = await SpringerFetcher().fetch(
        ArticleIds(doi=DOI), credentials={"springer_api_key": KEY}, http=fake_session
    )
    assert blob is None


async def test_oa_retried_failure_then_success(fake: FakeUpstream, fake_session: Session) -> None:
    route_oa(fake, FakeResponse(200, ENVELOPE))
    fake.fail_next(HOST, "/openaccess", FakeResponse(429, {"message": "quota"}))
    blob = await SpringerFetcher().fetch(
        ArticleIds(doi=DOI), credentials={"springer_api_key": KEY}, http=fake_session
    )
    assert blob is not None
    assert fake.count(HOST) == 2


@pytest.mark.parametrize("outcome", [FakeResponse(503, b"busy"), "drop"])
async def test_oa_failure_after_retries_declines_without_leaking_the_key(
    fake: FakeUpstream,
    fake_session: Session,
    outcome: FakeResponse | str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    route_oa(fake, FakeResponse(200, ENVELOPE))
    fake.fail_next(HOST, "/openaccess", outcome, outcome, outcome)
    async with fake_session.scope() as scope:
        blob = await SpringerFetcher().fetch(
            ArticleIds(doi=DOI), credentials={"springer_api_key": KEY}, http=scope
        )
        assert blob is None
        assert scope.failures
        assert not any(KEY in reason for reason in scope.failures)
    assert caplog.records  # something was logged ...
    assert KEY not in caplog.text  # ... and never the key


async def test_oa_invalid_doi_declines_without_request(
    fake: FakeUpstream, fake_session: Session
) -> None:
    blob = await SpringerFetcher().fetch(
        ArticleIds(doi="not a doi"), credentials={"springer_api_key": KEY}, http=fake_session
    )
    assert blob is None
    assert fake.count() == 0


async def test_key_never_appears_in_logs_uris_or_reprs(
    fake: FakeUpstream, fake_session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    route_oa(fake, FakeResponse(200, ENVELOPE))
    fake.route(HOST, r"/meta/v2/json", json_response(meta_record("true")))
    fake.route("link.springer.com", r"/openurl/pdf", FakeResponse(403, b"denied"))
    blob = await SpringerFetcher().fetch(
        ArticleIds(doi=DOI), credentials={"springer_api_key": KEY}, http=fake_session
    )
    source = SpringerFileSource()
    creds = {"springer_meta_api_key": META_KEY}
    files = await source.list_files(ArticleIds(doi=META_DOI), credentials=creds, http=fake_session)
    assert blob is not None and files
    assert await source.fetch_file(files[0], credentials=creds, http=fake_session) is None
    shown = " ".join([repr(blob), repr(files), str(blob.file.uri), caplog.text])
    assert KEY not in shown and META_KEY not in shown
    assert "api_key" in caplog.text  # the request URL was logged, redacted


def test_extract_article_does_not_match_article_meta() -> None:
    body = b"<response><article-meta/><article-set/><records/></response>"
    assert extract_article(body) is None
    assert extract_article(b"<article>\n<body/></article>") is not None
    assert extract_article(b"</article><article>") is None


# -- Meta API file source -----------------------------------------------------------------------


async def test_meta_open_access_pdf(fake: FakeUpstream, fake_session: Session) -> None:
    fake.route(HOST, r"/meta/v2/json", json_response(meta_record("true")))
    files = await SpringerFileSource().list_files(
        ArticleIds(doi=META_DOI),
        credentials={"springer_meta_api_key": META_KEY},
        http=fake_session,
    )
    assert files == (
        File(
            kind=FileKind.BODY,
            source="springer",
            media_type=PDF,
            uri=f"http://link.springer.com/openurl/pdf?id=doi:{META_DOI}",
        ),
    )
    (req,) = fake.requests(HOST)
    assert req.path == "/meta/v2/json"
    assert req.param("q") == f"doi:{META_DOI}"
    assert req.param("api_key") == META_KEY


async def test_meta_subscription_pdf_is_institutional(
    fake: FakeUpstream, fake_session: Session
) -> None:
    fake.route(HOST, r"/meta/v2/json", json_response(meta_record("false")))
    (file,) = await SpringerFileSource().list_files(
        ArticleIds(doi=META_DOI),
        credentials={"springer_meta_api_key": META_KEY},
        http=fake_session,
    )
    assert file.credential_key == INSTITUTIONAL


@pytest.mark.parametrize(
    "response",
    [
        json_response(meta_record("true", urls=[{"format": "html", "value": "http://x.org/"}])),
        json_response(meta_record("true", urls=[{"format": "pdf", "value": ""}])),
        json_response(meta_record("true", urls=[{"format": "pdf", "value": "javascript:x"}])),
        json_response({**meta_record("true"), "records": []}),
        json_response({"apiMessage": "…"}),
        FakeResponse(200, b"{not json", {"Content-Type": "application/json"}),
        FakeResponse(200, b"<html><body>Error</body></html>"),
        json_response({"status": "Fail", "message": "Authentication failed"}, status=401),
        FakeResponse(404, b""),
    ],
    ids=[
        "no-pdf",
        "empty-url",
        "non-http",
        "no-records",
        "no-records-key",
        "bad-json",
        "html",
        "401",
        "404",
    ],
)
async def test_meta_misses_decline(
    fake: FakeUpstream, fake_session: Session, response: FakeResponse
) -> None:
    fake.route(HOST, r"/meta/v2/json", response)
    files = await SpringerFileSource().list_files(
        ArticleIds(doi=META_DOI),
        credentials={"springer_meta_api_key": META_KEY},
        http=fake_session,
    )
    assert files == ()


async def test_meta_without_key_or_doi_makes_no_request(
    fake: FakeUpstream, fake_session: Session
) -> None:
    source = SpringerFileSource()
    assert await source.list_files(ArticleIds(doi=META_DOI), http=fake_session) == ()
    assert (
        await source.list_files(
            ArticleIds(doi=META_DOI), credentials={"springer_api_key": KEY}, http=fake_session
        )
        == ()
    )
    assert (
        await source.list_files(
            ArticleIds(pmid="30000001"),
            credentials={"springer_meta_api_key": META_KEY},
            http=fake_session,
        )
        == ()
    )
    assert fake.count() == 0


async def test_meta_retried_then_abandoned(fake: FakeUpstream, fake_session: Session) -> None:
    fake.route(HOST, r"/meta/v2/json", json_response(meta_record("true")))
    creds = {"springer_meta_api_key": META_KEY}
    fake.fail_next(HOST, "/meta", FakeResponse(500, b""))
    assert await SpringerFileSource().list_files(
        ArticleIds(doi=META_DOI), credentials=creds, http=fake_session
    )
    fake.fail_next(HOST, "/meta", "drop", "drop", "drop")
    async with fake_session.scope() as scope:
        files = await SpringerFileSource().list_files(
            ArticleIds(doi=META_DOI), credentials=creds, http=scope
        )
        assert files == ()
        assert scope.failures


async def test_fetch_file_follows_redirects_and_sends_no_key(
    fake: FakeUpstream, fake_session: Session
) -> None:
    pdf_url = f"https://link.springer.com/content/pdf/{META_DOI}.pdf"
    fake.route(HOST, r"/meta/v2/json", json_response(meta_record("true")))
    fake.route("link.springer.com", r"/openurl/pdf", FakeResponse(302, b"", {"Location": pdf_url}))
    fake.route(
        "link.springer.com",
        r"/content/pdf/.*",
        FakeResponse(200, b"%PDF-1.7 springer", {"Content-Type": "application/pdf"}),
    )
    source = SpringerFileSource()
    creds = {"springer_meta_api_key": META_KEY, "springer_api_key": KEY}
    (file,) = await source.list_files(
        ArticleIds(doi=META_DOI), credentials=creds, http=fake_session
    )
    blob = await source.fetch_file(file, credentials=creds, http=fake_session)
    assert blob == Blob(file=file, content=b"%PDF-1.7 springer")
    assert blob.file is file
    pdf_requests: list[FakeRequest] = fake.requests("link.springer.com")
    assert [r.path for r in pdf_requests] == ["/openurl/pdf", f"/content/pdf/{META_DOI}.pdf"]
    for r in pdf_requests:
        assert "api_key" not in r.query
        sent = " ".join([r.path, str(r.query), str(r.headers)])
        assert KEY not in sent and META_KEY not in sent


async def test_fetch_file_declines_on_error_status(
    fake: FakeUpstream, fake_session: Session
) -> None:
    fake.route("link.springer.com", r"/openurl/pdf", FakeResponse(403, b"no entitlement"))
    file = File(
        FileKind.BODY,
        "springer",
        PDF,
        f"http://link.springer.com/openurl/pdf?id=doi:{META_DOI}",
        credential_key=INSTITUTIONAL,
    )
    source = SpringerFileSource()
    assert await source.fetch_file(file, http=fake_session) is None
    assert await source.fetch_file(File(FileKind.BODY, "springer"), http=fake_session) is None


async def test_fetch_file_with_an_unusable_uri_declines(fake_session: Session) -> None:
    file = File(FileKind.BODY, "springer", PDF, "http://[not-a-host/x.pdf")
    assert await SpringerFileSource().fetch_file(file, http=fake_session) is None


def _hold_crossref(session: Session, doi: str, member: str, publisher: str) -> None:
    """Prime the single-work Crossref answer a bulk lookup would have left for ``doi``."""
    from litfetch_df.sources.crossref import crossref_work_request
    from litfetch_df.store.answers import CachedResponse

    request = crossref_work_request(doi, session.contact)
    body = json.dumps(
        {"status": "ok", "message": {"DOI": doi, "member": member, "publisher": publisher}}
    )
    session.prime(
        "GET",
        request.url,
        params=request.params,
        response=CachedResponse(
            200, (("content-type", "application/json"),), body.encode(), request.url
        ),
    )


async def test_a_held_crossref_record_of_another_publisher_spares_the_request(
    fake: FakeUpstream, fake_session: Session
) -> None:
    # The prefix says Springer Nature, but the record the run holds names Elsevier (member
    # 78): the journal changed hands, and Springer's APIs cannot answer for it.
    route_oa(fake, FakeResponse(200, ENVELOPE, {"Content-Type": "application/xml"}))
    _hold_crossref(fake_session, DOI, "78", "Elsevier BV")
    blob = await SpringerFetcher().fetch(
        ArticleIds(doi=DOI), credentials={"springer_api_key": KEY}, http=fake_session
    )
    assert blob is None
    assert fake.count(HOST) == 0
    assert fake.count() == 0  # looking at the held record asked nobody


async def test_a_held_crossref_record_naming_springer_nature_opens_another_prefix(
    fake: FakeUpstream, fake_session: Session
) -> None:
    moved = "10.9999/moved-to-springer.1"
    route_oa(fake, FakeResponse(200, ENVELOPE, {"Content-Type": "application/xml"}))
    without = await SpringerFetcher().fetch(
        ArticleIds(doi=moved), credentials={"springer_api_key": KEY}, http=fake_session
    )
    assert without is None and fake.count(HOST) == 0  # the prefix alone: not Springer's
    _hold_crossref(fake_session, moved, "297", "Springer Science and Business Media LLC")
    blob = await SpringerFetcher().fetch(
        ArticleIds(doi=moved), credentials={"springer_api_key": KEY}, http=fake_session
    )
    assert blob is not None
    (req,) = fake.requests(HOST)
    assert req.param("q") == f"doi:{moved}"
