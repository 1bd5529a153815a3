"""One HTTP attempt within bounds: a deadline, a size cap, a redirect policy, a payload check.

The session decides when to send, how often to retry and what to cache; this
module decides what one attempt may cost and what it may bring back:

- an overall **deadline** for the attempt (sending, every redirect hop and the
  whole body), where the client's own timeout bounds only each read, so a
  server trickling a byte a second is never waited on for ever;
- a **size cap** on the decoded body, streamed and aborted as soon as it is
  passed (and refused before reading when ``Content-Length`` already says so);
- a **redirect policy**, applied hop by hop when redirects are followed: no
  hop from ``https`` to ``http``, and no hop from a public address into a
  non-public one (loopback, private, link-local, unique-local), each unless
  allowed;
- a **payload check** on every 2xx: what it declares (or plainly is) must be
  whole and of that kind.

A failed bound raises one of the exceptions below. Those worth another try
(:class:`DeadlineExceeded`, :class:`UnexpectedPayload`) are
:class:`~litfetch_df._http.UpstreamUnavailable`, i.e. transport errors the
session retries and never caches; the others (:class:`BodyTooLarge`,
:class:`RedirectRefused`) would only fail the same way again, so they are
plain request errors the session gives up on at once. Their messages name a
host at most, never a URL (which may carry a key). See
docs/adr/0010-request-bounds-and-redirects.md.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re
import socket
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

import httpx

from ._clock import Clock, SystemClock
from ._http import Http, Rate, UpstreamUnavailable
from ._xml import narrow_xml, root_name

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "BodyTooLarge",
    "Bounds",
    "DeadlineExceeded",
    "Downloaded",
    "Downloader",
    "HeadCheck",
    "RedirectRefused",
    "Sink",
    "UnexpectedPayload",
    "check_payload",
    "check_redirect",
    "is_public_host",
    "send_bounded",
    "stream_bounded",
]

DEFAULT_MAX_BODY_BYTES: Final = 128 * 2**20
"""The default size cap: far above any article body or listing, far below what hurts memory."""

DEADLINE_PER_TIMEOUT: Final = 4.0
"""The default deadline of one attempt, in multiples of the client's (per-read) timeout."""


class DeadlineExceeded(UpstreamUnavailable):
    """An attempt (its redirects and whole body included) outlasted its deadline; retried."""


class UnexpectedPayload(UpstreamUnavailable):
    """A 2xx that is not what it says (truncated, unparseable, an HTML page); retried."""


class BodyTooLarge(httpx.RequestError):
    """A body passed the size cap; given up at once (raise ``max_body_bytes`` to fetch it)."""


class RedirectRefused(httpx.RequestError):
    """A redirect the policy refuses; given up at once (the session's flags can allow it)."""


@dataclass(frozen=True, slots=True)
class Bounds:
    """What one attempt may cost and where it may go.

    ``deadline`` is in seconds for the whole attempt (``None``: none);
    ``max_body_bytes`` caps the decoded body (``None``: no cap).
    """

    deadline: float | None = None
    max_body_bytes: int | None = DEFAULT_MAX_BODY_BYTES
    allow_private_redirects: bool = False
    allow_insecure_redirects: bool = False

    def __post_init__(self) -> None:
        if self.deadline is not None and not self.deadline > 0:
            raise ValueError(f"deadline must be positive, got {self.deadline!r}")
        if self.max_body_bytes is not None and (
            isinstance(self.max_body_bytes, bool) or self.max_body_bytes < 1
        ):
            raise ValueError(f"max_body_bytes must be a positive int, got {self.max_body_bytes!r}")


async def send_bounded(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    params: Mapping[str, str | int] | None,
    headers: Mapping[str, str] | None,
    content: bytes | None,
    follow_redirects: bool,
    bounds: Bounds,
    clock: Clock | None = None,
) -> httpx.Response:
    """Make one attempt of a request within ``bounds``; return the response, its body read.

    Redirects, when followed, are followed here hop by hop (the client is
    always asked not to), so that the policy judges every hop. The deadline
    runs on ``clock`` (default: the event loop's own time).
    """
    request = client.build_request(method, url, params=params, headers=headers, content=content)
    attempt = _attempt(client, request, follow_redirects, bounds)
    return await _within_deadline(attempt, request, bounds, clock)


async def _within_deadline(
    attempt: Coroutine[Any, Any, httpx.Response],
    request: httpx.Request,
    bounds: Bounds,
    clock: Clock | None,
) -> httpx.Response:
    deadline = bounds.deadline
    if deadline is None:
        return await attempt
    if clock is None or isinstance(clock, SystemClock):
        try:
            async with asyncio.timeout(deadline):
                return await attempt
        except TimeoutError:
            # Raised outside the block: the cancelled transfer must not ride along as context.
            pass
    elif (answered := await _race(attempt, clock, deadline)) is not None:
        return answered
    raise DeadlineExceeded(
        f"no whole answer within the {deadline:g}s deadline from {request.url.host}"
    )


