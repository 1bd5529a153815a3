"""PmcOaFetcher: the PMC Open Access bucket as body fetcher and file source."""

from __future__ import annotations

import urllib.parse
from xml.sax.saxutils import escape

import pytest

from litfetch_df import JATS_XML, PDF, ArticleIds, Blob, File, FileKind, Session
from litfetch_df.sources.pmc_oa import BUCKET_URL, PmcOaFetcher
from tests.conftest import data_bytes
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream, xml_response

HOST = "pmc-oa-opendata.s3.amazonaws.com"
NS = "http://s3.amazonaws.com/doc/2006-03-01/"
JATS = data_bytes("jats", "PMC13250820_ali-license-ref_supplementary.xml")
JATS_OLD = data_bytes("jats", "PMC3166277_bmc-microbiol_1471-2180-11-174.nxml")

NO_SUCH_KEY = b"""<?xml version="1.0" encoding="UTF-8"?>
<Error>
  <Code>NoSuchKey</Code>
  <Message>The specified key does not exist.</Message>
  <Key>PMC7000001.3/PMC7000001.3.xml</Key>
  <RequestId>4Q1K8D2M9X7T3B6C</RequestId>
  <HostId>abc</HostId>
</Error>
"""


class FakeBucket:
    """A tiny ListObjectsV2 + GetObject emulation of the public bucket, on the fake upstream."""

    def __init__(self, fake: FakeUpstream, objects: dict[str, bytes], *, max_keys: int = 1000):
        self.objects = dict(objects)
        self.max_keys = max_keys
        fake.route(HOST, r"/", self.list_objects)
        fake.route(HOST, r"/.+", self.get_object)

    def list_objects(self, req: FakeRequest) -> FakeResponse:
        assert req.param("list-type") == "2"
        prefix = req.param("prefix") or ""
        delimiter = req.param("delimiter")
        keys = sorted(k for k in self.objects if k.startswith(prefix))
        start = int(req.param("continuation-token") or 0)
        contents: list[str] = []
        common: list[str] = []
        if delimiter:
            for key in keys:
                rest = key[len(prefix) :]
                if delimiter in rest:
                    cp = prefix + rest.split(delimiter, 1)[0] + delimiter
                    if cp not in common:
                        common.append(cp)
                else:
                    contents.append(key)
            page, truncated, nxt = contents, False, None
        else:
            page = keys[start : start + self.max_keys]
            truncated = start + self.max_keys < len(keys)
            nxt = str(start + self.max_keys) if truncated else None
        body = [
            '<?xml version="1.0" encoding="UTF-8"?>',
            f'<ListBucketResult xmlns="{NS}">',
            "<Name>pmc-oa-opendata</Name>",
            f"<Prefix>{escape(prefix)}</Prefix>",
            f"<KeyCount>{len(page) + len(common)}</KeyCount>",
            "<MaxKeys>1000</MaxKeys>",
        ]
        if delimiter:
            body.append(f"<Delimiter>{escape(delimiter)}</Delimiter>")
        body.append(f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>")
        for key in page:
            body.append(
                f"<Contents><Key>{escape(key)}</Key>"
                "<LastModified>2026-01-09T04:12:55.000Z</LastModified>"
                "<ETag>&quot;9a8b7c6d5e4f30211203f4e5d6c7b8a9&quot;</ETag>"
                f"<Size>{len(self.objects[key])}</Size>"
                "<StorageClass>STANDARD</StorageClass></Contents>"
            )
        for cp in common:
            body.append(f"<CommonPrefixes><Prefix>{escape(cp)}</Prefix></CommonPrefixes>")
        if nxt is not None:
            body.append(f"<NextContinuationToken>{nxt}</NextContinuationToken>")
        body.append("</ListBucketResult>")
        return xml_response("".join(body))

    def get_object(self, req: FakeRequest) -> FakeResponse:
        key = urllib.parse.unquote(req.path[1:])
        if key in self.objects:
            return FakeResponse(200, self.objects[key], {"Content-Type": "binary/octet-stream"})
        return xml_response(NO_SUCH_KEY, status=404)


def listing_requests(fake: FakeUpstream) -> list[FakeRequest]:
    return [r for r in fake.requests(HOST) if r.path == "/"]


# -- fetch (body) -------------------------------------------------------------------------------


async def test_fetch_returns_newest_version_comparing_numerically(
    fake: FakeUpstream, fake_session: Session
) -> None:
    FakeBucket(
        fake,
        {
            "PMC7000001.1/PMC7000001.1.xml": JATS_OLD,
            "PMC7000001.2/PMC7000001.2.xml": JATS_OLD,
            "PMC7000001.9/PMC7000001.9.xml": JATS_OLD,
            "PMC7000001.10/PMC7000001.10.xml": JATS,
            # A different article whose id starts with the same digits.
            "PMC70000011.99/PMC70000011.99.xml": JATS_OLD,
        },
    )
    blob = await PmcOaFetcher().fetch(ArticleIds(pmcid="PMC7000001"), http=fake_session)
    assert blob is not None
    assert blob.content == JATS
    assert blob.file == File(
        kind=FileKind.BODY,
        source="pmc_oa_s3",
        media_type=JATS_XML,
        uri=f"{BUCKET_URL}/PMC7000001.10/PMC7000001.10.xml",
    )
    (listing,) = listing_requests(fake)
    assert listing.param("prefix") == "PMC7000001."
    assert listing.param("delimiter") is None  # every version's keys in one listing


async def test_fetch_honours_an_explicit_version_without_listing(
    fake: FakeUpstream, fake_session: Session
) -> None:
    FakeBucket(
        fake,
        {
            "PMC7000001.1/PMC7000001.1.xml": JATS,
            "PMC7000001.2/PMC7000001.2.xml": JATS_OLD,
            "PMC7000001.3/PMC7000001.3.xml": JATS,
        },
    )
    blob = await PmcOaFetcher().fetch(ArticleIds(pmcid="pmc7000001.2"), http=fake_session)
    assert blob is not None and blob.content == JATS_OLD
    assert blob.file.uri == f"{BUCKET_URL}/PMC7000001.2/PMC7000001.2.xml"
    assert listing_requests(fake) == []


async def test_prefix_with_no_objects_is_a_miss(fake: FakeUpstream, fake_session: Session) -> None:
    FakeBucket(fake, {"PMC7000002.1/PMC7000002.1.xml": JATS})
    fetcher = PmcOaFetcher()
    ids = ArticleIds(pmcid="PMC7000001")
    assert await fetcher.fetch(ids, http=fake_session) is None
    assert await fetcher.list_files(ids, http=fake_session) == ()
    # Only listings were asked; no object GET for an article that is not there.
    assert all(r.path == "/" for r in fake.requests(HOST))


async def test_missing_body_object_is_a_miss(fake: FakeUpstream, fake_session: Session) -> None:
    FakeBucket(fake, {"PMC7000001.1/PMC7000001.1.pdf": b"%PDF-1.7"})
    assert await PmcOaFetcher().fetch(ArticleIds(pmcid="PMC7000001"), http=fake_session) is None


async def test_listing_prefixes_of_other_articles_are_ignored(
    fake: FakeUpstream, fake_session: Session
) -> None:
    hostile = (
        f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="{NS}">'
        "<Prefix>PMC7000001.</Prefix><IsTruncated>false</IsTruncated>"
        "<CommonPrefixes><Prefix>PMC7000001.1/</Prefix></CommonPrefixes>"
        "<CommonPrefixes><Prefix>PMC9999999.7/</Prefix></CommonPrefixes>"
        "<CommonPrefixes><Prefix>PMC7000001.x/</Prefix></CommonPrefixes>"
        "</ListBucketResult>"
    )
    fake.route(HOST, r"/", xml_response(hostile))
    fake.route(HOST, r"/PMC7000001\.1/PMC7000001\.1\.xml", FakeResponse(200, JATS))
    blob = await PmcOaFetcher().fetch(ArticleIds(pmcid="PMC7000001"), http=fake_session)
    assert blob is not None
    assert blob.file.uri == f"{BUCKET_URL}/PMC7000001.1/PMC7000001.1.xml"


@pytest.mark.parametrize(
    "body",
    [
        JATS[: len(JATS) // 2],  # truncated
        b"<!DOCTYPE html><html><body><h1>Service Unavailable</h1></body></html>",
        b'{"error": "nope"}',
        NO_SUCH_KEY,  # an S3 error document served with 200
        b"",
    ],
    ids=["truncated", "html", "json", "s3-error", "empty"],
)
async def test_malformed_body_declines(
    fake: FakeUpstream, fake_session: Session, body: bytes
) -> None:
    FakeBucket(fake, {"PMC7000001.1/PMC7000001.1.xml": body})
    assert await PmcOaFetcher().fetch(ArticleIds(pmcid="PMC7000001"), http=fake_session) is None


@pytest.mark.parametrize(
    "listing",
    [
        f'<?xml version="1.0"?><ListBucketResult xmlns="{NS}"><CommonPrefixes><Prefix>PMC70',
        "<html><body>Maintenance</body></html>",
        '{"CommonPrefixes": ["PMC7000001.1/"]}',
        "",
    ],
    ids=["truncated", "html", "json", "empty"],
)
async def test_malformed_listing_declines(
    fake: FakeUpstream, fake_session: Session, listing: str
) -> None:
    fake.route(HOST, r"/", FakeResponse(200, listing.encode()))
    fake.route(HOST, r"/.+", FakeResponse(200, JATS))
    fetcher = PmcOaFetcher()
    ids = ArticleIds(pmcid="PMC7000001")
    assert await fetcher.fetch(ids, http=fake_session) is None
    assert await fetcher.list_files(ids, http=fake_session) == ()


async def test_retried_failure_then_success(fake: FakeUpstream, fake_session: Session) -> None:
    FakeBucket(fake, {"PMC7000001.1/PMC7000001.1.xml": JATS})
    fake.fail_next(HOST, "/", FakeResponse(503, b"<Error><Code>SlowDown</Code></Error>"))
    blob = await PmcOaFetcher().fetch(ArticleIds(pmcid="PMC7000001"), http=fake_session)
    assert blob is not None and blob.content == JATS
    assert len(listing_requests(fake)) == 2
    assert fake_session.failures == ()


@pytest.mark.parametrize(
    "outcome", [FakeResponse(503, b"<Error><Code>SlowDown</Code></Error>"), "drop"]
)
async def test_failure_after_every_retry_declines_and_is_recorded(
    fake: FakeUpstream, fake_session: Session, outcome: FakeResponse | str
) -> None:
    FakeBucket(fake, {"PMC7000001.1/PMC7000001.1.xml": JATS})
    fake.fail_next(HOST, "/", outcome, outcome, outcome)
    async with fake_session.scope() as scope:
        assert await PmcOaFetcher().fetch(ArticleIds(pmcid="PMC7000001"), http=scope) is None
        assert scope.failures
    assert len(listing_requests(fake)) == 3


async def test_invalid_pmcid_declines_without_request(
    fake: FakeUpstream, fake_session: Session
) -> None:
    fetcher = PmcOaFetcher()
    ids = ArticleIds(pmcid="PMC12/../x")
    assert await fetcher.fetch(ids, http=fake_session) is None
    assert await fetcher.list_files(ids, http=fake_session) == ()
    assert await fetcher.fetch(ArticleIds(doi="10.1000/x"), http=fake_session) is None
    assert fake.count() == 0


# -- list_files ---------------------------------------------------------------------------------

BUCKET = {
    "PMC7000001.1/PMC7000001.1.xml": JATS_OLD,
    "PMC7000001.1/old-figure.jpg": b"\xff\xd8old",
    "PMC7000001.2/PMC7000001.2.json": b'{"pmcid": "PMC7000001", "version": 2}',
    "PMC7000001.2/PMC7000001.2.pdf": b"%PDF-1.7 body",
    "PMC7000001.2/PMC7000001.2.txt": b"plain text",
    "PMC7000001.2/PMC7000001.2.xml": JATS,
    "PMC7000001.2/jcb-202201001-g001.jpg": b"\xff\xd8\xff\xe0 image",
    "PMC7000001.2/jcb-202201001-s001.xlsx": b"PK\x03\x04 sheet",
    "PMC7000001.2/movie S1.mp4": b"\x00\x00\x00\x18ftypmp42",
    "PMC7000001.2/data.unknownext": b"?",
    "PMC7000001.2/extra.xml": b"<dataset/>",
}


async def test_list_files_maps_the_newest_version_folder(
    fake: FakeUpstream, fake_session: Session
) -> None:
    FakeBucket(fake, BUCKET)
    files = await PmcOaFetcher().list_files(ArticleIds(pmcid="PMC7000001"), http=fake_session)
    by_name = {f.filename: f for f in files}
    assert set(by_name) == {
        "PMC7000001.2.pdf",
        "PMC7000001.2.txt",
        "PMC7000001.2.xml",
        "jcb-202201001-g001.jpg",
        "jcb-202201001-s001.xlsx",
        "movie S1.mp4",
        "data.unknownext",
        "extra.xml",
    }  # no older version, no .json metadata record
    assert by_name["PMC7000001.2.xml"] == File(
        kind=FileKind.BODY,
        source="pmc_oa_s3",
        media_type=JATS_XML,
        uri=f"{BUCKET_URL}/PMC7000001.2/PMC7000001.2.xml",
        filename="PMC7000001.2.xml",
        size_bytes=len(JATS),
    )
    assert by_name["PMC7000001.2.pdf"].media_type == PDF
    assert by_name["PMC7000001.2.txt"].media_type == "text/plain"
    assert {f.filename for f in files if f.kind is FileKind.BODY} == {
        "PMC7000001.2.pdf",
        "PMC7000001.2.txt",
        "PMC7000001.2.xml",
    }
    assert by_name["jcb-202201001-g001.jpg"].media_type == "image/jpeg"
    assert by_name["jcb-202201001-s001.xlsx"].kind is FileKind.SUPPLEMENTARY
    assert by_name["jcb-202201001-s001.xlsx"].media_type == (
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    )
    assert by_name["movie S1.mp4"].uri == f"{BUCKET_URL}/PMC7000001.2/movie%20S1.mp4"
    assert by_name["movie S1.mp4"].media_type == "video/mp4"
    assert by_name["data.unknownext"].media_type is None
    assert by_name["extra.xml"].media_type == "application/xml"
    assert all(f.credential_key is None and f.description is None for f in files)
    # One listing told the newest version and its files.
    assert [r.param("prefix") for r in listing_requests(fake)] == ["PMC7000001."]


async def test_list_files_of_a_named_version_lists_only_its_folder(
    fake: FakeUpstream, fake_session: Session
) -> None:
    FakeBucket(fake, BUCKET)
    ids = ArticleIds(pmcid="PMC7000001.1")
    files = await PmcOaFetcher().list_files(ids, http=fake_session)
    assert {f.filename for f in files} == {"PMC7000001.1.xml", "old-figure.jpg"}
    assert [r.param("prefix") for r in listing_requests(fake)] == ["PMC7000001.1/"]


async def test_keys_of_another_article_with_the_same_digits_are_not_its_versions(
    fake: FakeUpstream, fake_session: Session
) -> None:
    # A bucket answering more than the prefix asked (or a lax fake) must not lend PMC70000011's
    # version 99 to PMC7000001.
    fake.route(
        HOST,
        r"/",
        FakeResponse(
            200,
            (
                f'<?xml version="1.0"?><ListBucketResult xmlns="{NS}">'
                "<IsTruncated>false</IsTruncated>"
                "<Contents><Key>PMC7000001.1/PMC7000001.1.xml</Key><Size>5</Size></Contents>"
                "<Contents><Key>PMC70000011.99/PMC70000011.99.xml</Key><Size>5</Size></Contents>"
                "</ListBucketResult>"
            ).encode(),
        ),
    )
    files = await PmcOaFetcher().list_files(ArticleIds(pmcid="PMC7000001"), http=fake_session)
    assert [f.filename for f in files] == ["PMC7000001.1.xml"]


async def test_list_files_follows_continuation_tokens(
    fake: FakeUpstream, fake_session: Session
) -> None:
    FakeBucket(fake, BUCKET, max_keys=3)
    files = await PmcOaFetcher().list_files(ArticleIds(pmcid="PMC7000001"), http=fake_session)
    assert len(files) == 8
    pages = listing_requests(fake)
    assert len(pages) == 4  # 11 keys (both versions, the .json included) at 3 a page
    assert [r.param("continuation-token") for r in pages] == [None, "3", "6", "9"]


async def test_fetch_and_list_share_one_version_listing_in_a_scope(
    fake: FakeUpstream, fake_session: Session
) -> None:
    FakeBucket(fake, BUCKET)
    fetcher = PmcOaFetcher()
    ids = ArticleIds(pmcid="PMC7000001")
    async with fake_session.scope() as scope:
        blob = await fetcher.fetch(ids, http=scope)
        files = await fetcher.list_files(ids, http=scope)
    assert blob is not None and files
    assert len(listing_requests(fake)) == 1


# -- fetch_file ---------------------------------------------------------------------------------


async def test_fetch_file_returns_the_same_file(fake: FakeUpstream, fake_session: Session) -> None:
    FakeBucket(fake, BUCKET)
    fetcher = PmcOaFetcher()
    files = await fetcher.list_files(ArticleIds(pmcid="PMC7000001"), http=fake_session)
    movie = next(f for f in files if f.filename == "movie S1.mp4")
    blob = await fetcher.fetch_file(movie, http=fake_session)
    assert blob == Blob(file=movie, content=BUCKET["PMC7000001.2/movie S1.mp4"])
    assert blob.file is movie


async def test_fetch_file_follows_redirects(fake: FakeUpstream, fake_session: Session) -> None:
    fake.route(
        HOST,
        r"/PMC7000001\.1/moved\.pdf",
        FakeResponse(302, b"", {"Location": f"{BUCKET_URL}/PMC7000001.1/PMC7000001.1.pdf"}),
    )
    fake.route(HOST, r"/PMC7000001\.1/PMC7000001\.1\.pdf", FakeResponse(200, b"%PDF-1.7"))
    file = File(FileKind.BODY, "pmc_oa_s3", PDF, f"{BUCKET_URL}/PMC7000001.1/moved.pdf")
    blob = await PmcOaFetcher().fetch_file(file, http=fake_session)
    assert blob is not None and blob.content == b"%PDF-1.7" and blob.file is file


async def test_fetch_file_declines_missing_and_foreign(
    fake: FakeUpstream, fake_session: Session
) -> None:
    FakeBucket(fake, BUCKET)
    fetcher = PmcOaFetcher()
    gone = File(FileKind.SUPPLEMENTARY, "pmc_oa_s3", None, f"{BUCKET_URL}/PMC7000001.2/gone.jpg")
    assert await fetcher.fetch_file(gone, http=fake_session) is None
    assert await fetcher.fetch_file(File(FileKind.BODY, "pmc_oa_s3"), http=fake_session) is None
    before = fake.count()
    foreign = File(FileKind.BODY, "pmc_oa_s3", PDF, "https://evil.example.org/x.pdf")
    assert await fetcher.fetch_file(foreign, http=fake_session) is None
    assert fake.count() == before


async def test_fetch_file_with_an_unusable_uri_declines(fake_session: Session) -> None:
    file = File(FileKind.BODY, "pmc_oa_s3", PDF, f"{BUCKET_URL}/PMC1.1/x.pdf\x00\n")
    assert await PmcOaFetcher().fetch_file(file, http=fake_session) is None
