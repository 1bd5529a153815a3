"""Hostile upstream input: XXE, entity bombs, path-shaped names and DOIs."""

from __future__ import annotations

from pathlib import Path

import pytest

from litfetch_df import JATS_XML, ArticleIds, Blob, File, FileKind, Session
from litfetch_df.operations.licence import extract_source_metadata
from litfetch_df.sources.europe_pmc import EuropePmcBookshelfFetcher, EuropePmcFetcher
from litfetch_df.sources.pmc_oa import BUCKET_URL, PmcOaFetcher
from litfetch_df.sources.springer import SpringerFetcher
from tests.fake_upstream import FakeResponse, FakeUpstream, xml_response

MARKER = "LITFETCH-XXE-MARKER-7f3a9c21"
EBI = "www.ebi.ac.uk"
REST = "/europepmc/webservices/rest"
S3 = "pmc-oa-opendata.s3.amazonaws.com"
SPRINGER = "api.springernature.com"
KEY = "sk-OA-0123456789abcdef"


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text(f"{MARKER}\n", encoding="utf-8")
    return path


def xxe_documents(secret: Path) -> list[bytes]:
    url = secret.as_uri()
    licence = (
        "<front><article-meta><permissions><license><license-p>&xxe;</license-p></license>"
        "</permissions></article-meta></front>"
    )
    pad = b"<!--" + b"x" * 70_000 + b"-->\n"  # pushes the DOCTYPE past any prefix sniffing
    general = (
        f'<?xml version="1.0"?>\n<!DOCTYPE article [<!ENTITY xxe SYSTEM "{url}">]>\n'
        f"<article>{licence}<body><p>&xxe;</p></body></article>"
    ).encode()
    parameter = (
        f'<?xml version="1.0"?>\n<!DOCTYPE article [<!ENTITY % ext SYSTEM "{url}"> %ext;]>\n'
        f"<article><body><p>x</p></body></article>"
    ).encode()
    padded = pad + general.split(b"\n", 1)[1]
    return [general, parameter, padded]


def bomb(root: str = "article") -> bytes:
    entities = ['<!ENTITY lol "lol">']
    for i in range(1, 10):
        prev = "&lol;" if i == 1 else f"&lol{i - 1};"
        entities.append(f'<!ENTITY lol{i} "{prev * 10}">')
    return (
        f'<?xml version="1.0"?>\n<!DOCTYPE {root} [{"".join(entities)}]>\n'
        f"<{root}><front><article-meta><permissions><license><license-p>&lol9;</license-p>"
        f"</license></permissions></article-meta></front><body><p>&lol9;</p></body></{root}>"
    ).encode()


def assert_no_marker(blob: Blob | None) -> None:
    if blob is None:
        return
    assert MARKER.encode() not in blob.content
    meta = extract_source_metadata(blob)
    assert MARKER not in (meta.licence or "")


# -- XXE ----------------------------------------------------------------------------------------


async def test_xxe_is_never_read_by_any_body_source(
    fake: FakeUpstream, fake_session: Session, secret_file: Path
) -> None:
    for doc in xxe_documents(secret_file):
        fake.route(EBI, rf"{REST}/PMC7000001/fullTextXML", xml_response(doc))
        fake.route(EBI, rf"{REST}/NBK1116/bookXML", xml_response(doc.replace(b"article", b"book")))
        fake.route(S3, r"/PMC7000001\.1/PMC7000001\.1\.xml", FakeResponse(200, doc))
        springer = (
            b'<?xml version="1.0"?>\n<!DOCTYPE response [<!ENTITY xxe SYSTEM "'
            + secret_file.as_uri().encode()
            + b'">]>\n<response><records>'
            + b"<article>"
            + doc.split(b"<article>", 1)[1]
            + b"</records></response>"
        )
        fake.route(SPRINGER, r"/openaccess/jats", FakeResponse(200, springer))
        # A Springer Nature DOI, so the Springer rung asks (it asks about no other).
        ids = ArticleIds(pmcid="PMC7000001.1", bookid="NBK1116", doi="10.1186/abc.1")
        results = [
            await EuropePmcFetcher().fetch(ids, http=fake_session),
            await EuropePmcBookshelfFetcher().fetch(ids, http=fake_session),
            await PmcOaFetcher().fetch(ids, http=fake_session),
            await SpringerFetcher().fetch(
                ids, credentials={"springer_api_key": KEY}, http=fake_session
            ),
        ]
        for blob in results:
            assert_no_marker(blob)
        # A body that declares entities is refused by the parsing sources.
        assert results[:3] == [None, None, None]
        # Springer's envelope always carries a DOCTYPE and is sliced, never parsed
        # whole: whatever it returns is the bare article, with no DTD left in it.
        if results[3] is not None:
            assert b"<!DOCTYPE" not in results[3].content
            assert b"<!ENTITY" not in results[3].content


