"""Bounded attempts (issue 14): deadline, size cap, redirect policy, payload checks.

Nothing here reads the wall clock: a deadline is tested with a transport that
never answers (or stops mid-body) and a tiny deadline whose expiry is asserted.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pandas as pd
import pytest

import litfetch_df.frame  # registers .lit
from litfetch_df import PDF, File, FileKind, RetryPolicy, Session
from litfetch_df.sources.common import UnexpectedFileType, content_mismatch
from litfetch_df.sources.pmc_oa import _MEMO, _parse_listing
from litfetch_df.sources.unpaywall import UnpaywallFileSource
from litfetch_df.wire.http import UpstreamUnavailable
from litfetch_df.wire.transfer import (
    Bounds,
    RedirectRefused,
    UnexpectedPayload,
    check_payload,
    check_redirect,
    is_public_host,
)
from tests.conftest import FAST_RETRY, mock_session

assert litfetch_df.frame

TWO_TRIES = RetryPolicy(max_attempts=2, base_delay=0.0, max_delay=0.0)


class _Never(httpx.AsyncByteStream):
    """A body that sends one byte and then nothing, for ever (a trickling server)."""

    def __init__(self) -> None:
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self.sent += 1
        yield b"{"
        await asyncio.Event().wait()


# -- deadline -----------------------------------------------------------------------------------


async def test_a_server_that_never_answers_meets_the_deadline() -> None:
    calls = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async with mock_session(handler, retry=TWO_TRIES, deadline=0.01) as s:  # type: ignore[arg-type]
        with pytest.raises(UpstreamUnavailable, match="DeadlineExceeded"):
            await s.get("https://slow.example/x")
        assert calls == 2  # a deadline is worth another try
        assert s.failures and "DeadlineExceeded" in s.failures[0]


async def test_a_trickling_body_meets_the_deadline() -> None:
    stream = _Never()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Type": "application/json"}, stream=stream)

    async with mock_session(handler, retry=TWO_TRIES, deadline=0.01) as s:
        with pytest.raises(UpstreamUnavailable, match="DeadlineExceeded"):
            await s.get("https://slow.example/x")
    assert stream.sent == 2


def test_the_default_deadline_is_a_few_timeouts() -> None:
    assert Session(timeout=2).bounds.deadline == 8
    assert Session(timeout=2, deadline=None).bounds.deadline is None
    with pytest.raises(ValueError):
        Session(deadline=0)


# -- size cap -----------------------------------------------------------------------------------


async def test_a_declared_length_over_the_cap_is_refused_before_reading() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(200, content=b"x" * 2000)

    async with mock_session(handler, max_body_bytes=1000) as s:
        with pytest.raises(UpstreamUnavailable, match="BodyTooLarge"):
            await s.get("https://big.example/x")
    assert calls == 1  # not worth another try within the call


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, n: int) -> None:
        self.n = n
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.n):
            self.sent += 1
            yield b"x" * 100


async def test_a_streamed_body_is_aborted_once_past_the_cap() -> None:
    stream = _Chunks(1000)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=stream)  # no Content-Length

    async with mock_session(handler, max_body_bytes=1000) as s:
        with pytest.raises(UpstreamUnavailable, match="BodyTooLarge"):
            await s.get("https://big.example/x")
    assert stream.sent == 11  # stopped at the first chunk past 1000 bytes


async def test_a_body_under_the_cap_is_read_whole() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=_Chunks(10))

    async with mock_session(handler, max_body_bytes=1000) as s:
        response = await s.get("https://ok.example/x")
    assert response.content == b"x" * 1000


# -- redirects ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "public"),
    [
        ("127.0.0.1", False),
        ("localhost", False),
        ("api.localhost", False),
        ("10.0.0.8", False),
        ("172.16.1.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("::1", False),
        ("fd12::1", False),
        ("fe80::1", False),
        ("::ffff:10.0.0.1", False),
        ("127.1", False),
        ("2130706433", False),
        ("0x7f.0.0.1", False),
        ("0.0.0.0", False),
        ("93.184.215.14", True),
        ("2606:4700::1", True),
        ("www.ncbi.nlm.nih.gov", True),
    ],
)
def test_public_hosts(host: str, public: bool) -> None:
    assert is_public_host(host) is public


def test_the_redirect_rule_is_relative_to_the_hop_source() -> None:
    strict = Bounds()
    public, loop = httpx.URL("https://pub.example/a"), httpx.URL("https://127.0.0.1:9/b")
    with pytest.raises(RedirectRefused, match="non-public"):
        check_redirect(public, loop, strict)
    check_redirect(loop, httpx.URL("http://127.0.0.1:9/c"), Bounds(allow_insecure_redirects=True))
    check_redirect(httpx.URL("http://127.0.0.1:9/c"), loop, strict)  # local to local
    check_redirect(public, loop, Bounds(allow_private_redirects=True))
    with pytest.raises(RedirectRefused, match="https to http"):
        check_redirect(public, httpx.URL("http://pub.example/a"), strict)
    check_redirect(httpx.URL("http://pub.example/a"), httpx.URL("https://cdn.example/a"), strict)


def _redirecting(location: str, seen: list[str]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        if request.url.host == "pub.example":
            return httpx.Response(302, headers={"Location": location})
        return httpx.Response(200, content=b"%PDF-1.7 internal")

    return httpx.MockTransport(handler)


@pytest.mark.parametrize(
    "location",
    ["http://127.0.0.1:8080/internal", "https://169.254.169.254/x", "http://pub2.example/x"],
)
async def test_refused_redirects_are_never_followed(location: str) -> None:
    seen: list[str] = []
    session = Session(
        client_factory=lambda: httpx.AsyncClient(transport=_redirecting(location, seen)),
        retry=FAST_RETRY,
    )
    async with session as s:
        with pytest.raises(UpstreamUnavailable, match="RedirectRefused"):
            await s.get("https://pub.example/paper.pdf", follow_redirects=True)
        # without following, the 302 itself is the answer, as before
        assert (await s.get("https://pub.example/paper.pdf")).status_code == 302
    assert seen == ["https://pub.example/paper.pdf"] * 2


async def test_allowed_redirects_are_followed() -> None:
    seen: list[str] = []
    session = Session(
        client_factory=lambda: httpx.AsyncClient(
            transport=_redirecting("http://127.0.0.1:8080/internal", seen)
        ),
        allow_private_redirects=True,
        allow_insecure_redirects=True,
    )
    async with session as s:
        response = await s.get("https://pub.example/paper.pdf", follow_redirects=True)
    assert response.content == b"%PDF-1.7 internal"
    assert [r.status_code for r in response.history] == [302]
    assert seen[-1] == "http://127.0.0.1:8080/internal"


async def test_redirect_loops_stop() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(302, headers={"Location": "https://pub.example/again"})

    async with mock_session(handler) as s:
        with pytest.raises(UpstreamUnavailable, match="TooManyRedirects"):
            await s.get("https://pub.example/x", follow_redirects=True)


def test_a_refused_redirect_reaches_the_rows_error_column(tmp_path: Path) -> None:
    seen: list[str] = []
    session = Session(
        client_factory=lambda: httpx.AsyncClient(
            transport=_redirecting("http://10.0.0.1/secret", seen)
        ),
        retry=FAST_RETRY,
    )
    files = pd.DataFrame(
        {
            "doi": ["10.1000/x"],
            "kind": ["body"],
            "source": ["unpaywall"],
            "media_type": [PDF],
            "uri": ["https://pub.example/paper.pdf"],
        }
    )
    out = files.lit.fetch_files(out_dir=tmp_path, session=session, progress=False)
    assert "RedirectRefused" in out["fetch_error"][0]
    assert pd.isna(out["path"][0])
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


# -- payloads -----------------------------------------------------------------------------------


def _response(content: bytes, content_type: str | None = None) -> httpx.Response:
    headers = {"Content-Type": content_type} if content_type else {}
    request = httpx.Request("GET", "https://api.example/x")
    response = httpx.Response(200, headers=headers, content=content, request=request)
    response.read()
    return response


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b'{"a": [1, 2', "application/json"),
        (b"", "application/json"),
        (b"<html><body>Sign in</body></html>", "text/html"),
        (b"<!DOCTYPE html><html></html>", None),
        (b"<html><body>Sign in</body></html>", "application/xml"),
        (b"<?xml version='1.0'?><article><body><p>cut", "application/xml"),
        (b"<?xml version='1.0'?><article><body><p>cut", None),
        (b"<article><p>cut", "text/xml"),
        (b"<html>a login page</html>", "application/pdf"),
        (b"", "application/xml"),  # says XML, brings none (issue 26)
        (b"  \n", "text/xml"),
    ],
)
def test_payloads_that_are_not_answers(content: bytes, content_type: str | None) -> None:
    with pytest.raises(UnexpectedPayload):
        check_payload(_response(content, content_type))


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b'{"a": [1, 2]}', "application/json"),
        (b"[]", "application/vnd.api+json"),
        (b"<?xml version='1.0'?><article><p/></article>\n<!-- end -->\n", "application/xml"),
        (b"<ListBucketResult xmlns='x'/>", "application/xml"),
        (b"<e:article xmlns:e='u'>x</e:article>", "text/xml"),
        ("<article>é</article>".encode("utf-16"), "application/xml"),
        (b"%PDF-1.7 whatever", "application/pdf"),
        (b"plain text", "text/plain"),
        (b"\x89PNG...", "image/png"),
    ],
)
def test_payloads_that_are_answers(content: bytes, content_type: str | None) -> None:
    check_payload(_response(content, content_type))


def test_html_is_left_to_the_caller_for_downloads() -> None:
    check_payload(_response(b"<html></html>", "text/html"), download=True)


async def test_a_truncated_answer_is_retried_and_never_cached(tmp_path: Path) -> None:
    answers = [b'{"doi": "10.1000/x", "is_oa": tr', b'{"doi": "10.1000/x", "is_oa": true}']

    def handler(request: httpx.Request) -> httpx.Response:
        body = answers.pop(0) if answers else b'{"gone": true}'
        return httpx.Response(200, headers={"Content-Type": "application/json"}, content=body)

    cache = tmp_path / "cache"
    async with mock_session(handler, cache=cache) as s:
        response = await s.get("https://api.unpaywall.org/v2/10.1000/x")
    assert response.json() == {"doi": "10.1000/x", "is_oa": True}
    assert answers == []

    # Only the whole answer was stored: replayed offline, it is the one served.
    async with Session(cache=cache, offline=True) as s:
        replay = await s.get("https://api.unpaywall.org/v2/10.1000/x")
    assert replay.json() == {"doi": "10.1000/x", "is_oa": True}


async def test_a_payload_that_stays_wrong_is_given_up_uncached(tmp_path: Path) -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(200, html="<html><body>Maintenance</body></html>")

    cache = tmp_path / "cache"
    async with mock_session(handler, cache=cache) as s:
        with pytest.raises(UpstreamUnavailable, match="UnexpectedPayload"):
            await s.get("https://api.crossref.org/works/10.1000/x")
    assert calls == 3
    async with Session(cache=cache, offline=True) as s:
        with pytest.raises(UpstreamUnavailable, match="not in cache"):
            await s.get("https://api.crossref.org/works/10.1000/x")


# -- downloads against their listed type ---------------------------------------------------


def test_content_mismatch() -> None:
    assert content_mismatch(PDF, b"%PDF-1.4 ...") is None
    assert content_mismatch(PDF, b"<!DOCTYPE html><html>login</html>") == (
        "the answer is an HTML page"
    )
    assert content_mismatch(PDF, b"PK\x03\x04 zip") == "the answer does not start like a PDF"
    assert content_mismatch("text/csv", b"<html>login</html>") is not None
    assert content_mismatch("text/csv", b"a,b\n1,2\n") is None
    assert content_mismatch("text/html", b"<html></html>") is None
    assert content_mismatch(None, b"<html></html>") is None


async def test_an_html_page_is_never_saved_as_a_pdf() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        # served as a PDF would be by a careless server, but a login page all the same
        return httpx.Response(200, headers={"Content-Type": "text/html"}, html="<html>login</html>")

    file = File(FileKind.BODY, "unpaywall", PDF, "https://pub.example/paper.pdf")
    async with mock_session(handler) as s:
        with pytest.raises(UnexpectedFileType, match="HTML"):
            await s.fetch_file(file, sources=(UnpaywallFileSource(),))


def test_a_login_page_row_says_why(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, html="<html>login</html>")

    files = pd.DataFrame(
        {
            "doi": ["10.1000/x"],
            "kind": ["body"],
            "source": ["unpaywall"],
            "media_type": [PDF],
            "uri": ["https://pub.example/paper.pdf"],
        }
    )
    out = files.lit.fetch_files(out_dir=tmp_path, session=mock_session(handler), progress=False)
    assert "HTML page" in out["fetch_error"][0]
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


# -- the listing memo ---------------------------------------------------------------------------


def test_the_listing_memo_never_keeps_big_answers() -> None:
    big = b"<ListBucketResult>" + b"<!-- pad -->" * 40_000 + b"</ListBucketResult>"
    before = len(_MEMO)
    assert _parse_listing(big) is not None
    assert len(_MEMO) == before  # over the memo's size: parsed, not kept
    small = b"<ListBucketResult><KeyCount>0</KeyCount></ListBucketResult>"
    assert _parse_listing(small) is _parse_listing(small)
    assert all(isinstance(k, bytes) and len(k) == 32 for k in _MEMO)  # digests, not bodies


def test_no_content_and_bom_text_are_not_judged() -> None:
    check_payload(_response("plain text, not XML".encode("utf-16"), "text/plain"))
    with pytest.raises(UnexpectedPayload):
        check_payload(_response('<?xml version="1.0"?><a><b>'.encode("utf-16"), None))


async def test_a_204_is_not_checked() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(204, headers={"Content-Type": "application/json"})

    async with mock_session(handler) as s:
        assert (await s.get("https://api.example/x")).status_code == 204
