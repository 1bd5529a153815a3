"""The PMC Open Access S3 bucket: the JATS body and the article's file-set.

One class, :class:`PmcOaFetcher`, is both a body fetcher (ladder rung 2) and a
file source, because both read the same per-version folder of the public
``pmc-oa-opendata`` bucket::

    PMC7000001.2/PMC7000001.2.xml      the JATS body
    PMC7000001.2/PMC7000001.2.pdf      other renditions of the same stem
    PMC7000001.2/figure-g001.jpg       media and supplementary material

The newest version and its files come from one listing without a delimiter
(``?list-type=2&prefix=PMC<n>.``, upstream.md 4.1): it names every version
folder and every key in them. The body fetch and the file listing issue it
with identical parameters, so inside a session scope an article costs one
listing and the body GET. (upstream.md 3.1 suggests a delimited listing to find
the version and a second one for the chosen folder; one undelimited listing
answers both, and an article's versions hold a handful of keys.) A PMCID
carrying an explicit version (``PMC7000001.2``) skips the search and lists
only that version's folder.
"""

from __future__ import annotations

import collections
import hashlib
import re
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from ..files import JATS_XML, PDF, Blob, File, FileKind
from ..ids import ArticleIds, parse_pmcid_versioned
from ..safexml.parse import XmlError, local_name, parse_xml, root_name
from ..wire.http import Http, Rate, get_logger, redact_url
from .common import download_file, download_url, fetch_ok

__all__ = ["BUCKET_URL", "MEDIA_TYPES", "PmcOaFetcher"]

log = get_logger(__name__)

BUCKET_URL: Final = "https://pmc-oa-opendata.s3.amazonaws.com"
"""HTTPS base of the public PMC Open Access bucket (virtual-hosted style)."""

MEDIA_TYPES: Final[Mapping[str, str]] = {
    # A fixed table, not the platform's MIME database, so a listing maps the
    # same way on every machine. ``xml`` is handled separately (JATS for the
    # stem rendition, plain XML for anything else).
    "pdf": PDF,
    "txt": "text/plain",
    "html": "text/html",
    "htm": "text/html",
    "json": "application/json",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "png": "image/png",
    "gif": "image/gif",
    "tif": "image/tiff",
    "tiff": "image/tiff",
    "bmp": "image/bmp",
    "svg": "image/svg+xml",
    "eps": "application/postscript",
    "ps": "application/postscript",
    "csv": "text/csv",
    "tsv": "text/tab-separated-values",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "xls": "application/vnd.ms-excel",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "doc": "application/msword",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "ppt": "application/vnd.ms-powerpoint",
    "odt": "application/vnd.oasis.opendocument.text",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
    "rtf": "application/rtf",
    "zip": "application/zip",
    "gz": "application/gzip",
    "tgz": "application/gzip",
    "tar": "application/x-tar",
    "7z": "application/x-7z-compressed",
    "mp4": "video/mp4",
    "m4v": "video/mp4",
    "mov": "video/quicktime",
    "avi": "video/x-msvideo",
    "mpg": "video/mpeg",
    "mpeg": "video/mpeg",
    "webm": "video/webm",
    "wmv": "video/x-ms-wmv",
    "mp3": "audio/mpeg",
    "wav": "audio/wav",
    "m4a": "audio/mp4",
}
"""Lower-case file extension → media type for bucket objects."""

# A listing is at most 1000 keys a page; an article has a handful. The bound
# only stops a misbehaving server from keeping us paging forever.
_MAX_PAGES: Final = 20

_VERSION_PREFIX = re.compile(r"^(PMC[0-9]+)\.([0-9]+)/$")


@dataclass(frozen=True, slots=True)
class _Listing:
    """One ListObjectsV2 page: its keys with sizes, common prefixes and continuation."""

    keys: tuple[tuple[str, int | None], ...]
    prefixes: tuple[str, ...]
    next_token: str | None
    # The (PMC<n>, version) folders the page names, as prefixes or in its keys.
    versions: tuple[tuple[str, int], ...]