async def _race(
    attempt: Coroutine[Any, Any, httpx.Response], clock: Clock, deadline: float
) -> httpx.Response | None:
    """Await ``attempt`` until ``clock`` has slept ``deadline``; ``None`` when it has not ended.

    The deadline on an injected clock (a test's virtual one), which the event
    loop's own timeouts cannot read.
    """
    work = asyncio.ensure_future(attempt)
    timer = asyncio.ensure_future(clock.sleep(deadline))
    try:
        await asyncio.wait((work, timer), return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        if not work.done():
            work.cancel()
            # Wait for the transfer to close its response before saying why.
            await asyncio.gather(work, return_exceptions=True)
    if work.cancelled():
        return None
    return work.result()


async def _attempt(
    client: httpx.AsyncClient, request: httpx.Request, follow: bool, bounds: Bounds
) -> httpx.Response:
    response = await _open(client, request, follow, bounds)
    try:
        await _read_capped(response, bounds.max_body_bytes)
    except BaseException:
        await response.aclose()
        raise
    if response.is_success and response.status_code not in _NO_CONTENT:
        check_payload(response, download=follow)
    return response


async def _open(
    client: httpx.AsyncClient, request: httpx.Request, follow: bool, bounds: Bounds
) -> httpx.Response:
    """Send ``request`` (following redirects hop by hop when ``follow``); body still unread."""
    response = await client.send(request, stream=True, follow_redirects=False)
    try:
        history: list[httpx.Response] = []
        while follow and response.next_request is not None:
            hop = response.next_request
            check_redirect(response.request.url, hop.url, bounds)
            if len(history) >= client.max_redirects:
                raise httpx.TooManyRedirects("too many redirects", request=hop)
            await response.aclose()
            history.append(response)
            response = await client.send(hop, stream=True, follow_redirects=False)
            response.history = list(history)
    except BaseException:
        await response.aclose()
        raise
    return response


# Statuses that carry no body by definition: nothing to check.
_NO_CONTENT: Final = frozenset({204, 205})


async def _read_capped(response: httpx.Response, cap: int | None) -> None:
    """Read ``response``'s body into it, aborting once it passes ``cap`` bytes (decoded)."""
    host = response.request.url.host
    if cap is not None:
        declared = response.headers.get("content-length", "")
        if declared.strip().isdigit() and int(declared) > cap:
            raise BodyTooLarge(f"answer of {int(declared)} bytes from {host} is over the cap")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if cap is not None and size > cap:
            raise BodyTooLarge(f"answer from {host} is over the cap of {cap} bytes")
        chunks.append(chunk)
    # What Response.aread() stores, gathered under the cap instead.
    response._content = b"".join(chunks)
    await response.aclose()


# -- redirects ----------------------------------------------------------------------------------


def check_redirect(source: httpx.URL, target: httpx.URL, bounds: Bounds) -> None:
    """Raise :class:`RedirectRefused` unless a hop from ``source`` to ``target`` is allowed.

    Refused: ``https`` to anything else (unless ``allow_insecure_redirects``),
    and a public ``source`` to a non-public ``target`` (unless
    ``allow_private_redirects``). A non-public source may go anywhere: the
    caller chose to talk to a local service (a proxy, a test server), whose
    own redirects stay its business.
    """
    downgrade = source.scheme == "https" and target.scheme != "https"
    if downgrade and not bounds.allow_insecure_redirects:
        raise RedirectRefused(f"redirect from https to {target.scheme} refused ({target.host})")
    if (
        not bounds.allow_private_redirects
        and not is_public_host(target.host)
        and is_public_host(source.host)
    ):
        raise RedirectRefused(
            f"redirect from {source.host} to a non-public address refused ({target.host})"
        )


_LEGACY_IPV4: Final = re.compile(r"^[0-9a-fx.]+$")


def is_public_host(host: str) -> bool:
    """Return whether ``host`` may be a public address, judged without any DNS lookup.

    ``localhost`` (and ``*.localhost``) and literal addresses that are not
    globally routable (loopback, private, link-local, unique-local,
    unspecified, shared, reserved, multicast) are not public; IPv4 written the
    old ways (``127.1``, ``0x7f000001``, ``2130706433``) and IPv4-mapped IPv6
    are read as the address they name. Any other name counts as public.
    """
    name = host.strip().strip("[]").rstrip(".").lower()
    if not name or name == "localhost" or name.endswith(".localhost"):
        return False
    address = _literal_address(name)
    if address is None:
        return True
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def _literal_address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name.split("%", 1)[0])  # an IPv6 zone id names no address
    except ValueError:
        pass
    if _LEGACY_IPV4.match(name) and any(c.isdigit() for c in name):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(name))  # libc's parse; no lookup
        except OSError:
            return None
    return None


