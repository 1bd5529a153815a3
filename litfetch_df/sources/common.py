"""What the per-service source modules share.

- :class:`GetRequest`: every part of a per-article GET, so a table-level
  caller can name the very request a source is about to make;
- :func:`failure_level`: the one place that decides how loudly a failed
  request is logged (an offline miss is routine, anything else is a warning);
- :func:`fetch_response`, :func:`fetch_ok`, :func:`fetch_json_object`: await
  a request and decline (``None``) with one log line on a failure, a non-200
  or a body that is not a JSON object;
- checks on what callers and upstreams hand in: :func:`usable_text`,
  :func:`usable_credential`, :func:`parsed_or_none`, :func:`web_url`,
  :func:`is_web_url`, :func:`json_object`;
- :func:`download_file`: the plain download every URL-listing file source uses, and
  :func:`download_url` / :func:`file_head_check`, what a streamed download of the
  same file asks and checks.

The names are re-exported from :mod:`.crossref`, where they first lived.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from ..files import Blob, File
from ..store.answers import HeldAnswers, NotInCache
from ..wire.http import Http, Rate, get_logger, redact_url

__all__ = [
    "GetRequest",
    "UnexpectedFileType",
    "content_mismatch",
    "download_file",
    "download_url",
    "failure_level",
    "fetch_json_object",
    "fetch_ok",
    "fetch_response",
    "file_head_check",
    "is_web_url",
    "json_object",
    "parsed_or_none",
    "usable_credential",
    "usable_text",
    "web_url",
]

log = get_logger(__name__)


@dataclass(frozen=True, slots=True, eq=False)
class GetRequest:
    """Every part of a GET a per-article source issues: what :meth:`Session.get` receives.

    The request builders (:func:`~.crossref.crossref_work_request`,
    :func:`~.semantic_scholar.s2_paper_request`,
    :func:`~.springer.springer_meta_request`) return one, and the sources send
    exactly it, so a table-level caller can name the very request (its
    :func:`~litfetch_df.session.request_key`) a source is about to make.
    ``params`` and ``headers`` may hold a credential: the repr shows their
    names only.
    """

    url: str
    params: Mapping[str, str | int] | None
    headers: Mapping[str, str] | None
    rate: Rate

    def __repr__(self) -> str:
        params = sorted(self.params or {})
        headers = sorted(self.headers or {})
        return f"GetRequest({self.url!r}, params={params}, headers={headers}, rate={self.rate})"

    async def send(self, http: Http) -> httpx.Response:
        """Issue this GET through ``http`` and return the response (errors propagate)."""
        return await http.get(self.url, params=self.params, headers=self.headers, rate=self.rate)

    async def held_json(self, http: HeldAnswers) -> Any:
        """The JSON of the 200 answer ``http`` holds for this GET (nothing sent), else ``None``.

        A held answer that is not JSON states nothing, as does any other status.
        """
        entry = await http.held(self.url, params=self.params, headers=self.headers)
        if entry is None or entry.status_code != 200:
            return None
        try:
            return json.loads(entry.content)
        except ValueError:
            return None


# -- how a failure is logged ------------------------------------------------------------------


def failure_level(exc: BaseException) -> int:
    """Return the log level for a request that failed with ``exc``.

    :data:`logging.INFO` for :class:`~litfetch_df.NotInCache` (an
    offline session's cache lacks the answer: routine when replaying a
    recording, and the row's error column already says so) and for a request
    a spent quota kept unsent (the ledger warned once when the budget ran out;
    each row's column says ``deferred``), else :data:`logging.WARNING`.
    """
    from ..store.quota import QuotaDeferred

    return logging.INFO if isinstance(exc, NotInCache | QuotaDeferred) else logging.WARNING


# -- requests that decline ------------------------------------------------------------------


async def fetch_response(
    send: Awaitable[httpx.Response], what: str, *, logger: logging.Logger
) -> httpx.Response | None:
    """Await ``send`` and return its response, or ``None`` after an HTTP failure.

    The failure (a transport failure after retries, an offline miss, an
    unusable URL) is logged on ``logger`` as ``"<what> failed: <type>"`` at
    :func:`failure_level`; only the exception's type is logged, since its text
    may hold a URL carrying a key.
    """
    try:
        return await send
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        logger.log(failure_level(exc), "%s failed: %s", what, type(exc).__name__)
        return None


async def fetch_ok(
    send: Awaitable[httpx.Response], what: str, *, logger: logging.Logger
) -> httpx.Response | None:
    """Like :func:`fetch_response`, but only a 200 is returned.

    A 404 (a miss) is logged at DEBUG, any other status at WARNING, and both
    give ``None``.
    """
    response = await fetch_response(send, what, logger=logger)
    if response is None:
        return None
    status = response.status_code
    if status == 404:
        logger.debug("%s: not found (HTTP 404)", what)
        return None
    if status != 200:
        logger.warning("%s gave HTTP %d", what, status)
        return None
    return response


async def fetch_json_object(
    send: Awaitable[httpx.Response], what: str, *, logger: logging.Logger
) -> dict[str, Any] | None:
    """Like :func:`fetch_ok`, returning the 200 body as a JSON object.

    A body that is not a JSON object is logged at WARNING and gives ``None``.
    """
    response = await fetch_ok(send, what, logger=logger)
    if response is None:
        return None
    body = json_object(response)
    if body is None:
        logger.warning("%s: the answer is not a JSON object", what)
    return body


# -- checks ---------------------------------------------------------------------------------


def json_object(response: httpx.Response) -> dict[str, Any] | None:
    """Return the response body as a JSON object, or ``None`` if it is not one.

    An HTML error page served with 200, a truncated body or a JSON array all
    give ``None``; the caller treats that as a definitive error and declines.
    """
    try:
        data = json.loads(response.content)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError both derive from it
        return None
    return data if isinstance(data, dict) else None


def usable_text(value: object) -> str | None:
    """Return ``value`` stripped when it is a non-blank string, else ``None``."""
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()


def usable_credential(credentials: Mapping[str, object] | None, key: str) -> str | None:
    """Return ``credentials[key]`` stripped, or ``None`` unless it is a non-blank string.

    A key holding a control character is unusable too (logged by name only): sent as a
    header it would be refused by the HTTP stack with an error that quotes it.
    """
    value = usable_text(credentials.get(key)) if credentials else None
    if value is not None and any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        log.warning("credential %r contains a control character; not used", key)
        return None
    return value


def parsed_or_none(parser: Callable[[object], str], value: object) -> str | None:
    """Return ``parser(value)``, or ``None`` when ``value`` is ``None`` or the parser rejects it.

    ``parser`` is one of the :mod:`litfetch_df.ids` ``parse_*`` functions, whose
    only error is :class:`ValueError`: an upstream value that does not parse is
    dropped rather than trusted.
    """
    if value is None:
        return None
    try:
        return parser(value)
    except ValueError:
        return None


def web_url(value: object) -> httpx.URL | None:
    """Return ``value`` (stripped) parsed as an absolute ``http``/``https`` URL with a host.

    ``None`` for anything else: not a string, blank, unparseable, another
    scheme, or no host.
    """
    text = usable_text(value)
    return None if text is None else _web_url(text)


@functools.lru_cache(maxsize=16384)
def _web_url(text: str) -> httpx.URL | None:
    # Memoised: the same landing and PDF URLs are checked by several sources per row,
    # and httpx.URL is immutable, so one parse can be shared.
    try:
        url = httpx.URL(text)
    except (httpx.InvalidURL, TypeError, ValueError):
        return None
    return url if url.scheme in ("http", "https") and url.host else None


def is_web_url(value: object) -> bool:
    """Return whether ``value`` is an absolute ``http``/``https`` URL with a host."""
    return web_url(value) is not None


# -- the plain download ---------------------------------------------------------------------


async def download_file(http: Http, file: File) -> Blob | None:
    """Download ``file.uri`` (redirects followed, no credential headers) as a :class:`Blob`.

    Returns ``None`` when the file has no usable URL (no request is made), on
    any final status other than 200, and on a failure (logged at
    :func:`failure_level`). Raises :class:`UnexpectedFileType` when the answer
    is not the type the file was listed as (see :func:`content_mismatch`). The
    Blob carries the very ``file`` it was asked for.
    """
    url = download_url(file)
    if url is None:
        return None
    shown = f"download of {redact_url(url)}"
    send = http.get(url, follow_redirects=True, rate=Rate.DEFAULT)
    response = await fetch_response(send, shown, logger=log)
    if response is None:
        return None
    if response.status_code != 200:
        # A refused download (no entitlement, a moved copy) is an everyday answer.
        log.info("%s gave HTTP %d", shown, response.status_code)
        return None
    problem = content_mismatch(file.media_type, response.content)
    if problem is not None:
        raise UnexpectedFileType(f"listed as {file.media_type}, but {problem}")
    return Blob(file=file, content=response.content)


def download_url(file: File) -> str | None:
    """Return the URL :func:`download_file` GETs for ``file`` (redirects followed), or ``None``.

    ``None`` when the file has no absolute ``http``/``https`` URL. A streamed
    download asks the very same request (and so shares its cache entry).
    """
    if file.uri is None or not is_web_url(file.uri):
        return None
    return file.uri


def file_head_check(media_type: str | None) -> Callable[[bytes], None]:
    """Return a check of a download's first bytes against the type it was listed as.

    The check raises :class:`UnexpectedFileType` where :func:`content_mismatch`
    finds a problem (an HTML page for a PDF, say), before the rest is taken.
    """

    def check(head: bytes) -> None:
        problem = content_mismatch(media_type, head)
        if problem is not None:
            raise UnexpectedFileType(f"listed as {media_type}, but {problem}")

    return check


class UnexpectedFileType(ValueError):
    """A download is not the type its file was listed as (a login page for a PDF, say).

    Raised rather than declined: the same link gives the same page again, and the
    row must say why it has no file. The message names types only, never the URL.
    """


_PDF_TYPES = frozenset({"application/pdf", "application/x-pdf"})
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


def content_mismatch(media_type: str | None, content: bytes) -> str | None:
    """Say how ``content`` is not of the listed ``media_type``, or ``None`` when it may be.

    A PDF must start (within its first KiB) with ``%PDF-``; a file listed as
    anything but HTML must not be an HTML page. An unlisted type passes.
    """
    listed = (media_type or "").split(";", 1)[0].strip().lower()
    if not listed or listed in _HTML_TYPES:
        return None
    head = content[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith((b"<!doctype html", b"<html")):
        return "the answer is an HTML page"
    if listed in _PDF_TYPES and b"%PDF-" not in content[:1024]:
        return "the answer does not start like a PDF"
    return None
