"""The file-set values: :class:`File` references, their :class:`FileKind`, :class:`Blob` bytes."""

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


@dataclasses.dataclass(frozen=True, slots=True)
class Blob:
    """The fetched bytes of a :class:`File`."""

    file: File
    content: bytes = dataclasses.field(repr=False)

    def __repr__(self) -> str:
        return f"Blob(file={self.file!r}, content=<{len(self.content)} bytes>)"