# -- payloads -----------------------------------------------------------------------------------


def check_payload(response: httpx.Response, *, download: bool = False) -> None:
    """Raise :class:`UnexpectedPayload` unless a 2xx body is whole and what it claims to be.

    Judged from the declared ``Content-Type`` and the body's first bytes: JSON
    must parse; XML must close its root element; a PDF must start (within its
    first KiB) with ``%PDF-``; an HTML
    page is refused, unless ``download`` (a file link, which the caller checks
    against the type it was listed as). An empty body passes unless it claims
    JSON.
    """
    problem = _payload_problem(_declared(response), response.content, download=download)
    if problem is not None:
        raise UnexpectedPayload(f"{problem} from {response.request.url.host}")


def _declared(response: httpx.Response) -> str:
    declared: str = response.headers.get("content-type", "")
    return declared.split(";", 1)[0].strip().lower()


def _payload_problem(
    declared: str, content: bytes, *, download: bool, whole: bool = True
) -> str | None:
    """Say how ``content`` is not a whole answer of its kind, or ``None``.

    ``whole=False``: ``content`` is the start and the end of a longer body
    (a streamed download), so JSON, which only a whole parse can judge, passes.
    """
    kind = _kind_of(declared, content)
    if kind == "json":
        return _json_problem(content) if whole else None
    if kind == "xml":
        return _xml_problem(content)
    if kind == "pdf":
        return _pdf_problem(content)
    if kind == "html" and not download:
        return "an HTML page where data was expected"
    return None


def _kind_of(declared: str, content: bytes) -> str | None:
    head = content[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if declared in {"text/html", "application/xhtml+xml"}:
        return "html"
    if declared == "application/pdf":
        return "pdf"
    if declared in {"application/json", "text/json"} or declared.endswith("+json"):
        return "json"
    if head.startswith((b"<!doctype html", b"<html")):
        return "html"
    if declared in {"application/xml", "text/xml"} or declared.endswith("+xml"):
        return "html" if content and root_name(content) == "html" else "xml"
    # Only the start is re-encoded (256 bytes: whole UTF-16 and UTF-32 code units), so a
    # UTF-16 text file with a byte-order mark is not taken for XML.
    if head.startswith(b"<?xml") or narrow_xml(content[:256]).lstrip().startswith(b"<?xml"):
        return "html" if root_name(content) == "html" else "xml"
    if head.startswith(b"%pdf-"):
        return "pdf"
    return None


def _json_problem(content: bytes) -> str | None:
    try:
        json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return "JSON that does not parse (truncated?)"
    return None


# A document may end with comments, processing instructions and white space after its root.
_TRAILER: Final = re.compile(rb"(?:\s|<!--(?:(?!-->).)*-->|<\?(?:(?!\?>).)*\?>)*\Z", re.DOTALL)


def _xml_problem(content: bytes) -> str | None:
    if not content.strip():
        return None
    narrow = narrow_xml(content)
    name = root_name(narrow)
    if name is None:
        return "XML without a root element"
    tail = narrow[-(len(name) + 4096) :]
    end = _TRAILER.search(tail)
    body_end = tail[: end.start()] if end is not None else tail
    tag = rb"(?:[\w.\-]+:)?" + re.escape(name.encode())
    closing = re.compile(rb"</" + tag + rb"\s*>\Z")
    # "<root .../>": a document whose root has no content ends with the root itself.
    self_closed = re.compile(rb"<" + tag + rb"(?:\s[^<]*)?/>\Z")
    if closing.search(body_end) or self_closed.search(body_end):
        return None
    return "XML that stops before its root element closes (truncated?)"


def _pdf_problem(content: bytes) -> str | None:
    # Only the header: many real PDFs end in junk after their %%EOF, or lack it.
    if b"%PDF-" not in content[:1024]:
        return "not a PDF (no %PDF- header)"
    return None


# -- streamed downloads -------------------------------------------------------------------------


class Sink(Protocol):
    """Where :func:`stream_bounded` puts a body: anything with ``write(bytes)``."""

    def write(self, data: bytes, /) -> object:
        """Take the next piece of the body."""
        ...


HeadCheck = Callable[[bytes], None]
"""Judges a download's first bytes (1 KiB or more, or all of a shorter body); raises to refuse."""


@dataclass(frozen=True, slots=True)
class Downloaded:
    """What a streamed download ended with.

    ``path`` is where the body now is (only after a 200; ``None`` otherwise,
    and nothing was written); ``size`` its length in bytes and ``sha256`` its
    hex digest, both of the decoded body as written.
    """

    status_code: int
    path: Path | None = None
    size: int = 0
    sha256: str | None = None


@runtime_checkable
class Downloader(Http, Protocol):
    """An :class:`~litfetch_df._http.Http` that can also stream a GET's body to a file.

    :class:`~litfetch_df.Session` implements it; an ``Http`` without it is
    served by reading the body into memory and writing it afterwards.
    """

    async def download_to(
        self,
        url: str,
        path: str | Path,
        *,
        head_check: HeadCheck | None = None,
        rate: Rate = Rate.DEFAULT,
        follow_redirects: bool = True,
    ) -> Downloaded:
        """Stream a paced, retried GET of ``url`` into ``path``; see :meth:`Session.download_to`."""
        ...


# How much of a streamed body's start is kept for the checks (a DOCTYPE may be long), and
# how much of its end (an XML root must close there). Both are multiples of four, so a
# UTF-16 or UTF-32 body's start and end still join at a whole code unit.
_HEAD_KEPT: Final = 64 * 1024
_TAIL_KEPT: Final = 8 * 1024
# The first bytes judged before any more of the body is taken.
_HEAD_JUDGED: Final = 1024


async def stream_bounded(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str] | None,
    follow_redirects: bool,
    bounds: Bounds,
    sink: Sink,
    head_check: HeadCheck | None = None,
    clock: Clock | None = None,
) -> httpx.Response:
    """Make one bounded GET attempt, streaming a 2xx body into ``sink``; return the response.

    Every bound of :func:`send_bounded` holds: the deadline covers the whole
    transfer, the size cap aborts it as soon as it is passed, redirects are
    judged hop by hop. The body is never held whole: only its first 64 KiB
    and last 8 KiB are kept, for the checks. Its first KiB is judged before
    the rest is taken (a PDF must say ``%PDF-``; then ``head_check``, which
    raises to refuse it), and its end when it ends (an XML root must close).
    The response's own ``content`` stays empty for a 2xx; any other status's
    (short) body is read into it under the cap, as :func:`send_bounded` does.
    """
    request = client.build_request("GET", url, headers=headers)
    attempt = _stream_attempt(client, request, follow_redirects, bounds, sink, head_check)
    return await _within_deadline(attempt, request, bounds, clock)