class PmcOaFetcher:
    """Body fetcher and file source over the PMC Open Access S3 bucket.

    ``fetch`` returns the newest version's JATS XML (``application/jats+xml``);
    ``list_files`` returns that version's body renditions (``BODY``) and media /
    supplementary files (``SUPPLEMENTARY``); ``fetch_file`` downloads one of
    them. Every miss or failure declines (``None`` / ``()``) and is logged.
    """

    name: str = "pmc_oa_s3"
    requires: frozenset[str] = frozenset({"pmcid"})
    kinds: frozenset[FileKind] = frozenset(FileKind)

    def __repr__(self) -> str:
        return "PmcOaFetcher()"

    # -- Fetcher -----------------------------------------------------------------------------

    async def fetch(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        """Return the JATS body of the article's newest (or named) version, or ``None``."""
        found = await self._version(article_ids, http)
        if found is None:
            return None
        stem = found[0]
        url = _object_url(f"{stem}/{stem}.xml")
        send = http.get(url, rate=Rate.DEFAULT)
        response = await fetch_ok(send, f"{self.name}: {redact_url(url)}", logger=log)
        if response is None:
            return None
        content = response.content
        if not _is_article(content):
            log.warning("pmc_oa_s3: %s is not a JATS <article>; declined", stem)
            return None
        file = File(kind=FileKind.BODY, source=self.name, media_type=JATS_XML, uri=url)
        return Blob(file=file, content=content)

    # -- FileSource --------------------------------------------------------------------------

    async def list_files(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> tuple[File, ...]:
        """Return the files of the article's newest (or named) version folder, or ``()``.

        Stem renditions (``PMC<n>.<v>/PMC<n>.<v>.<ext>``) are ``BODY``; the stem
        ``.json`` metadata record is left out; everything else is
        ``SUPPLEMENTARY``. Files keep the listing's order (S3 sorts keys).
        """
        found = await self._version(article_ids, http)
        if found is None:
            return ()
        stem, pages = found
        if pages is None:  # a version the caller named: list its folder alone
            pages = await _list_all(http, {"list-type": "2", "prefix": f"{stem}/"})
            if pages is None:
                return ()
        files: list[File] = []
        seen: set[str] = set()
        for page in pages:
            for key, size in page.keys:
                if key in seen:
                    continue
                seen.add(key)
                file = _file_for_key(self.name, stem, key, size)
                if file is not None:
                    files.append(file)
        return tuple(files)

    async def fetch_file(
        self,
        file: File,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        """Download ``file`` from the bucket; ``Blob(file, bytes)`` on 200, else ``None``.

        Only URIs inside the PMC bucket are fetched: a ``File`` read back from a
        store could carry any URL, and this source speaks for the bucket only.
        """
        if self.download_url(file) is None:
            return None
        return await download_file(http, file)

    def download_url(
        self, file: File, *, credentials: Mapping[str, object] | None = None
    ) -> str | None:
        """Return the URL that downloads ``file`` (redirects followed), or ``None`` to decline.

        Only URIs inside the PMC bucket: a ``File`` read back from a store could
        carry any URL, and this source speaks for the bucket only.
        """
        uri = file.uri
        if uri is None:
            return None
        if not uri.startswith(BUCKET_URL + "/"):
            log.warning("pmc_oa_s3: refusing a URI outside the PMC bucket: %s", redact_url(uri))
            return None
        return download_url(file)

    # -- shared ------------------------------------------------------------------------------

    async def _version(
        self, article_ids: ArticleIds, http: Http
    ) -> tuple[str, list[_Listing] | None] | None:
        """Return ``(PMC<n>.<v>, listing)`` for the version to use, or ``None`` when there is none.

        One listing of ``PMC<n>.`` without a delimiter names every version
        folder and every key in them, so the newest version and its files come
        from the same request (``fetch`` and ``list_files`` of one article ask
        it identically, and a scope answers the second from memory). A PMCID
        that names its version is used as it is, with no listing (``None``).
        """
        if article_ids.pmcid is None:
            return None
        try:
            pmcid, version = parse_pmcid_versioned(article_ids.pmcid)
        except ValueError as exc:
            log.warning("pmc_oa_s3: declined an invalid PMCID: %s", exc)
            return None
        if version is not None:
            return f"{pmcid}.{version}", None
        # The trailing dot keeps PMC700000 from also matching PMC7000001.*.
        pages = await _list_all(http, {"list-type": "2", "prefix": f"{pmcid}."})
        if pages is None:
            return None
        # Versions are read when a page is parsed, and pages are memoised: nothing is redone
        # when the file-set step asks for the listing the body step read.
        best = max((v for page in pages for p, v in page.versions if p == pmcid), default=None)
        if best is None:
            log.debug("pmc_oa_s3: %s is not in the bucket", pmcid)
            return None
        return f"{pmcid}.{best}", pages


async def _list_all(http: Http, params: Mapping[str, str]) -> list[_Listing] | None:
    """Return every page of a bucket listing, or ``None`` if the first page fails.

    A later page that fails ends the walk with what was gathered (logged), as a
    partial file-set is still true as far as it goes.
    """
    pages: list[_Listing] = []
    token: str | None = None
    tokens_seen: set[str] = set()
    for _ in range(_MAX_PAGES):
        query: dict[str, str | int] = dict(params)
        if token is not None:
            query["continuation-token"] = token
        what = f"pmc_oa_s3: listing of {params.get('prefix')!r}"
        send = http.get(BUCKET_URL + "/", params=query, rate=Rate.DEFAULT)
        response = await fetch_ok(send, what, logger=log)
        if response is None:
            return pages or None
        page = _parse_listing(response.content)
        if page is None:
            log.warning("pmc_oa_s3: listing of %r is not a bucket listing", params.get("prefix"))
            return pages or None
        pages.append(page)
        token = page.next_token
        if token is None:
            return pages
        if token in tokens_seen:
            log.warning("pmc_oa_s3: listing repeated a continuation token; stopped")
            return pages
        tokens_seen.add(token)
    log.warning("pmc_oa_s3: listing still truncated after %d pages; stopped", _MAX_PAGES)
    return pages


def _parse_listing(content: bytes) -> _Listing | None:
    """Parse a ListObjectsV2 answer; ``None`` when it is not one (or not XML at all).

    Memoised on a digest of the bytes, never on the bytes themselves, and only
    for listings of an ordinary size (the result is immutable): the body step
    and the file-set step read the same listing of an article.
    """
    if len(content) > _MEMO_MAX_BYTES:
        return _parse_listing_now(content)
    digest = hashlib.sha256(content).digest()
    with _MEMO_LOCK:
        if digest in _MEMO:
            _MEMO.move_to_end(digest)
            return _MEMO[digest]
    parsed = _parse_listing_now(content)
    with _MEMO_LOCK:
        _MEMO[digest] = parsed
        while len(_MEMO) > _MEMO_ENTRIES:
            _MEMO.popitem(last=False)
    return parsed


# An article's listing is a few KiB; a bigger one is parsed each time rather than kept,
# so the memo holds at most _MEMO_ENTRIES small parsed listings and never the bytes.
_MEMO_MAX_BYTES: Final = 256 * 1024
_MEMO_ENTRIES: Final = 512
_MEMO: collections.OrderedDict[bytes, _Listing | None] = collections.OrderedDict()
_MEMO_LOCK = threading.Lock()  # the sync bridge runs calls in threads of their own


def _parse_listing_now(content: bytes) -> _Listing | None:
    try:
        root = parse_xml(content)
    except XmlError:
        return None
    if local_name(root) != "ListBucketResult":
        return None
    # Children are found by the root's own namespace (S3 uses one; a bare listing none),
    # so lxml walks the tree in C instead of Python comparing every local name.
    tag = str(root.tag)
    ns = tag[: tag.index("}") + 1] if tag.startswith("{") else ""
    keys: list[tuple[str, int | None]] = []
    for contents in root.iterfind(f"{ns}Contents"):
        key = contents.findtext(f"{ns}Key")
        if not key:
            continue
        size_text = contents.findtext(f"{ns}Size")
        size = int(size_text) if size_text and size_text.strip().isdigit() else None
        keys.append((key, size))
    prefixes = tuple(
        p for p in (c.findtext(f"{ns}Prefix") for c in root.iterfind(f"{ns}CommonPrefixes")) if p
    )
    truncated = (root.findtext(f"{ns}IsTruncated") or "").strip().lower() == "true"
    token = (root.findtext(f"{ns}NextContinuationToken") or "").strip() or None
    folders = dict.fromkeys(key.split("/", 1)[0] + "/" for key, _ in keys if "/" in key)
    found = (_VERSION_PREFIX.match(f) for f in (*prefixes, *folders))
    versions = tuple(dict.fromkeys((m.group(1), int(m.group(2))) for m in found if m))
    return _Listing(tuple(keys), prefixes, token if truncated else None, versions)


def _file_for_key(source: str, stem: str, key: str, size: int | None) -> File | None:
    """Map one bucket key of folder ``stem`` to a :class:`File` (``None``: not a file to list)."""
    folder = f"{stem}/"
    if not key.startswith(folder):
        # A listing answers for the prefix asked; anything else is not ours to list.
        return None
    segments = key.split("/")
    filename = segments[-1]
    if filename in {"", ".", ".."}:
        return None  # a folder marker or a name that is only a path step
    is_stem = len(segments) == 2 and _strip_extension(filename) == stem
    ext = _extension(filename)
    if is_stem and ext == "json":
        return None  # the per-version metadata record, not article content
    if ext == "xml":
        media_type: str | None = JATS_XML if is_stem else "application/xml"
    else:
        media_type = MEDIA_TYPES.get(ext)
    if media_type is None and is_stem:
        media_type = "application/octet-stream"
    return File(
        kind=FileKind.BODY if is_stem else FileKind.SUPPLEMENTARY,
        source=source,
        media_type=media_type,
        uri=_object_url(key),
        filename=filename,
        size_bytes=size,
    )


def _object_url(key: str) -> str:
    """Return the bucket URL of ``key``, each segment percent-quoted.

    A ``.`` or ``..`` segment is written as ``%2E`` / ``%2E%2E`` so the HTTP
    client cannot fold it away: the URL always names exactly this key.
    """
    quoted = []
    for segment in key.split("/"):
        if segment in {".", ".."}:
            quoted.append(segment.replace(".", "%2E"))
        else:
            quoted.append(urllib.parse.quote(segment, safe=""))
    return f"{BUCKET_URL}/{'/'.join(quoted)}"


def _extension(filename: str) -> str:
    base, dot, ext = filename.rpartition(".")
    return ext.lower() if dot and base else ""


def _strip_extension(filename: str) -> str:
    base, dot, _ext = filename.rpartition(".")
    return base if dot else filename


def _is_article(content: bytes) -> bool:
    """Whether ``content`` is well-formed XML whose root element is ``article``."""
    if root_name(content) != "article":
        return False
    try:
        return local_name(parse_xml(content)) == "article"
    except XmlError:
        return False
