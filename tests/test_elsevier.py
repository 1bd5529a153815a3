"""ElsevierFetcher: Crossref link locator, key handling, full-text hit rule."""

from __future__ import annotations

import asyncio
import copy
import logging
import urllib.parse

import pytest

from litfetch_df import ELSEVIER_XML, ArticleIds, FileKind, Session
from litfetch_df.sources.elsevier import (
    ENTITLEMENT_PROBES,
    ElsevierFetcher,
    elsevier_xml_link,
    is_elsevier_api_url,
    is_full_text,
)
from tests.conftest import FAST_RETRY, data_json
from tests.fake_upstream import (
    FakeRequest,
    FakeResponse,
    FakeUpstream,
    json_response,
    xml_response,
)
from tests.test_crossref import CROSSREF, RECORDED, route_crossref

ELSEVIER = "api.elsevier.com"
KEY = "els-secret-4f1c9a7e"
CREDS = {"elsevier_api_key": KEY}
DOI = "10.1016/j.xgen.2025.100814"  # recorded Crossref record links api.elsevier.com text/xml
ARTICLE_PATH = "/content/article/PII:S2666979X25000709"

# Shaped as upstream.md 3.4 shows (written for these tests; no real body is kept).
FULL_TEXT = b"""<?xml version="1.0" encoding="UTF-8"?>
<full-text-retrieval-response xmlns="http://www.elsevier.com/xml/svapi/article/dtd"
    xmlns:ce="http://www.elsevier.com/xml/common/dtd"
    xmlns:dc="http://purl.org/dc/elements/1.1/"
    xmlns:prism="http://prismstandard.org/namespaces/basic/2.0/"
    xmlns:xocs="http://www.elsevier.com/xml/xocs/dtd">
  <coredata>
    <prism:url>https://api.elsevier.com/content/article/pii/S0000000026000011</prism:url>
    <dc:identifier>doi:10.1016/j.example.2026.01.011</dc:identifier>
    <pii>S0000-0000(26)00001-1</pii>
    <prism:doi>10.1016/j.example.2026.01.011</prism:doi>
    <dc:title>An example article</dc:title>
    <openaccess>1</openaccess>
    <openaccessArticle>true</openaccessArticle>
    <openaccessType>Full</openaccessType>
    <openaccessUserLicense>http://creativecommons.org/licenses/by/4.0/</openaccessUserLicense>
    <dc:description>Abstract text.</dc:description>
  </coredata>
  <originalText>
    <xocs:doc>
      <xocs:serial-item>
        <article xmlns="http://www.elsevier.com/xml/ja/dtd">
          <body>
            <ce:sections>
              <ce:section id="s0005">
                <ce:section-title>Introduction</ce:section-title>
                <ce:para>First paragraph.</ce:para>
                <ce:para>Second paragraph.</ce:para>
              </ce:section>
            </ce:sections>
          </body>
        </article>
      </xocs:serial-item>
    </xocs:doc>
  </originalText>
</full-text-retrieval-response>
"""

ABSTRACT_ONLY = b"""<?xml version="1.0" encoding="UTF-8"?>
<full-text-retrieval-response xmlns="http://www.elsevier.com/xml/svapi/article/dtd"
    xmlns:dc="http://purl.org/dc/elements/1.1/"
    xmlns:prism="http://prismstandard.org/namespaces/basic/2.0/">
  <coredata>
    <prism:doi>10.1016/j.example.2026.01.011</prism:doi>
    <dc:title>An example article</dc:title>
    <openaccess>0</openaccess>
    <dc:description>Abstract text only; the full text needs entitlement.</dc:description>
  </coredata>
</full-text-retrieval-response>
"""

AUTH_ERROR = b"""<service-error>
  <status>
    <statusCode>AUTHENTICATION_ERROR</statusCode>
    <statusText>Invalid API Key</statusText>
  </status>
</service-error>
"""


async def fetch(session: Session, doi: str = DOI, creds: object = CREDS) -> object:
    return await ElsevierFetcher().fetch(
        ArticleIds(doi=doi),
        credentials=creds,  # type: ignore[arg-type]
        http=session,
    )


