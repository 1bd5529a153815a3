"""The file-set values: :class:`File` references, their :class:`FileKind`, :class:`Blob` bytes.

Each value has two texts: ``str()`` is one short line for a table cell
(``JATS 104 kB · pmc_oa_s3``), which is what pandas shows in a DataFrame;
``repr()`` is the full dataclass form, for debugging. The full detail is
always one attribute away (``blob.file.uri``, ``blob.content``).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Final

__all__ = [
    "ELSEVIER_XML",
    "INSTITUTIONAL",
    "JATS_XML",
    "PDF",
    "Blob",
    "File",
    "FileKind",
    "Saved",
    "format_size",
    "media_label",
]

JATS_XML: Final = "application/jats+xml"
"""JATS article XML; also used for BITS book-part XML from Bookshelf."""

ELSEVIER_XML: Final = "application/vnd.elsevier+xml"
"""Elsevier full-text retrieval XML."""

PDF: Final = "application/pdf"
"""Any PDF rendition."""

INSTITUTIONAL: Final = "litfetch:institutional"
"""``File.credential_key`` marker: fetching needs institutional entitlement.

That is, a subscription reached through an EZproxy-style ``client_factory``.
"""


_LABELS: Final = {
    JATS_XML: "JATS",
    ELSEVIER_XML: "Elsevier XML",
    PDF: "PDF",
    "text/html": "HTML",
    "application/xml": "XML",
    "text/xml": "XML",
    "text/plain": "text",
}


def format_size(n: int | None) -> str | None:
    """Return a byte count as short text in decimal units (``'104 kB'``), ``None`` for ``None``."""
    if n is None:
        return None
    if n < 1000:
        return f"{n} B"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        value = n / scale
        if round(value) < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if round(value, 1) >= 10 else f"{value:.1f} {unit}"
    return f"{n} B"  # pragma: no cover


def media_label(media_type: str | None, filename: str | None = None) -> str:
    """Return a short name for a file's format: ``'JATS'``, ``'PDF'``, or the name's suffix.

    Falls back to the bare subtype of an unknown media type (``'zip'``) and to
    ``'file'`` when nothing tells.
    """
    if media_type is not None:
        known = _LABELS.get(media_type.split(";")[0].strip().lower())
        if known is not None:
            return known
    if filename and "." in filename.strip(".") and not filename.endswith("/"):
        return filename.rsplit(".", 1)[1].lower()[:8]
    if media_type:
        return media_type.split(";")[0].rsplit("/", 1)[-1].removeprefix("x-")[:16]
    return "file"


class FileKind(enum.Enum):
    """What a file in the file-set is: the article text, or material beside it."""

    BODY = "body"
    SUPPLEMENTARY = "supplementary"


@dataclasses.dataclass(frozen=True, slots=True)
class File:
    """A reference to one upstream file (no bytes); ``source`` names who can fetch it.

    ``also_listed_by`` names the other sources that listed the same URL, in
    the order they were asked (an article's file list holds each URL once);
    ``source`` stays the one that fetches it.
    """

    kind: FileKind
    source: str
    media_type: str | None = None
    uri: str | None = None
    filename: str | None = None
    credential_key: str | None = None
    size_bytes: int | None = None
    description: str | None = None
    also_listed_by: tuple[str, ...] = ()

    @property
    def listed_by(self) -> tuple[str, ...]:
        """Every source that listed this file: ``source`` first, then ``also_listed_by``."""
        return (self.source, *self.also_listed_by)

    def __str__(self) -> str:
        """One short line: format, size if known, then the source (``PDF 1.2 MB · unpaywall``)."""
        label = media_label(self.media_type, self.filename)
        if self.kind is FileKind.SUPPLEMENTARY:
            name = self.filename or label
            label = f"supplementary {name if len(name) <= 32 else name[:31] + '…'}"
        size = format_size(self.size_bytes)
        return f"{label} {size} · {self.source}" if size else f"{label} · {self.source}"


@dataclasses.dataclass(frozen=True, slots=True)
class Blob:
    """The fetched bytes of a :class:`File`."""

    file: File
    content: bytes = dataclasses.field(repr=False)

    def __repr__(self) -> str:
        return f"Blob(file={self.file!r}, content=<{len(self.content)} bytes>)"

    def __str__(self) -> str:
        """One short line: format, size of the bytes, source (``JATS 104 kB · pmc_oa_s3``)."""
        label = media_label(self.file.media_type, self.file.filename)
        return f"{label} {format_size(len(self.content))} · {self.file.source}"


@dataclasses.dataclass(frozen=True, slots=True)
class Saved:
    """A :class:`File` downloaded straight to disk: where, how many bytes, their SHA-256.

    What :meth:`~litfetch_df.Session.fetch_file_to` returns instead of a
    :class:`Blob` when the bytes must not be held in memory.
    """

    file: File
    path: str
    size: int
    sha256: str

    def __str__(self) -> str:
        """One short line: format, size, source (``PDF 1.2 MB · unpaywall``)."""
        label = media_label(self.file.media_type, self.file.filename)
        return f"{label} {format_size(self.size)} · {self.file.source}"