async def _stream_attempt(
    client: httpx.AsyncClient,
    request: httpx.Request,
    follow: bool,
    bounds: Bounds,
    sink: Sink,
    head_check: HeadCheck | None,
) -> httpx.Response:
    response = await _open(client, request, follow, bounds)
    try:
        if response.is_success and response.status_code not in _NO_CONTENT:
            await _stream_capped(response, bounds.max_body_bytes, sink, head_check)
        else:
            await _read_capped(response, bounds.max_body_bytes)
    except BaseException:
        await response.aclose()
        raise
    return response


class _Sample:
    """The start and the end of a streamed body, kept for the payload checks."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.whole = True

    def add(self, chunk: bytes) -> None:
        room = _HEAD_KEPT - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        excess = len(self.tail) - _TAIL_KEPT
        if excess > _TAIL_KEPT:  # trimmed in batches, so the copying stays linear
            del self.tail[: excess - excess % 4]
            self.whole = False

    def content(self) -> bytes:
        return bytes(self.head + self.tail)


async def _stream_capped(
    response: httpx.Response, cap: int | None, sink: Sink, head_check: HeadCheck | None
) -> None:
    host = response.request.url.host
    if cap is not None:
        declared_length = response.headers.get("content-length", "")
        if declared_length.strip().isdigit() and int(declared_length) > cap:
            size = int(declared_length)
            raise BodyTooLarge(f"answer of {size} bytes from {host} is over the cap")
    declared = _declared(response)
    sample = _Sample()
    size = 0
    judged = False
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if cap is not None and size > cap:
            raise BodyTooLarge(f"answer from {host} is over the cap of {cap} bytes")
        sample.add(chunk)
        if not judged and len(sample.head) >= _HEAD_JUDGED:
            _judge_head(declared, bytes(sample.head), host, head_check)
            judged = True
        sink.write(chunk)
    if not judged:
        _judge_head(declared, bytes(sample.head), host, head_check)
    problem = _payload_problem(declared, sample.content(), download=True, whole=sample.whole)
    if problem is not None:
        raise UnexpectedPayload(f"{problem} from {host}")
    response._content = b""  # the body went to the sink; an empty one says "not here"
    await response.aclose()


def _judge_head(declared: str, head: bytes, host: str, head_check: HeadCheck | None) -> None:
    if _kind_of(declared, head) == "pdf":
        problem = _pdf_problem(head)
        if problem is not None:
            raise UnexpectedPayload(f"{problem} from {host}")
    if head_check is not None:
        head_check(head)