def route_elsevier(fake: FakeUpstream, answer: FakeResponse | None = None) -> None:
    route_crossref(fake)
    fake.route(ELSEVIER, r"/content/article/.+", answer or xml_response(FULL_TEXT))


async def test_hit_sends_key_only_to_elsevier(
    fake: FakeUpstream, fake_session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    route_elsevier(fake)
    blob = await ElsevierFetcher().fetch(ArticleIds(doi=DOI), credentials=CREDS, http=fake_session)
    assert blob is not None
    assert blob.content == FULL_TEXT
    assert blob.file.kind is FileKind.BODY
    assert blob.file.source == "elsevier_oa"
    assert blob.file.media_type == ELSEVIER_XML
    assert blob.file.uri == (
        "https://api.elsevier.com/content/article/PII:S2666979X25000709?httpAccept=text/xml"
    )
    (els,) = fake.requests(ELSEVIER)
    assert els.path == ARTICLE_PATH
    assert els.param("httpAccept") == "text/xml"
    assert els.headers["x-els-apikey"] == KEY
    assert els.headers["accept"] == "text/xml"
    assert "apiKey" not in els.query
    (cr,) = fake.requests(CROSSREF)
    assert KEY not in repr(cr.headers) and KEY not in repr(cr.query)
    assert KEY not in caplog.text
    assert KEY not in repr(blob)


async def test_no_key_makes_no_request(fake: FakeUpstream, fake_session: Session) -> None:
    route_elsevier(fake)
    for creds in (
        None,
        {},
        {"elsevier_api_key": ""},
        {"elsevier_api_key": "  "},
        {"elsevier_api_key": 42},
    ):
        assert await fetch(fake_session, creds=creds) is None
    assert (
        await ElsevierFetcher().fetch(
            ArticleIds(pmid="30000001"), credentials=CREDS, http=fake_session
        )
        is None
    )
    assert fake.count() == 0


async def test_not_elsevier_declines_without_contacting_elsevier(
    fake: FakeUpstream, fake_session: Session
) -> None:
    route_elsevier(fake)
    assert await fetch(fake_session, doi="10.1038/s42256-024-00832-8") is None  # Nature links
    assert await fetch(fake_session, doi="10.1000/unknown.1") is None  # Crossref 404
    assert fake.count(CROSSREF) == 2
    assert fake.count(ELSEVIER) == 0


async def test_link_on_another_host_is_never_sent_the_key(
    fake: FakeUpstream, fake_session: Session
) -> None:
    crossref = data_json("json", RECORDED[DOI])
    crossref["message"]["link"] = [
        {"URL": "https://api.elsevier.com.evil.example/steal", "content-type": "text/xml"},
        {"URL": "https://evil.example/api.elsevier.com/x", "content-type": "text/xml"},
        {"URL": "http://api.elsevier.com/content/article/PII:S1", "content-type": "text/xml"},
        {"URL": "https://user@api.elsevier.com/content/article/PII:S1", "content-type": "text/xml"},
    ]
    fake.route(CROSSREF, r"/works/.+", json_response(crossref))
    for host in ("api.elsevier.com.evil.example", "evil.example", ELSEVIER):
        fake.route(host, r"/.*", xml_response(FULL_TEXT))
    assert await fetch(fake_session) is None
    assert fake.count() == 1  # only Crossref was asked
    assert all(KEY not in repr(r.headers) for r in fake.requests())


def test_link_locator_rules() -> None:
    record = data_json("json", RECORDED[DOI])["message"]
    assert elsevier_xml_link(record) == (
        "https://api.elsevier.com/content/article/PII:S2666979X25000709?httpAccept=text/xml"
    )
    assert elsevier_xml_link({"link": None}) is None
    assert (
        elsevier_xml_link(
            {"link": [{"URL": "https://api.elsevier.com/x", "content-type": "text/plain"}]}
        )
        is None
    )
    assert is_elsevier_api_url("https://sub.api.elsevier.com/x")
    assert not is_elsevier_api_url("https://notapi.elsevier.com/x")
    assert not is_elsevier_api_url("https://api.elsevier.com:8443/x")
    assert not is_elsevier_api_url("not a url")


async def test_abstract_only_is_a_miss(fake: FakeUpstream, fake_session: Session) -> None:
    route_elsevier(fake, xml_response(ABSTRACT_ONLY))
    assert await fetch(fake_session) is None
    assert fake.count(ELSEVIER) == 1


def test_full_text_rule() -> None:
    assert is_full_text(FULL_TEXT)
    assert not is_full_text(ABSTRACT_ONLY)
    # The paragraphs declare their prefix: since issue 14 a body must parse to count.
    para = b'<ce:para xmlns:ce="http://www.elsevier.com/xml/common/dtd">x</ce:para>'
    three_paras = ABSTRACT_ONLY.replace(b"</coredata>", b"</coredata>" + para * 3)
    assert is_full_text(three_paras)
    undeclared = ABSTRACT_ONLY.replace(b"</coredata>", b"</coredata>" + b"<ce:para>x</ce:para>" * 3)
    assert not is_full_text(undeclared)  # not well-formed XML
    assert not is_full_text(b"<html><body><ce:sections/></body></html>")
    assert not is_full_text(b"")


@pytest.mark.parametrize(
    "answer",
    [
        FakeResponse(401, AUTH_ERROR, {"Content-Type": "text/xml"}),
        FakeResponse(
            404,
            b"<service-error><status><statusCode>RESOURCE_NOT_FOUND</statusCode></status></service-error>",
        ),
        FakeResponse(200, b""),
        FakeResponse(
            200,
            b"<html><body>Maintenance <ce:sections></body></html>",
            {"Content-Type": "text/html"},
        ),
        FakeResponse(200, FULL_TEXT[: len(FULL_TEXT) // 3].replace(b"<ce:sections", b"")),
    ],
)
async def test_error_and_malformed_answers_decline(
    fake: FakeUpstream, fake_session: Session, answer: FakeResponse
) -> None:
    route_elsevier(fake, answer)
    assert await fetch(fake_session) is None


async def test_retried_failure_then_hit(fake: FakeUpstream, fake_session: Session) -> None:
    route_elsevier(fake)
    fake.fail_next(ELSEVIER, "/content/", FakeResponse(429, b"<service-error/>"))
    assert await fetch(fake_session) is not None
    assert fake.count(ELSEVIER) == 2


async def test_all_failing_declines_and_records_failure(
    fake: FakeUpstream, fake_session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    route_elsevier(fake)
    fake.fail_next(ELSEVIER, "/content/", "drop", "drop", "drop")
    assert await fetch(fake_session) is None
    assert fake_session.failures
    assert KEY not in caplog.text
    assert all(KEY not in reason for reason in fake_session.failures)


async def test_crossref_failing_declines(fake: FakeUpstream, fake_session: Session) -> None:
    route_elsevier(fake)
    fake.fail_next(CROSSREF, "/works/", *([FakeResponse(503, "busy")] * 3))
    assert await fetch(fake_session) is None
    assert fake.count(ELSEVIER) == 0
    assert fake_session.failures


async def test_path_escaping_doi_sends_nothing(fake: FakeUpstream, fake_session: Session) -> None:
    route_elsevier(fake)
    assert await fetch(fake_session, doi="10.1234/../../admin") is None
    assert fake.count() == 0


async def test_redirect_is_not_followed_with_the_key(fake: FakeUpstream) -> None:
    route_elsevier(fake, FakeResponse(302, b"", {"Location": "https://collector.example/grab"}))
    fake.route("collector.example", r"/.*", xml_response(FULL_TEXT))
    async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as s:
        assert await fetch(s) is None
    assert fake.count("collector.example") == 0


# -- entitlement: closed articles are asked only until the key proves not entitled ----------------


def route_world(fake: FakeUpstream, *, entitled: bool, failing: int = 0) -> None:
    """Crossref records for ``10.1016/j.open.N`` (CC BY deposited) and ``10.1016/j.closed.N``
    (no licence), shaped as the recorded one; Elsevier gives full text to open articles,
    and to closed ones only when ``entitled``. The first ``failing`` Elsevier asks get 503."""
    recorded = data_json("json", RECORDED[DOI.lower()])

    def crossref(req: FakeRequest) -> FakeResponse:
        doi = urllib.parse.unquote(req.path.removeprefix("/works/")).lower()
        kind, number = doi.removeprefix("10.1016/j.").split(".")
        message = copy.deepcopy(recorded["message"])
        message["DOI"] = doi
        pii = f"S{kind.upper()}{number}"
        message["link"] = [
            {
                "URL": f"https://{ELSEVIER}/content/article/PII:{pii}?httpAccept=text/xml",
                "content-type": "text/xml",
                "content-version": "vor",
                "intended-application": "text-mining",
            }
        ]
        message["license"] = (
            [
                {
                    "URL": "http://creativecommons.org/licenses/by/4.0/",
                    "content-version": "vor",
                    "delay-in-days": 0,
                    "start": {"date-parts": [[2026, 1, 1]]},
                }
            ]
            if kind == "open"
            else []
        )
        return json_response({**recorded, "message": message})

    asked: list[int] = []

    def elsevier(req: FakeRequest) -> FakeResponse:
        asked.append(1)
        if len(asked) <= failing:
            return FakeResponse(503, "busy")
        open_ = "/PII:SOPEN" in req.path
        return xml_response(FULL_TEXT if open_ or entitled else ABSTRACT_ONLY)

    fake.route(CROSSREF, r"/works/.+", crossref)
    fake.route(ELSEVIER, r"/content/article/.+", elsevier)


async def fetch_all(session: Session, dois: list[str], fetcher: ElsevierFetcher) -> list[object]:
    return list(
        await asyncio.gather(
            *(fetcher.fetch(ArticleIds(doi=d), credentials=CREDS, http=session) for d in dois)
        )
    )


async def test_closed_articles_stop_being_asked_once_the_key_is_not_entitled(
    fake: FakeUpstream, fake_session: Session
) -> None:
    route_world(fake, entitled=False)
    fetcher = ElsevierFetcher()
    closed = [f"10.1016/j.closed.{i}" for i in range(8)]
    opened = [f"10.1016/j.open.{i}" for i in range(3)]
    got = await fetch_all(fake_session, [*closed, *opened], fetcher)  # all at once
    assert got[:8] == [None] * 8 and all(b is not None for b in got[8:])
    assert fetcher.entitled is False
    closed_asks = [r for r in fake.requests(ELSEVIER) if "/PII:SCLOSED" in r.path]
    assert len(closed_asks) == ENTITLEMENT_PROBES  # not 8
    assert len(fake.requests(ELSEVIER)) == ENTITLEMENT_PROBES + 3  # open ones always asked


async def test_one_closed_full_text_means_every_closed_article_is_asked(
    fake: FakeUpstream, fake_session: Session
) -> None:
    route_world(fake, entitled=True)
    fetcher = ElsevierFetcher()
    closed = [f"10.1016/j.closed.{i}" for i in range(6)]
    got = await fetch_all(fake_session, closed, fetcher)
    assert all(b is not None for b in got) and fetcher.entitled is True
    assert len(fake.requests(ELSEVIER)) == 6


async def test_a_failed_ask_is_no_evidence_and_an_insttoken_says_entitled(
    fake: FakeUpstream, fake_session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    route_world(fake, entitled=True, failing=FAST_RETRY.max_attempts)
    fetcher = ElsevierFetcher()
    first = await fetcher.fetch(
        ArticleIds(doi="10.1016/j.closed.1"), credentials=CREDS, http=fake_session
    )
    assert first is None and fetcher.entitled is None  # 503s: still not known
    second = await fetcher.fetch(
        ArticleIds(doi="10.1016/j.closed.2"), credentials=CREDS, http=fake_session
    )
    assert second is not None and fetcher.entitled is True

    fake.reset_log()
    token = "inst-token-77c0"
    with_token = {**CREDS, "elsevier_insttoken": token}
    blob = await ElsevierFetcher().fetch(
        ArticleIds(doi="10.1016/j.closed.3"), credentials=with_token, http=fake_session
    )
    assert blob is not None
    (asked,) = fake.requests(ELSEVIER)
    assert asked.headers["x-els-insttoken"] == token
    assert token not in caplog.text