def test_xxe_in_a_held_blob_is_not_read(secret_file: Path) -> None:
    for doc in xxe_documents(secret_file):
        blob = Blob(File(FileKind.BODY, "test", JATS_XML), doc)
        meta = extract_source_metadata(blob)
        assert MARKER not in repr(meta)


# -- entity expansion bombs ---------------------------------------------------------------------


async def test_billion_laughs_does_not_expand(fake: FakeUpstream, fake_session: Session) -> None:
    fake.route(EBI, rf"{REST}/PMC7000001/fullTextXML", xml_response(bomb()))
    fake.route(S3, r"/PMC7000001\.1/PMC7000001\.1\.xml", xml_response(bomb()))
    ids = ArticleIds(pmcid="PMC7000001.1")
    assert await EuropePmcFetcher().fetch(ids, http=fake_session) is None
    assert await PmcOaFetcher().fetch(ids, http=fake_session) is None


def test_billion_laughs_in_a_held_blob_gives_nothing() -> None:
    for doc in (bomb(), b"<!--" + b"y" * 70_000 + b"-->" + bomb().split(b"\n", 1)[1]):
        meta = extract_source_metadata(Blob(File(FileKind.BODY, "t", JATS_XML), doc))
        assert len(meta.licence or "") < 100  # never the 10**9-character expansion


# -- path-shaped names --------------------------------------------------------------------------


async def test_supplementary_filename_with_dot_dot_stays_data(
    fake: FakeUpstream, fake_session: Session
) -> None:
    keys = [
        "PMC7000001.1/PMC7000001.1.xml",
        "PMC7000001.1/../../../etc/passwd.txt",
        "PMC7000001.1/..\\..\\evil.xlsx",
        "PMC7000001.1/..",
        "PMC9999999.1/other-article.jpg",  # a hostile listing naming another folder
    ]
    listing = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        "<Name>pmc-oa-opendata</Name><Prefix>PMC7000001.1/</Prefix><IsTruncated>false</IsTruncated>"
        + "".join(f"<Contents><Key>{k}</Key><Size>10</Size></Contents>" for k in keys)
        + "</ListBucketResult>"
    )
    fake.route(S3, r"/", xml_response(listing))
    fake.route(S3, r"/PMC7000001\.1/.*", FakeResponse(200, b"data"))
    fetcher = PmcOaFetcher()
    files = await fetcher.list_files(ArticleIds(pmcid="PMC7000001.1"), http=fake_session)
    by_name = {f.filename: f for f in files}
    assert set(by_name) == {"PMC7000001.1.xml", "passwd.txt", "..\\..\\evil.xlsx"}
    for f in files:
        assert f.filename is not None and "/" not in f.filename
        assert f.filename not in {".", ".."}
        # Every URI stays inside the article's folder of the bucket.
        assert f.uri is not None and f.uri.startswith(f"{BUCKET_URL}/PMC7000001.1/")
    assert by_name["..\\..\\evil.xlsx"].uri == f"{BUCKET_URL}/PMC7000001.1/..%5C..%5Cevil.xlsx"
    # Downloading the dotted key asks S3 for exactly that key, not a folded path.
    blob = await fetcher.fetch_file(by_name["passwd.txt"], http=fake_session)
    assert blob is not None
    last = fake.requests(S3)[-1]
    assert last.path == "/PMC7000001.1/%2E%2E/%2E%2E/%2E%2E/etc/passwd.txt"


async def test_path_shaped_doi_is_never_sent(fake: FakeUpstream, fake_session: Session) -> None:
    # Changed by issue 14: a DOI with dot segments is invalid everywhere (it used to be
    # sent to the query-based sources and skipped by the path-based ones).
    fake.route(SPRINGER, r"/openaccess/jats", FakeResponse(200, b"<response><records/></response>"))
    blob = await SpringerFetcher().fetch(
        ArticleIds(doi="10.1007/../../admin"),
        credentials={"springer_api_key": KEY},
        http=fake_session,
    )
    assert blob is None
    assert fake.requests(SPRINGER) == []


@pytest.mark.parametrize("pmcid", ["PMC1/../admin", "PMC1?x=1", "PMC1#frag", "PMC1%2F..%2Fx"])
async def test_path_shaped_pmcid_never_reaches_a_url(
    fake: FakeUpstream, fake_session: Session, pmcid: str
) -> None:
    ids = ArticleIds(pmcid=pmcid)
    assert await EuropePmcFetcher().fetch(ids, http=fake_session) is None
    assert await PmcOaFetcher().fetch(ids, http=fake_session) is None
    assert await PmcOaFetcher().list_files(ids, http=fake_session) == ()
    assert fake.count() == 0
