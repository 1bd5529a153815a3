"""Content decoding under a cap: every ``Content-Encoding`` streamed, its output counted.

httpx inflates a body in one go per network chunk, so a few KiB of
``Content-Encoding: gzip, gzip`` become gigabytes before a caller can count
a byte. Here each coding is a stage that hands on at most :data:`PIECE`
bytes per step (zlib's ``max_length``), the stages are chained lazily, and
the caller counts what comes out of the last one: it stops the moment the
cap is passed, having held at most one piece per stage. More than
:data:`MAX_CODINGS` stacked codings are refused outright: no server needs
them, and each one multiplies what a byte of the wire can become.

``gzip`` (also ``x-gzip``, with concatenated members) and ``deflate`` (zlib
wrapped or raw, as servers send both) are decoded; ``identity`` and codings
this library does not decode pass through as they came, as httpx does
(``br`` and ``zstd`` are never asked for: httpx only offers them when their
optional decoders are installed, and this module refuses them then; see
:class:`StreamDecoder`).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from typing import Final

import httpx

__all__ = ["MAX_CODINGS", "PIECE", "EncodingRefused", "StreamDecoder"]

MAX_CODINGS: Final = 2
"""The most content codings one body may stack (``gzip, gzip`` is the most allowed)."""

PIECE: Final = 64 * 1024
"""The most bytes one decoding stage hands on per step."""

_GZIP_MAGIC: Final = b"\x1f\x8b"


class EncodingRefused(httpx.RequestError):
    """A body whose content codings are refused (too many stacked, or one not decodable here).

    Given up at once: asking again brings the same codings.
    """


class _Inflate:
    """One zlib-family coding, decoded a bounded piece at a time."""

    def __init__(self, coding: str) -> None:
        self._gzip = coding in ("gzip", "x-gzip")
        # deflate is meant to be zlib-wrapped, yet many servers send it raw: the first
        # bytes decide (see feed).
        self._raw_fallback = not self._gzip
        self._d = self._new()

    def _new(self, *, raw: bool = False) -> zlib._Decompress:
        if self._gzip:
            return zlib.decompressobj(zlib.MAX_WBITS | 16)
        return zlib.decompressobj(-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Yield the decoded pieces of ``data`` (each at most :data:`PIECE` bytes)."""
        while True:
            try:
                out = self._d.decompress(data, PIECE)
            except zlib.error:
                if not self._raw_fallback:
                    raise
                self._raw_fallback = False
                self._d = self._new(raw=True)
                out = self._d.decompress(data, PIECE)
            self._raw_fallback = False
            if out:
                yield out
            data = self._d.unconsumed_tail
            if self._gzip and self._d.eof and self._d.unused_data[:2] == _GZIP_MAGIC:
                # A gzip body may be several members end to end: go on with the next one.
                data = self._d.unused_data
                self._d = self._new()
                continue
            if not data and len(out) < PIECE:
                return

    def end(self) -> Iterator[bytes]:
        """Yield what the coding still holds once its input has ended."""
        yield from self.feed(b"")
        rest = self._d.flush()
        if rest:
            yield rest


def _through(stage: _Inflate, pieces: Iterable[bytes]) -> Iterator[bytes]:
    for piece in pieces:
        yield from stage.feed(piece)


class StreamDecoder:
    """Decodes one body as it arrives, every stage bounded (see the module docstring).

    ``content_encoding`` is the header's value (codings in the order they were
    applied). Raises :class:`EncodingRefused` for more than :data:`MAX_CODINGS`
    codings, or for ``br``/``zstd`` (never asked for by this library's
    clients, so a server sending one is not answering what was asked);
    :meth:`decode` and :meth:`finish` raise :class:`httpx.DecodingError` for
    bytes that are not what their coding says.
    """

    def __init__(self, content_encoding: str | None, host: str) -> None:
        codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
        codings = [c for c in codings if c and c != "identity"]
        self._host = host
        refused = [c for c in codings if c in ("br", "zstd")]
        if refused:
            raise EncodingRefused(f"content coding {refused[0]} from {host} is not decoded here")
        known = [c for c in codings if c in ("gzip", "x-gzip", "deflate")]
        if len(known) > MAX_CODINGS:
            raise EncodingRefused(
                f"{len(known)} stacked content codings from {host}; at most {MAX_CODINGS}"
            )
        # The last coding applied is the first undone.
        self._stages = [_Inflate(c) for c in reversed(known)]

    def decode(self, raw: bytes) -> Iterator[bytes]:
        """Yield the decoded pieces of the next raw bytes of the body."""
        pieces: Iterable[bytes] = (raw,)
        for stage in self._stages:
            pieces = _through(stage, pieces)
        return self._guarded(pieces)

    def finish(self) -> Iterator[bytes]:
        """Yield what the stages still hold once the raw body has ended."""
        return self._guarded(self._flushed())

    def _flushed(self) -> Iterator[bytes]:
        for i, stage in enumerate(self._stages):
            pieces: Iterable[bytes] = stage.end()
            for later in self._stages[i + 1 :]:
                pieces = _through(later, pieces)
            yield from pieces

    def _guarded(self, pieces: Iterable[bytes]) -> Iterator[bytes]:
        try:
            yield from pieces
        except zlib.error:
            message = f"a body from {self._host} is not what its coding says"
            raise httpx.DecodingError(message) from None
